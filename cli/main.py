"""`erasure`: erase one data subject from every tier of an agent's memory, verify, and prove it.

Exit codes: 0 ok; 1 failure; 2 bad input; 3 configuration; 4 not found; 5 conflict;
6 blocked (hold, closed request); 7 verification found residue; 8 store problem;
9 a subprocessor refused or kept failing; 10 other people's data lost (over-erasure).
"""

from __future__ import annotations

import sys

import typer

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


def main() -> None:
    """Entry point: run the app, turning every `ErasureError` into one line and its exit code."""
    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except ErasureError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(1)
    except (typer.Exit, SystemExit) as exc:
        code = getattr(exc, "exit_code", getattr(exc, "code", 0))
        sys.exit(code or 0)
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
