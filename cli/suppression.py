"""`erasure suppression ...`: the sticky-erasure lists that ingest consults: erased (source, source_ref)
keys, and keyed hashes of erased identities (never shown; only counted)."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.common import HomeOpt, JsonOpt, console, home_of, print_json
from erasure import request_records as requests
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import InputError, NotFound
from erasure.subject import Subject
from memory import keyed, suppression
from memory.items import item_key, parse_line
from memory.schema import open_store

app = typer.Typer(
    help="Sticky erasure: list suppressed (source, source_ref) keys and erased identities, allow re-ingest.",
    no_args_is_help=True,
)


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
        identities = suppression.erased_identity_count(conn)
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
        _allow_identity(h, identity_of, reason, who)
        return
    assert source is not None and source_ref is not None
    conn = open_store(h.store_dir)
    try:
        _checked(h, {"reason": reason, "actor": who}, suppression.request_ref_of(conn, source, source_ref))
        if not suppression.allow(conn, source, source_ref, reason, who):
            raise NotFound("that key is not on the suppression list")
    finally:
        conn.close()
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
    h = home_of(home)
    conn = open_store(h.store_dir)
    rows: list[dict[str, object]] = []
    try:
        guard = suppression.IdentityGuard(conn)
        base = file.resolve().parent
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise InputError(f"{file}: cannot read ({exc.strerror})") from None
        for lineno, line in enumerate(raw.split(b"\n"), start=1):
            if not line.strip():
                continue
            item = parse_line(line.decode("utf-8", errors="replace"), f"{file}:{lineno}", base)
            key = item_key(
                keyed.identity_secret(conn), item.source, item.source_ref, item.subject.id, item.content, item.item_id
            )
            if suppression.check(conn, item.source, item.source_ref, key) is not suppression.Guard.allowed:
                rows.append({"line": lineno, "verdict": "skipped_suppressed"})
            elif guard.check(item.subject) is not suppression.Guard.allowed:
                rows.append({"line": lineno, "verdict": "held_erased_identity"})
    finally:
        conn.close()
    if json_out:
        print_json(rows)
        return
    if not rows:
        console.print("no line of that file is stopped by the suppression guard")
    for r in rows:
        console.print(f"line {r['line']}: {r['verdict']}", highlight=False)


def subject_of_line(spec: str) -> tuple[Subject, str, str]:
    """The subject, source and source_ref of line LINE of an ingest file (`FILE.jsonl:LINE`, 1-based, as
    `erasure ingest` numbers lines). `InputError` naming the place, never a value."""
    path, sep, num = spec.rpartition(":")
    if not sep or not path or not num.isdigit() or int(num) < 1:
        raise InputError("--identity-of: expected FILE.jsonl:LINE (a line number from 1)")
    where = f"{path}:{num}"
    try:
        lines = Path(path).read_bytes().split(b"\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    if int(num) > len(lines) or not lines[int(num) - 1].strip():
        raise InputError(f"{where}: no item on that line")
    try:
        obj = json.loads(lines[int(num) - 1].decode("utf-8"))
        subject = Subject.model_validate(obj["subject"])
        return subject, str(obj["source"]), str(obj["source_ref"])
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{where}: not an ingest line with a valid subject") from None


def _allow_identity(h: Home, spec: str, reason: str, actor: str) -> None:
    subject, source, source_ref = subject_of_line(spec)
    engine = open_engine(h.engine_db)
    try:
        requests.refuse_if_names_a_subject(engine, {"reason": reason, "actor": actor}, subject)
    finally:
        engine.close()
    conn = open_store(h.store_dir)
    try:
        kinds = suppression.allow_identity(conn, subject, reason, actor)
        if not kinds:
            raise NotFound("no erased identity matches the subject of that line")
        key_still = suppression.is_suppressed(conn, source, source_ref)
    finally:
        conn.close()
    console.print(f"allowed: the erased identity ({', '.join(kinds)}) may be ingested again", highlight=False)
    if key_still:
        console.print(
            "note: that item's (source, source_ref) key is still suppressed; allow it with "
            "`erasure suppression allow SOURCE SOURCE_REF`",
            highlight=False,
            markup=False,
        )
