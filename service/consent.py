"""Re-consent: an erased request's subject may be ingested again (the `suppression-allow` deployment, and
`erasure suppression allow` by request, by key or by the identity of an ingest file's line), and the
sticky-erasure lists it edits. Every re-consent writes one engine event, `suppression.allowed`
(`_log_allowed`): ids and counts only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import apsw

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import InputError, NotFound
from erasure.request_ids import checked_request_id
from erasure.subject import Subject
from memory import keyed, suppression
from memory.items import item_key, parse_line
from memory.schema import open_store

EVENT = "suppression.allowed"


class Reconsented(TypedDict):
    """How many suppression keys and erased-identity hashes a request's re-consent removed."""

    request_id: str
    allowed: int
    identities: int


def allow_reingest(
    engine: Engine, h: Home, request_id: str, reason: str, actor: str, source: str | None = None
) -> Reconsented:
    """Remove the suppression keys that `request_id`'s erasure recorded (optionally only those of one
    `source`), so the subject's items may be ingested again; without a `source`, also the
    erased-identity hashes it recorded. `NotFound` if there are no keys."""
    checked_request_id(request_id)
    with engine.lent() as conn:
        subject = request_records.load_envelope(conn, request_id).subject
        request_records.refuse_if_names_a_subject(conn, {"reason": reason, "actor": actor}, subject)
        store = open_store(h.store_dir)
        try:
            keys = [
                k
                for k in suppression.list_suppressed(store)
                if k.request_ref == request_id and (source is None or k.source == keyed.hashed(store, source))
            ]
            if not keys:
                raise NotFound(
                    f"no suppressed keys recorded for request {request_id}"
                    + (f" and source {source!r}" if source else "")
                )
            allowed = sum(
                suppression.allow(store, s, r, reason, actor, request_ref=request_id)
                for s, r in dict.fromkeys((k.source, k.source_ref) for k in keys)
            )
            # the whole re-consent (no source named) also releases the identity the erasure recorded
            identities = 0 if source else suppression.allow_identities_of(store, request_id, reason, actor)
        finally:
            store.close()
        _log_allowed(conn, request_id, keys=allowed, identities=identities, source=source)
    return {"request_id": request_id, "allowed": allowed, "identities": identities}


def _log_allowed(
    engine: apsw.Connection, request_id: str | None, *, keys: int, identities: int, source: str | None = None
) -> None:
    """The engine's event of one re-consent, on the request whose erasure it undoes (ids and counts)."""
    request_records.log_event(engine, request_id, EVENT, {"keys": keys, "source": source, "identities": identities})


def list_suppressed(h: Home) -> tuple[list[dict[str, Any]], int]:
    """Every suppressed (source, source_ref) key (keyed hashes, when and by which request), and how many
    keyed hashes of erased identities the store keeps (never shown)."""
    conn = open_store(h.store_dir)
    try:
        keys = suppression.list_suppressed(conn)
        identities = suppression.erased_identity_count(conn)
    finally:
        conn.close()
    return [dict(k.__dict__) for k in keys], identities


def allow_key(engine: Engine, h: Home, source: str, source_ref: str, reason: str, actor: str) -> None:
    """Re-consent for one item: remove its (source, source_ref) key from the suppression list (audited
    in the store; the engine's event names the request that erased it). `NotFound` when not listed;
    free text naming the erased subject or anyone in the request vault is refused first."""
    conn = open_store(h.store_dir)
    try:
        request_ref = suppression.request_ref_of(conn, source, source_ref)
        with engine.lent() as db:
            texts = {"reason": reason, "actor": actor}
            request_records.refuse_if_names_a_subject(db, texts, request_records.subject_of(db, request_ref))
            if not suppression.allow(conn, source, source_ref, reason, actor):
                raise NotFound("that key is not on the suppression list")
            _log_allowed(db, request_ref, keys=1, identities=0)
    finally:
        conn.close()


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


def allow_identity(engine: Engine, h: Home, spec: str, reason: str, actor: str) -> tuple[list[str], bool]:
    """Re-consent by identity: release the erased identity (id, email, phone) that holds the item on
    line `spec` (`FILE.jsonl:LINE`) of an ingest file, with one engine event per erasure it undoes.
    Returns the kinds released and whether that item's own (source, source_ref) key is still
    suppressed. `NotFound` when no erased identity matches."""
    subject, source, source_ref = subject_of_line(spec)
    with engine.lent() as db:
        request_records.refuse_if_names_a_subject(db, {"reason": reason, "actor": actor}, subject)
        conn = open_store(h.store_dir)
        try:
            refs = suppression.identity_refs(conn, subject)
            kinds = suppression.allow_identity(conn, subject, reason, actor)
            if not kinds:
                raise NotFound("no erased identity matches the subject of that line")
            key_still = suppression.is_suppressed(conn, source, source_ref)
        finally:
            conn.close()
        for ref, rows in refs.items():
            _log_allowed(db, ref, keys=0, identities=rows)
    return kinds, key_still


def check_file(h: Home, file: Path) -> list[dict[str, object]]:
    """Which lines of an ingest file the suppression guard would stop, by line number (nothing is
    written): `skipped_suppressed` (an erased source key) or `held_erased_identity` (an erased id,
    email or phone)."""
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
    return rows
