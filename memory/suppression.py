"""Sticky erasure: the suppression list `erased_subjects`, keyed on `(source, source_ref)`.

An erasure records the subject's keys here in its own transaction (`record`); ingest consults them
first and skips, fail-closed (`check` / `is_suppressed`): if the list cannot be read, the item is
treated as suppressed. Re-consent is explicit and audited (`allow`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime

import apsw

from erasure.sqlite import transaction
from memory import audit


class Guard(enum.Enum):
    """What the suppression guard says about one `(source, source_ref)`."""

    allowed = "allowed"
    suppressed = "suppressed"
    unreadable = "unreadable"  # the list could not be read: treated as suppressed (fail-closed)


@dataclass(frozen=True)
class SuppressedKey:
    """One row of the suppression list (no subject id: the list never names the subject)."""

    id: int
    source: str
    source_ref: str
    erased_at: str
    request_ref: str | None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def check(conn: apsw.Connection, source: str, source_ref: str) -> Guard:
    """The guard's verdict. Any error while reading the list gives `Guard.unreadable`."""
    try:
        row = conn.execute(
            "SELECT 1 FROM erased_subjects WHERE source=? AND source_ref=? LIMIT 1", (source, source_ref)
        ).fetchone()
    except Exception:  # fail-closed on anything: a missing table, corruption, I/O
        return Guard.unreadable
    return Guard.allowed if row is None else Guard.suppressed


def is_suppressed(conn: apsw.Connection, source: str, source_ref: str) -> bool:
    """True when `(source, source_ref)` was erased, or when the list cannot be read (fail-closed)."""
    return check(conn, source, source_ref) is not Guard.allowed


def request_ref_of(conn: apsw.Connection, source: str, source_ref: str) -> str | None:
    """The id of the request whose erasure suppressed `(source, source_ref)`, or None."""
    row = conn.execute("SELECT request_ref FROM erased_subjects WHERE source=? AND source_ref=?",
                       (source, source_ref)).fetchone()
    return None if row is None else row[0]


def record(conn: apsw.Connection, source: str, source_ref: str, request_ref: str | None) -> bool:
    """Add `(source, source_ref)` to the list (INSERT OR IGNORE). Runs inside the caller's erase
    transaction; returns True if a row was added."""
    conn.execute(
        "INSERT OR IGNORE INTO erased_subjects(source, source_ref, erased_at, request_ref) VALUES (?,?,?,?)",
        (source, source_ref, _now(), request_ref),
    )
    return conn.changes() > 0


def allow(conn: apsw.Connection, source: str, source_ref: str, reason: str, actor: str) -> bool:
    """Re-consent: remove `(source, source_ref)` from the list so it may be ingested again, and audit
    it ('suppression.allow'). Opens its own transaction. Returns False when the key was not listed."""
    with transaction(conn):
        conn.execute("DELETE FROM erased_subjects WHERE source=? AND source_ref=?", (source, source_ref))
        if conn.changes() == 0:
            return False
        audit.append(
            conn, "suppression.allow", "suppression",
            {"source": source, "reason": reason},
            {"source_ref": (None, source_ref), "allowed_by": (None, actor)},
        )
    return True


def list_suppressed(conn: apsw.Connection) -> list[SuppressedKey]:
    """Every suppressed key, oldest first."""
    rows = conn.execute(
        "SELECT id, source, source_ref, erased_at, request_ref FROM erased_subjects ORDER BY id"
    )
    return [SuppressedKey(int(r[0]), str(r[1]), str(r[2]), str(r[3]), r[4]) for r in rows]
