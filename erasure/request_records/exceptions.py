"""Exceptions: what the cascade or verification could not erase, opened idempotently and closed (kept
as evidence), with the Art.17(3) ground where one applies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import apsw

from erasure.clocks import iso_utc, parse_utc
from erasure.errors import NotFound
from erasure.exception_kinds import check_kind
from erasure.request_records._common import json_text, opt_utc, utc_now, writing
from erasure.tiers import Tier, scope_name


@dataclass(frozen=True)
class ExceptionRow:
    """One open (or closed) exception: something the cascade or verification could not erase."""

    exception_id: int
    request_id: str
    tier: str
    kind: str
    item_key: str
    detail: dict[str, Any]
    ground: str | None
    opened_at: datetime
    closed_at: datetime | None


def open_exception(
    conn: apsw.Connection,
    request_id: str,
    tier: Tier | str,
    kind: str,
    item_key: str,
    detail: Mapping[str, Any] | None = None,
    ground: str | None = None,
    *,
    now: datetime | None = None,
) -> int:
    """Open an exception (idempotent on (request, tier, kind, item_key): an existing one keeps its id,
    detail and opening time, and is open again if it had been closed). Returns its id. A `kind` that
    `erasure.exception_kinds` does not explain is refused (`ValueError`)."""
    check_kind(kind)
    t = scope_name(tier)
    with writing(conn):
        conn.execute(
            "INSERT INTO exceptions(request_id, tier, kind, item_key, detail, ground, opened_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(request_id, tier, kind, item_key) DO UPDATE SET closed_at = NULL",
            (request_id, t, kind, item_key, json_text(detail), ground, iso_utc(utc_now(now))),
        )
        r = conn.execute(
            "SELECT exception_id FROM exceptions WHERE request_id = ? AND tier = ? AND kind = ? AND item_key = ?",
            (request_id, t, kind, item_key),
        ).fetchone()
    assert r is not None
    return int(r[0])


def close_exception(conn: apsw.Connection, exception_id: int, *, now: datetime | None = None) -> None:
    """Mark an exception closed (kept as evidence). `NotFound` if there is no such exception."""
    with writing(conn):
        conn.execute(
            "UPDATE exceptions SET closed_at = COALESCE(closed_at, ?) WHERE exception_id = ?",
            (iso_utc(utc_now(now)), exception_id),
        )
        if conn.changes() == 0:
            raise NotFound(f"no exception {exception_id}")


def exceptions(conn: apsw.Connection, request_id: str, *, open_only: bool = False) -> list[ExceptionRow]:
    """The request's exceptions, oldest first."""
    sql = (
        "SELECT exception_id, request_id, tier, kind, item_key, detail, ground, opened_at, closed_at "
        "FROM exceptions WHERE request_id = ?"
        + (" AND closed_at IS NULL" if open_only else "")
        + " ORDER BY exception_id"
    )
    return [
        ExceptionRow(
            exception_id=r[0],
            request_id=r[1],
            tier=r[2],
            kind=r[3],
            item_key=r[4],
            detail=json.loads(r[5]),
            ground=r[6],
            opened_at=parse_utc(r[7]),
            closed_at=opt_utc(r[8]),
        )
        for r in conn.execute(sql, (request_id,))
    ]
