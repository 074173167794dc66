"""`erasure` answers at once: a command's module is imported only when that command runs, so commands
that run no flow import neither Prefect nor the flows (service-mode issue, item 8). Timing lives in
bench/cli.py; here we check what gets imported, with `python -X importtime`, in real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from erasure.config import PROJECT_ROOT

HEAVY = ("prefect", "flows", "numpy", "httpx", "sqlite_vec")


def imported_modules(args: list[str], home: Path) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Run `python -X importtime -m cli.main ARGS`; the set of modules it imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ERASURE_"))}
    env.update(
        ERASURE_HOME=str(home),
        ERASURE_EVIDENCE=str(home.parent / "evidence"),
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.main", *args],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    mods = {line.split("|")[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}
    return mods, res


def heavy(mods: set[str]) -> set[str]:
    return {m for m in mods if m.split(".")[0] in HEAVY}


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["sla", "--json"],
        ["request", "list", "--json"],
        ["hold", "list"],
        ["suppression", "list"],
        ["keys", "--help"],
        ["pack", "verify", "--help"],
        ["request", "--help"],
        ["server", "--help"],
    ],
)
def test_commands_that_run_no_flow_import_neither_prefect_nor_the_flows(tmp_path: Path, args: list[str]) -> None:
    from memory.schema import create

    create(tmp_path / "home" / "store").close()
    mods, res = imported_modules(args, tmp_path / "home")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "typer" in mods  # the probe does see the imports
    assert not heavy(mods), sorted(heavy(mods))


def test_request_submit_imports_no_prefect(tmp_path: Path) -> None:
    env_file = tmp_path / "req.json"
    env_file.write_text(
        json.dumps(
            {
                "request_id": "req-lazy-1",
                "tenant_id": "default",
                "subject": {"id": "subj-lazy-1"},
                "legal_basis": "GDPR",
                "received_at": "2026-01-05T09:00:00+00:00",
                "requester_identity_proof_ref": "idv/1",
                "reason": "Art.17 request",
            }
        )
    )
    mods, res = imported_modules(["request", "submit", str(env_file)], tmp_path / "home")
    assert res.returncode == 0, res.stderr[-2000:]
    assert not heavy(mods), sorted(heavy(mods))
    mods, res = imported_modules(["request", "show", "req-lazy-1", "--json"], tmp_path / "home")
    assert res.returncode == 0 and "req-lazy-1" in res.stdout
    assert not heavy(mods), sorted(heavy(mods))
    # Listing and counting read request rows, never an envelope: no pydantic (the models of the envelope,
    # the subject and the step record), so they answer in about twice a bare `import typer` (issue 37).
    for args in (["sla", "--json"], ["request", "list", "--json"]):
        mods, res = imported_modules(args, tmp_path / "home")
        assert res.returncode == 0 and "req-lazy-1" in res.stdout, (args, res.stderr[-2000:])
        assert not {m for m in mods if m.split(".")[0] == "pydantic"}, args


def test_a_command_groups_help_imports_only_typer_and_rich(tmp_path: Path) -> None:
    """`erasure request --help` lists options and help texts: it needs typer and rich (its help formatter),
    not what the commands run. It imported pydantic (the request models), the matching rules and the
    service layer: 5.5x a bare `import typer` (issue 37: the CLI without a flow at most 3x)."""
    mods, res = imported_modules(["request", "--help"], tmp_path / "home")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "reverify" in res.stdout and "typer.rich_utils" in mods  # the help is whole, and still rich
    unneeded = {
        m
        for m in mods
        if m.split(".")[0] in ("pydantic", "service", "proof", "anyascii")
        or m.startswith(("erasure.models", "erasure.matching", "erasure.request_records", "erasure.targets"))
    }
    assert not unneeded, sorted(unneeded)


def test_the_listed_help_is_each_commands_own_help() -> None:
    """The listing keeps a copy of every command's help so `erasure --help` imports none of them."""
    from cli.main import _LAZY, load_command

    for name, (_module, _attr, _ext, short) in _LAZY.items():
        real = load_command(name)
        first_paragraph = " ".join((real.help or "").split("\n\n")[0].split())
        assert short == first_paragraph, name


def test_a_lazily_loaded_group_still_has_every_command() -> None:
    from typer.testing import CliRunner

    from cli.main import app

    res = CliRunner().invoke(app, ["request", "--help"])
    assert res.exit_code == 0, res.output
    for cmd in ("submit", "show", "list", "pause", "resume", "extend", "run"):
        assert f" {cmd} " in res.output, cmd
    res = CliRunner().invoke(app, ["nonsense"])
    assert res.exit_code != 0


def test_json_output_imports_no_rich_and_tables_still_print(tmp_path: Path) -> None:
    """The console is made on first print: `sla --json` writes JSON without importing rich (about a
    quarter of what the command cost), and `sla` without `--json` still prints its rich table."""
    from memory.schema import create

    create(tmp_path / "home" / "store").close()
    mods, res = imported_modules(["sla", "--json"], tmp_path / "home")
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout) == []
    assert not {m for m in mods if m.split(".")[0] == "rich"}
    mods, res = imported_modules(["sla"], tmp_path / "home")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Open erasure requests (0)" in res.stdout
    assert "rich.console" in mods


def test_the_lazy_consoles_drive_rich_live_tables_and_progress_bars() -> None:
    """rich's Live and Progress enter their console (`with console:`), which no __getattr__ forwards: the
    lazy consoles of cli/shell.py must be context managers too (`erasure request run` failed with a
    TypeError when its live table started)."""
    import io

    from rich.live import Live
    from rich.progress import Progress
    from rich.table import Table

    from cli.shell import _LazyConsole

    out = io.StringIO()
    console = _LazyConsole(file=out, force_terminal=False, width=60)
    with Live(Table("tier"), console=console, transient=False) as live:  # type: ignore[arg-type]
        live.update(Table("tier", "status"))
    with Progress(console=console) as bar:  # type: ignore[arg-type]
        bar.add_task("erasing", total=1)
    assert "tier" in out.getvalue()
