"""cli/params.py: typer's coercion, plain values without pydantic, gives what typer's own gives (the
oracle: typer's `build_runtime_param`, its pydantic adapter), values and errors alike."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param

from cli.params import Deferred, deferred

app = typer.Typer()


@app.command()
def _cmd(
    text: Annotated[str | None, typer.Option()] = None,
    days: Annotated[int, typer.Option(min=0, max=400)] = 7,
    ratio: Annotated[float, typer.Option()] = 0.5,
    home: Annotated[Path | None, typer.Option()] = None,
    must: Annotated[Path | None, typer.Option(exists=True, dir_okay=False)] = None,
) -> None:
    pass


COMMAND = typer.main.get_command(app)
PARAMS = {p.name: p for p in COMMAND.params}


def outcome(runtime: Any, name: str, value: Any) -> tuple[str, Any]:
    param = PARAMS[name]
    try:
        got = runtime.coerce(value, param=param, ctx=Context(COMMAND))
        return ("ok", (type(got), got))
    except BadParameter as exc:
        return ("error", exc.format_message())


values = st.one_of(
    st.none(),
    # argv and the environment carry no NUL, and no surrogate but those undecodable bytes become
    # (surrogateescape: U+DC80-U+DCFF; a lone U+D800 fails in os.stat, in typer's own adapter too)
    st.text(st.characters(exclude_characters="\x00", codec="utf-8"), max_size=12),
    st.text(st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF), min_size=1, max_size=3).map("caf".__add__),
    st.integers(-5, 500),
    st.floats(allow_nan=False, width=32),
    st.sampled_from(["", "-", ".", "/", "/etc", "/no/such", "~", " 7 ", "1_000", "1e3", "0x10", "3.0"]),
)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(PARAMS)), value=values)
def test_plain_values_coerce_as_typers_own_adapter_does(name: str, value: Any) -> None:
    desc = PARAMS[name].type_descriptor  # type: ignore[attr-defined]
    assert outcome(deferred(desc), name, value) == outcome(build_runtime_param(desc), name, value)


def test_the_cli_coerces_through_the_deferred_one_and_builds_no_adapter_for_plain_values() -> None:
    from cli.main import run

    assert run(["--help"]) == 0  # builds the top-level command (cli.main installs on import)
    desc = PARAMS["days"].type_descriptor  # type: ignore[attr-defined]
    runtime = typer.core.build_runtime_param(desc)  # type: ignore[attr-defined]
    assert isinstance(runtime, Deferred)
    assert outcome(runtime, "days", 7) == ("ok", (int, 7))
    assert "typer_param" not in vars(runtime)  # no pydantic adapter for a default in range
    assert outcome(runtime, "days", "401")[0] == "error"  # out of range: typer's own message
