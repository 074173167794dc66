"""Hardening (issue 23, item 10): a hostile `targets.toml` is refused with one line and exit 3 before
the TOML parser sees it. Deeply nested arrays or inline tables used to give a RecursionError traceback
(exit 1), and a 60 KB dotted key took tens of seconds (the parser's work grows with the square of the
key's parts). Depth, key parts and size are bounded before parsing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.config import Home
from erasure.errors import ConfigError
from erasure.targets import MAX_KEY_PARTS, MAX_TOML_DEPTH, load_targets
from tests import budget
from tests.cli_fixtures import erasure

HEAD = '[[targets]]\nname = "kb"\nkind = "chroma"\npath = "chroma"\n'


@pytest.fixture(autouse=True)
def _targets_env_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """`erasure targets --targets FILE` exports ERASURE_TARGETS for flows: undone after each test."""
    monkeypatch.setenv("ERASURE_TARGETS", "")


def _list(home: Home, conf: Path) -> tuple[int, str, float]:
    t0 = time.monotonic()
    res = erasure("targets", "list", "--home", str(home.root), "--targets", str(conf))
    return res.code, res.err, time.monotonic() - t0


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err[-2000:]
    assert lines[0].startswith("error: targets:"), lines[0]
    return lines[0]


# --- attack fixtures, named after the attack -----------------------------------------------------


@pytest.fixture
def nested_arrays_bomb(tmp_path: Path) -> Path:
    p = tmp_path / "nested-arrays.toml"
    p.write_text(HEAD + "x = " + "[" * 5000 + "]" * 5000 + "\n")
    return p


@pytest.fixture
def nested_inline_tables_bomb(tmp_path: Path) -> Path:
    p = tmp_path / "nested-inline-tables.toml"
    p.write_text(HEAD + "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n")
    return p


@pytest.fixture
def dotted_key_bomb(tmp_path: Path) -> Path:
    p = tmp_path / "dotted-key.toml"
    p.write_text(HEAD + "a" + ".a" * 30_000 + " = 1\n")  # 60 KB: one key of 30,001 parts
    return p


@pytest.fixture
def quoted_dotted_key_bomb(tmp_path: Path) -> Path:
    p = tmp_path / "quoted-dotted-key.toml"
    p.write_text(HEAD + '""' + '.""' * 20_000 + " = 1\n")
    return p


@pytest.fixture
def dotted_table_header_bomb(tmp_path: Path) -> Path:
    p = tmp_path / "dotted-header.toml"
    p.write_text(HEAD + "[" + ".".join(["t"] * 20_000) + "]\n")
    return p


@pytest.mark.parametrize("attack", ["nested_arrays_bomb", "nested_inline_tables_bomb"])
def test_deep_nesting_is_refused_with_exit_3(home: Home, attack: str, request: pytest.FixtureRequest) -> None:
    code, err, _ = _list(home, request.getfixturevalue(attack))
    assert code == 3, err[-500:]
    assert "nested more than" in _one_error_line(err)


@pytest.mark.parametrize("attack", ["dotted_key_bomb", "quoted_dotted_key_bomb", "dotted_table_header_bomb"])
def test_a_key_of_thousands_of_parts_is_refused_at_once(
    home: Home, attack: str, request: pytest.FixtureRequest
) -> None:
    code, err, took = _list(home, request.getfixturevalue(attack))
    assert code == 3, err[-500:]
    assert "parts" in _one_error_line(err)
    assert took < 2.0, f"{took:.1f} s"


def test_bounds_leave_ordinary_files_alone(home: Home, tmp_path: Path) -> None:
    conf = tmp_path / "ok.toml"
    conf.write_text(
        'tenant = "acme"  # a comment with [[[ and {{{ and a.b.c.d\n'
        + HEAD
        + 'subject_key = "user.id.x"\nlabels = ["a]", "{b", \'[c\', """\n]]]\n"""]\n'
        "threshold = 0.25\nopt = { a = { b = [1.5, [2.5, 3]] } }\nx.y.z = 1\n"
    )
    code, err, _ = _list(home, conf)
    assert code == 0, err


# --- the class of inputs: nesting and dotted keys of any size ------------------------------------


@st.composite
def nested_value(draw: st.DrawFn) -> tuple[str, int]:
    """A TOML value of arrays and inline tables, with its depth counted as it is built (the oracle)."""
    depth = draw(st.integers(1, MAX_TOML_DEPTH + 6))
    kinds = draw(st.lists(st.sampled_from(["array", "table"]), min_size=depth, max_size=depth))
    text = draw(st.sampled_from(["1", '"]}"', "'[{'", "2.5", "true"]))
    for k in reversed(kinds):
        text = f"[{text}]" if k == "array" else f"{{ k = {text} }}"
    return text, depth


@settings(max_examples=budget.examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=nested_value())
def test_property_depth_over_the_limit_is_refused_and_under_it_parses(
    home: Home, tmp_path: Path, value: tuple[str, int]
) -> None:
    text, depth = value
    conf = tmp_path / "prop-depth.toml"
    conf.write_text(HEAD + f"x = {text}\n")
    # the [[targets]] header is two levels (array of tables), the value's own brackets the rest
    if depth > MAX_TOML_DEPTH:
        with pytest.raises(ConfigError, match="nested more than"):
            load_targets(home.root, home.store_dir, conf)
    else:
        found = load_targets(home.root, home.store_dir, conf)
        assert found.by_name("kb").value("x") is not None


@settings(max_examples=budget.examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.lists(st.sampled_from(["a", "b-1", '"q.r"', "'s t'", "7"]), min_size=1, max_size=MAX_KEY_PARTS + 8),
    sep=st.sampled_from([".", " . ", ". "]),
)
def test_property_dotted_keys_over_the_limit_are_refused(
    home: Home, tmp_path: Path, parts: list[str], sep: str
) -> None:
    conf = tmp_path / "prop-key.toml"
    conf.write_text(HEAD + f"{sep.join(parts)} = 1\n")
    if len(parts) > MAX_KEY_PARTS:
        with pytest.raises(ConfigError, match="parts"):
            load_targets(home.root, home.store_dir, conf)
    else:
        try:
            load_targets(home.root, home.store_dir, conf)
        except ConfigError as exc:  # e.g. a repeated dotted prefix: TOML's own error, not our bound
            assert "parts" not in str(exc) and "nested" not in str(exc)
