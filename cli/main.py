"""`erasure`: erase one data subject from every tier of an agent's memory, verify, and prove it.

Exit codes: 0 ok; 1 failure; 2 bad input or usage; 3 configuration; 4 not found; 5 conflict;
6 blocked (hold, closed request, other tenant); 7 verification found residue; 8 store problem;
9 a subprocessor refused or kept failing; 10 other people's data lost (over-erasure).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import typer

# typer vendors its own click: its usage errors are not `click.ClickException`s.
from typer._click.exceptions import ClickException

from erasure.errors import ErasureError

app = typer.Typer(
    name="erasure",
    help=__doc__,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

# Each command group lives in its own module; register it here.
_GROUPS: list[tuple[str, str, str]] = [
    # (module, attribute, name)
    ("cli.store", "app", "store"),
    ("cli.request", "app", "request"),
    ("cli.keys", "app", "keys"),
    ("cli.pack", "app", "pack"),
    ("cli.hold", "app", "hold"),
    ("cli.suppression", "app", "suppression"),
    ("cli.targets", "app", "targets"),
]
# Modules that add commands to a group above (e.g. `request run`) are imported for that effect.
_EXTENSIONS: list[str] = ["cli.run"]
_COMMANDS: list[tuple[str, str]] = [
    # (module, function) registered as top-level commands
    ("cli.store", "ingest"),
    ("cli.attest", "attest"),
    ("cli.attest", "export"),
    ("cli.sla", "sla"),
    ("cli.serve", "serve"),
]


def _register() -> None:
    import importlib

    for module in _EXTENSIONS:
        importlib.import_module(module)
    for module, attr, name in _GROUPS:
        sub = getattr(importlib.import_module(module), attr)
        app.add_typer(sub, name=name)
    for module, func in _COMMANDS:
        app.command()(getattr(importlib.import_module(module), func))


_register()


@functools.cache
def _command() -> Any:
    """The click command tree of `app`, built once per process (building it takes ~50 ms)."""
    return typer.main.get_command(app)


def run(args: Sequence[str] | None = None) -> int:
    """Run `erasure ARGS` (default: the process's arguments) and return its exit code.

    Every `ErasureError` is one line, `error: <message>`, and its exit code; a usage error (unknown
    option or command, missing argument, bad value) prints click's usage and message and exits 2."""
    try:
        rc = _command().main(args=list(args) if args is not None else None, prog_name="erasure",
                             standalone_mode=False)
        return rc if isinstance(rc, int) else 0
    except ErasureError as exc:
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except ClickException as exc:  # typer's own click: usage errors (exit 2) and file errors
        exc.show()
        return exc.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 1
    except typer.Exit as exc:
        return exc.exit_code


def main(args: Sequence[str] | None = None) -> NoReturn:
    """Entry point: `run` and exit with its code."""
    sys.exit(run(args))


if __name__ == "__main__":
    main()
