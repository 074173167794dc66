"""`erasure suppression ...`: the sticky-erasure lists that ingest consults: erased (source, source_ref)
keys, and keyed hashes of erased identities (never shown; only counted)."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.engine_db import Engine
from erasure.errors import InputError
from service import consent

app = typer.Typer(
    help="Sticky erasure: list suppressed (source, source_ref) keys and erased identities, allow re-ingest.",
    no_args_is_help=True,
)


def _actor() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "cli"


@app.command("list")
def list_keys(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Every suppressed key with when and by which request it was erased."""
    keys, identities = consent.list_suppressed(home_of(home))
    if json_out:
        print_json(keys)
        return
    t = Table(title=f"suppressed keys ({len(keys)})")
    for col in ("id", "source", "source_ref", "erased_at", "request"):
        t.add_column(col)
    for k in keys:
        t.add_row(str(k["id"]), k["source"], k["source_ref"], k["erased_at"], k["request_ref"] or "")
    console.print(t)
    console.print(
        f"erased identities: {identities} keyed hash(es) of ids, emails and phones "
        "(items that match one are held at ingest)",
        highlight=False,
    )


@app.command()
def allow(
    reason: Annotated[
        str,
        typer.Option(
            "--reason",
            help="Why re-ingest is allowed (audited; must not name the subject nor anyone in the request vault).",
            show_default=False,
        ),
    ],
    source: Annotated[str | None, typer.Argument(help="The item's source.", show_default=False)] = None,
    source_ref: Annotated[str | None, typer.Argument(help="The item's source_ref.", show_default=False)] = None,
    identity_of: Annotated[
        str | None,
        typer.Option(
            "--identity-of",
            metavar="FILE.jsonl:LINE",
            help="Release the erased identity (id, email, phone) that holds the item on this line of an ingest "
            "file (`erasure ingest` counts such items as held_erased_identity).",
            show_default=False,
        ),
    ] = None,
    actor: Annotated[
        str | None, typer.Option("--actor", help="Who allows it (default: login name).", show_default=False)
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Re-consent: remove one (source, source_ref) key from the list, or (--identity-of) the erased
    identity that holds an item, so it may be ingested again (audited)."""
    by_key = source is not None and source_ref is not None
    if by_key == (identity_of is not None) or (not by_key and source is not None):
        raise InputError("give either SOURCE SOURCE_REF, or --identity-of FILE.jsonl:LINE")
    h = home_of(home)
    who = actor or _actor()
    if identity_of is not None:
        with Engine.session(h.engine_db) as engine:  # the command's engine
            kinds, key_still = consent.allow_identity(engine, h, identity_of, reason, who)
        console.print(f"allowed: the erased identity ({', '.join(kinds)}) may be ingested again", highlight=False)
        if key_still:
            console.print(
                "note: that item's (source, source_ref) key is still suppressed; allow it with "
                "`erasure suppression allow SOURCE SOURCE_REF`",
                highlight=False,
                markup=False,
            )
        return
    assert source is not None and source_ref is not None
    with Engine.session(h.engine_db) as engine:  # the command's engine
        consent.allow_key(engine, h, source, source_ref, reason, who)
    console.print("allowed: the key may be ingested again")


@app.command()
def check(
    file: Annotated[
        Path, typer.Argument(help="JSONL file of memory items (as for `erasure ingest`).", show_default=False)
    ],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Which lines of an ingest file the suppression guard would stop, by line number (nothing is
    written): `skipped` (an erased source key) or `held` (an erased id, email or phone)."""
    rows = consent.check_file(home_of(home), file)
    if json_out:
        print_json(rows)
        return
    if not rows:
        console.print("no line of that file is stopped by the suppression guard")
    for r in rows:
        console.print(f"line {r['line']}: {r['verdict']}", highlight=False)
