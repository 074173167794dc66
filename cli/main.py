"""`erasure`: erase one data subject from every tier of an agent's memory, verify, and prove it.

Exit codes: 0 ok; 1 failure; 2 bad input or usage; 3 configuration; 4 not found; 5 conflict;
6 blocked (hold, closed request, other tenant); 7 verification found residue; 8 store problem;
9 a subprocessor refused or kept failing; 10 other people's data lost (over-erasure).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import Annotated, Any, NoReturn

import typer

# typer vendors its own click: its usage errors are not `click.ClickException`s.
from typer._click.exceptions import ClickException
from typer.core import TyperCommand, TyperGroup

from cli import params
from erasure.errors import ErasureError, StoreError
from erasure.sqlite import DAMAGED

params.install()  # before any command is built: plain values need no pydantic adapter

# Commands are registered lazily: `erasure --help` and commands that run no flow must answer at once,
# so a command's module (and what it imports: Prefect, the flows, numpy, ...) is imported only when that
# command is invoked. The help listed for each command is kept here; tests/cli/test_cli_lazy.py checks it
# against the real help of each module.
_LAZY: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    # name: (module, attribute, extension modules, short help). A Typer attribute is a command group;
    # a function is a top-level command. Extension modules add commands to the group (`request run`).
    "ingest": (
        "cli.store",
        "ingest",
        (),
        "Ingest memory items into the store: the whole file is validated "
        "before anything is written; erased (suppressed) and already-ingested items are skipped and "
        "counted; items of an erased identity (id, email or phone) are held, stored nowhere, and "
        "counted.",
    ),
    "attest": (
        "cli.attest",
        "attest",
        (),
        "Show the DPO what they sign (per-tier table, exceptions, verification), then add their signature.",
    ),
    "export": (
        "cli.attest",
        "export",
        (),
        "Write the sealed pack, the public keys and VERIFY.md (a full openssl recipe) for the regulator.",
    ),
    "sla": (
        "cli.sla",
        "sla",
        (),
        "Open requests against their legal deadlines (days left, state, extended, paused, at risk, breached).",
    ),
    "serve": (
        "cli.serve",
        "serve",
        (),
        "Start the local Prefect server + UI, deploy prefect.yaml, start a worker; Ctrl-C stops all.",
    ),
    "store": ("cli.store", "app", (), "The agent-memory store: create it (empty or with demo data) and inspect it."),
    "request": (
        "cli.request",
        "app",
        ("cli.run", "cli.reverify"),
        "Submit erasure requests, show them, and pause, resume or extend their clocks.",
    ),
    "keys": (
        "cli.keys",
        "app",
        (),
        "Create and rotate signing keys (engine, DPO), show key fingerprints and the audit key.",
    ),
    "pack": ("cli.pack", "app", (), "Build, show, attest and verify signed proof packs."),
    "hold": ("cli.hold", "app", (), "Litigation holds: while one is active on a subject, nothing of them is erased."),
    "suppression": (
        "cli.suppression",
        "app",
        (),
        "Sticky erasure: list suppressed (source, source_ref) keys and erased identities, allow re-ingest.",
    ),
    "targets": (
        "cli.targets",
        "app",
        (),
        "The agent memories a request erases from: list them, count a subject in them.",
    ),
    "restore": (
        "cli.restore",
        "app",
        (),
        "Restored stores: show their erasure epochs against the ledger, replay their erasures.",
    ),  # issue 26
    "backups": (
        "cli.backups",
        "app",
        (),
        "Declared backups: what they still hold and until when; follow-up statements once they are gone.",
    ),  # issue 26
    "mcp": (
        "cli.mcp",
        "mcp",
        (),
        "Serve the erasure tools to agents over the Model Context Protocol (stdio, or --http).",
    ),  # issue 38
    "server": (
        "cli.server",
        "app",
        (),
        "The home's long-lived Prefect server and worker in the background: start, stop, status.",
    ),
}


def load_command(name: str) -> Any:
    """Import the module of command `name` and return its click command (a group or a command)."""
    import importlib

    module, attr, extensions, _help = _LAZY[name]
    obj = getattr(importlib.import_module(module), attr)
    for ext in extensions:
        importlib.import_module(ext)
    holder = typer.Typer(rich_markup_mode="rich")
    holder.callback()(lambda: None)  # a callback keeps `holder` a group even with one command
    if isinstance(obj, typer.Typer):
        holder.add_typer(obj, name=name)
    else:
        holder.command(name=name)(obj)
    return typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]


class LazyGroup(TyperGroup):
    """The `erasure` group: a stub (name and help) per command for listings, the real command loaded
    when it is invoked (`resolve_command`)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, (_m, _a, _e, short) in _LAZY.items():
            self.commands.setdefault(name, _Stub(name=name, help=short))

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        if isinstance(cmd, _Stub) and name is not None:
            cmd = self.commands[name] = load_command(name)
        return name, cmd, rest


class _Stub(TyperCommand):
    """Stands for a command that is not imported yet (help listings only)."""


app = typer.Typer(
    name="erasure",
    help=__doc__,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Plain help for the top level: typer's rich help formatter costs a quarter of a second of imports,
    # twice what `erasure --help` needs in all. Every command's own help stays rich.
    rich_markup_mode=None,
    cls=LazyGroup,
)


@app.callback()
def _erasure(
    api_url: Annotated[
        str | None,
        typer.Option(
            "--api-url",
            help="The Prefect API to use, trusted with the home's credential (PREFECT_API_URL alone gets it "
            "only when it is the home's own server).",
            show_default=False,
        ),
    ] = None,
) -> None:
    # A callback makes `app` a group while its commands are not registered with typer (help: __doc__).
    if api_url:
        from cli.prefect_api import name_api_url

        name_api_url(api_url)


@functools.cache
def _command() -> Any:
    """The click command tree of `app`, built once per process (building it takes ~50 ms)."""
    return typer.main.get_command(app)


def run(args: Sequence[str] | None = None) -> int:
    """Run `erasure ARGS` (default: the process's arguments) and return its exit code.

    Every `ErasureError` is one line, `error: <message>`, and its exit code; a usage error (unknown
    option or command, missing argument, bad value) prints click's usage and message and exits 2."""
    try:
        rc = _command().main(args=list(args) if args is not None else None, prog_name="erasure", standalone_mode=False)
        return rc if isinstance(rc, int) else 0
    except ErasureError as exc:
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except DAMAGED as exc:  # a page found damaged after the database opened
        typer.echo(f"error: a database is damaged ({exc}): restore it from a backup", err=True)
        return StoreError.exit_code
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
