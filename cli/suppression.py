"""`erasure suppression ...`: the sticky-erasure list that ingest consults (keys, never subjects)."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer
from rich.table import Table

from cli.common import HomeOpt, JsonOpt, console, home_of, print_json
from erasure import requests
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import NotFound
from memory import suppression
from memory.schema import open_store

app = typer.Typer(help="Sticky erasure: list suppressed (source, source_ref) keys, allow re-ingest.",
                  no_args_is_help=True)


def _actor() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "cli"


def _checked(h: Home, texts: dict[str, str], request_ref: str | None) -> None:
    """Refuse (exit 2) free text naming the erased request's subject or anyone in the request vault,
    before the store's append-only audit log sees it."""
    engine = open_engine(h.engine_db)
    try:
        requests.refuse_if_names_a_subject(engine, texts, requests.subject_of(engine, request_ref))
    finally:
        engine.close()


@app.command("list")
def list_keys(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Every suppressed key with when and by which request it was erased."""
    conn = open_store(home_of(home).store_dir)
    try:
        keys = suppression.list_suppressed(conn)
    finally:
        conn.close()
    if json_out:
        print_json([k.__dict__ for k in keys])
        return
    t = Table(title=f"suppressed keys ({len(keys)})")
    for col in ("id", "source", "source_ref", "erased_at", "request"):
        t.add_column(col)
    for k in keys:
        t.add_row(str(k.id), k.source, k.source_ref, k.erased_at, k.request_ref or "")
    console.print(t)


@app.command()
def allow(
    source: Annotated[str, typer.Argument(help="The item's source.", show_default=False)],
    source_ref: Annotated[str, typer.Argument(help="The item's source_ref.", show_default=False)],
    reason: Annotated[str, typer.Option("--reason", help="Why re-ingest is allowed (audited).")],
    actor: Annotated[str | None, typer.Option("--actor", help="Who allows it (default: login name).",
                                              show_default=False)] = None,
    home: HomeOpt = None,
) -> None:
    """Re-consent: remove one key from the list so the item may be ingested again (audited)."""
    h = home_of(home)
    who = actor or _actor()
    conn = open_store(h.store_dir)
    try:
        _checked(h, {"reason": reason, "actor": who}, suppression.request_ref_of(conn, source, source_ref))
        if not suppression.allow(conn, source, source_ref, reason, who):
            raise NotFound("that key is not on the suppression list")
    finally:
        conn.close()
    console.print("allowed: the key may be ingested again")
