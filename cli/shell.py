"""Options and helpers shared by every command."""

from __future__ import annotations

import json
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from erasure.config import Home
from erasure.service_user import become_home_owner

if TYPE_CHECKING:
    from rich.console import Console


class _LazyConsole:
    """A rich `Console` made on first use: a command that prints JSON does not import rich (80 ms)."""

    def __init__(self, **options: Any) -> None:
        self._options = options

    @cached_property
    def _console(self) -> Console:
        from rich.console import Console

        return Console(**self._options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._console, name)

    # Looked up on the class, never through __getattr__: rich's Live and Progress enter their console.
    def __enter__(self) -> Console:
        return self._console.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._console.__exit__(*exc)


console = cast("Console", _LazyConsole())
err_console = cast("Console", _LazyConsole(stderr=True))

HomeOpt = Annotated[
    Path | None,
    typer.Option(
        "--home", envvar="ERASURE_HOME", help="State directory (default: .erasure/ in the project).", show_default=False
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def home_of(home: Path | None, *, as_root: bool = False) -> Home:
    """Resolve, create and export the home so Prefect and subprocesses use it too. Run by root on a home
    given to a user, the command becomes that user first (erasure/service_user.py); `as_root`: the
    commands that set up and stop the server, which need root for that and drop it themselves."""
    h = Home.resolve(home)
    if not as_root:
        become_home_owner(h)
    h = h.ensure()
    h.export_env()
    return h


def print_json(obj: Any) -> None:
    """JSON to stdout, sorted keys, ISO dates."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
