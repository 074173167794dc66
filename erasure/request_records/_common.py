"""What the engine-database modules of `erasure.request_records` share: writing in one transaction (a savepoint
inside the caller's), timestamps, JSON columns, and the event-log insert. The pack's wire format
(canonical JSON, digests, receipt statuses) comes in here only, from `wire.format`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import apsw

from erasure.clocks import iso_utc, parse_utc
from erasure.sqlite import transaction
from wire.format import RECEIPT_STATUSES, canonical_json, sha256_hex

__all__ = [
    "RECEIPT_STATUSES",
    "canonical_json",
    "insert_event",
    "json_text",
    "opt_utc",
    "sha256_hex",
    "utc_now",
    "writing",
]


@contextmanager
def writing(conn: apsw.Connection) -> Iterator[None]:
    """A transaction, or a savepoint inside the caller's transaction."""
    if not conn.in_transaction:
        with transaction(conn):
            yield
        return
    conn.execute("SAVEPOINT erasure_requests")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO erasure_requests")
        conn.execute("RELEASE erasure_requests")
        raise
    conn.execute("RELEASE erasure_requests")


def utc_now(now: datetime | None) -> datetime:
    """`now` in UTC (it must be timezone-aware), or the current time."""
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now.astimezone(UTC)


def json_text(obj: Mapping[str, Any] | None) -> str:
    """A JSON column's text: canonical JSON of `obj` (`{}` for None)."""
    return canonical_json(dict(obj or {})).decode("utf-8")


def opt_utc(text: str | None) -> datetime | None:
    """A nullable timestamp column."""
    return None if text is None else parse_utc(text)


def insert_event(
    conn: apsw.Connection, request_id: str | None, event: str, detail: Mapping[str, Any] | None, now: datetime
) -> int:
    """Append to `engine_events` in the caller's transaction; returns the event's sequence number."""
    conn.execute(
        "INSERT INTO engine_events(at, request_id, event, detail) VALUES (?, ?, ?, ?)",
        (iso_utc(now), request_id, event, json_text(detail)),
    )
    return int(conn.last_insert_rowid())
