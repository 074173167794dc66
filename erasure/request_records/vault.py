"""The vault: the validated envelope (the only place a subject's identifiers are kept), the request's
salt, the subject's store ids and confirmed aliases. An envelope is validated at intake and again the
first time a connection reads it; an engine connection (`erasure.engine.EngineConnection`) keeps what
it validated, since a vaulted envelope never changes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import apsw

from erasure.engine import EngineConnection
from erasure.errors import NotFound
from erasure.request_records._common import canonical_json, sha256_hex, writing
from erasure.request_records.events import log_event

# The subject and envelope models are pydantic's, imported by the functions that read one: the CLI's
# commands that only list or count (`erasure sla`) answer without importing pydantic (issue 37).
if TYPE_CHECKING:
    from erasure.models import ErasureRequestEnvelope
    from erasure.subject import Subject


def envelope_digest(envelope: ErasureRequestEnvelope) -> str:
    """SHA-256 hex of the envelope's canonical JSON: the same id with another digest is a conflict."""
    return sha256_hex(canonical_json(envelope.canonical_dict()))


def load_envelope(conn: apsw.Connection, request_id: str) -> ErasureRequestEnvelope:
    """The vaulted envelope, identifiers included: keep it inside the process that erases. Validated
    once per engine connection."""
    cache = conn.envelopes if isinstance(conn, EngineConnection) else {}
    if request_id in cache:
        return cache[request_id]
    r = conn.execute("SELECT envelope_json FROM vault WHERE request_id = ?", (request_id,)).fetchone()
    if r is None:
        raise NotFound(f"no request {request_id!r} in the vault")
    from erasure.models import ErasureRequestEnvelope

    # Validated at intake; far-future `now` so a stored received_at is never "in the future".
    envelope = ErasureRequestEnvelope.model_validate_json(r[0], context={"now": datetime(9000, 1, 1, tzinfo=UTC)})
    cache[request_id] = envelope
    return envelope


def vault_subjects(conn: apsw.Connection) -> list[Subject]:
    """Every distinct subject named in the vault, identifiers included: keep them inside the process
    (they check free text at the door)."""
    from erasure.subject import Subject

    seen: dict[Subject, None] = {}
    for (text,) in conn.execute("SELECT envelope_json FROM vault ORDER BY request_id"):
        seen.setdefault(Subject.model_validate(json.loads(text)["subject"]), None)
    return list(seen)


def subject_by_id(conn: apsw.Connection, subject_id: str) -> Subject:
    """The vaulted subject whose id is `subject_id` (NFKC + case folding), with every identifier their
    request gave; a subject the vault does not know is returned with its id only."""
    from erasure.identity import fold
    from erasure.subject import Subject

    want = fold(subject_id)
    for subject in vault_subjects(conn):
        if fold(subject.id) == want:
            return subject
    return Subject(id=subject_id)


def requests_of_subject(conn: apsw.Connection, subject_id: str) -> list[str]:
    """The ids of every vaulted request whose subject id is `subject_id` (NFKC + case folding)."""
    from erasure.identity import fold

    want = fold(subject_id)
    return [
        rid
        for rid, text in conn.execute("SELECT request_id, envelope_json FROM vault ORDER BY request_id")
        if fold(str(json.loads(text)["subject"]["id"])) == want
    ]


def subject_of(conn: apsw.Connection, request_id: str | None) -> Subject | None:
    """The subject of `request_id` from the vault, or None when there is no such request."""
    from erasure.subject import Subject

    if request_id is None:
        return None
    r = conn.execute("SELECT envelope_json FROM vault WHERE request_id = ?", (request_id,)).fetchone()
    return None if r is None else Subject.model_validate(json.loads(r[0])["subject"])


def refuse_if_names_a_subject(conn: apsw.Connection, texts: Mapping[str, str], subject: Subject | None = None) -> None:
    """Refuse (`InputError`, naming the field and the kind of identifier, never the value) free text that
    reaches the audit log, the engine or Prefect when it holds an identifier of `subject` (also the
    email's local part and name tokens) or a whole identifier of any subject in the vault."""
    from erasure.mentions import refuse_if_mentions_anyone, refuse_if_mentions_subject

    everyone = vault_subjects(conn)
    for field, text in texts.items():
        if subject is not None:
            refuse_if_mentions_subject(field, text, subject)
        refuse_if_mentions_anyone(field, text, everyone)


def subject_salt(conn: apsw.Connection, request_id: str) -> bytes:
    """The request's random 32-byte salt for the pack's identifier commitments."""
    r = conn.execute("SELECT salt FROM vault WHERE request_id = ?", (request_id,)).fetchone()
    if r is None:
        raise NotFound(f"no request {request_id!r} in the vault")
    return bytes(r[0])


def store_ids(conn: apsw.Connection, request_id: str) -> set[str]:
    """The subject's ids as the store spells them, recorded before the first deletion (vault data)."""
    return {
        str(r[0]) for r in conn.execute("SELECT subject_id FROM vault_store_ids WHERE request_id = ?", (request_id,))
    }


def every_store_id(conn: apsw.Connection) -> set[str]:
    """The store ids of every request's subject (vault data): people being, or once, erased."""
    return {str(r[0]) for r in conn.execute("SELECT DISTINCT subject_id FROM vault_store_ids")}


def add_store_ids(conn: apsw.Connection, request_id: str, ids: Iterable[str]) -> None:
    """Record more of the subject's store ids (it only grows, like the footprint)."""
    with writing(conn):
        conn.executemany(
            "INSERT OR IGNORE INTO vault_store_ids(request_id, subject_id) VALUES (?, ?)",
            [(request_id, i) for i in ids],
        )


def confirm_aliases(conn: apsw.Connection, request_id: str, count: int) -> None:
    """The team reviewed `count` other store ids sharing the subject's email and confirmed them."""
    log_event(conn, request_id, "identity.aliases_confirmed", {"count": count})


def confirmed_aliases(conn: apsw.Connection, request_id: str) -> int | None:
    """The latest alias count the team confirmed for this request, or None."""
    r = conn.execute(
        "SELECT detail FROM engine_events WHERE request_id = ? AND event = ? ORDER BY seq DESC LIMIT 1",
        (request_id, "identity.aliases_confirmed"),
    ).fetchone()
    return int(json.loads(r[0])["count"]) if r else None


def commit_identifier(salt: bytes, value: str) -> str:
    """Salted commitment to one identifier: sha256(salt + value as UTF-8), hex."""
    return hashlib.sha256(salt + value.encode("utf-8")).hexdigest()
