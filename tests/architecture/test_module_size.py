"""Small modules (issue 36): no Python module of the project is over 600 lines.

A module over the limit holds more than one job; split it into modules named for what each holds. The
only exemption is generated data, and each exemption is checked to still carry its generator's header,
so the exemption cannot come to cover hand-written code.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The folders whose Python modules the limit covers (every package, the tests and the bench scripts).
FOLDERS = ("wire", "erasure", "memory", "tasks", "probes", "proof", "service", "flows", "cli", "bench", "tests")

LIMIT = 600

#: Generated data, exempt from the limit, with the reason and the opening its generator writes.
GENERATED: dict[str, tuple[str, str]] = {
    "probes/rule/_ucd.py": (
        "Unicode tables generated from the UCD by compute_tables(); tests/probes/test_probe_rule.py checks them",
        '"""Unicode ranges by general category',
    ),
}


def line_count(path: Path) -> int:
    """The number of lines of a file, as `wc -l` counts them (a last line without newline counts too)."""
    text = path.read_text(encoding="utf-8")
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def modules() -> list[Path]:
    """Every Python file under the covered folders."""
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_no_module_is_over_600_lines() -> None:
    exempt = set(GENERATED)
    over = {
        rel: n
        for path in modules()
        if (rel := path.relative_to(ROOT).as_posix()) not in exempt and (n := line_count(path)) > LIMIT
    }
    assert not over, f"modules over {LIMIT} lines (split each into modules that hold one job): {over}"


def test_the_generated_exemptions_are_still_generated() -> None:
    for rel, (reason, header) in GENERATED.items():
        path = ROOT / rel
        assert path.is_file(), f"{rel} is exempt ({reason}) but no longer exists: drop its exemption"
        text = path.read_text(encoding="utf-8")
        assert text.startswith(header) and "Generated from" in text[:1000], (
            f"{rel} no longer starts with its generator's header: it is exempt only as generated data ({reason})"
        )


def test_the_covered_folders_hold_python_modules() -> None:
    # a renamed folder must not leave the limit checking nothing
    for folder in FOLDERS:
        assert any((ROOT / folder).rglob("*.py")), f"{folder}/ holds no Python module: update FOLDERS"
