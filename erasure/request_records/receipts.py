"""Subprocessor receipts: one row per (request, processor) with the ticket id, status and attempts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import apsw

from erasure.clocks import iso_utc, parse_utc
from erasure.request_records._common import RECEIPT_STATUSES, json_text, opt_utc, utc_now, writing


@dataclass(frozen=True)
class ReceiptRow:
    """A subprocessor's answer to our deletion call (ticket id, status, attempts)."""

    request_id: str
    processor: str
    ticket_id: str | None
    status: str
    requested_at: datetime
    completed_at: datetime | None
    attempts: int
    detail: dict[str, Any]


def upsert_receipt(
    conn: apsw.Connection,
    request_id: str,
    processor: str,
    status: str,
    *,
    ticket_id: str | None = None,
    attempts: int | None = None,
    completed_at: datetime | None = None,
    detail: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> None:
    """Record a subprocessor's receipt: one row per (request, processor). `requested_at` is the first
    write's time and is kept; a None `ticket_id`/`completed_at`/`attempts` keeps the stored value."""
    if status not in RECEIPT_STATUSES:
        raise ValueError(f"receipt status must be one of {sorted(RECEIPT_STATUSES)}")
    params = {
        "rid": request_id,
        "proc": processor,
        "ticket": ticket_id,
        "status": status,
        "req": iso_utc(utc_now(now)),
        "done": None if completed_at is None else iso_utc(completed_at),
        "att": attempts,
        "detail": json_text(detail),
    }
    with writing(conn):
        conn.execute(
            "INSERT INTO receipts(request_id, processor, ticket_id, status, requested_at, completed_at, "
            "attempts, detail) "
            "VALUES (:rid, :proc, :ticket, :status, :req, :done, COALESCE(:att, 0), :detail) "
            "ON CONFLICT(request_id, processor) DO UPDATE SET status = excluded.status, "
            "ticket_id = COALESCE(:ticket, receipts.ticket_id), "
            "completed_at = COALESCE(:done, receipts.completed_at), "
            "attempts = COALESCE(:att, receipts.attempts), detail = excluded.detail",
            params,
        )


def receipts(conn: apsw.Connection, request_id: str) -> list[ReceiptRow]:
    """The request's subprocessor receipts, by processor."""
    return [
        ReceiptRow(
            request_id=r[0],
            processor=r[1],
            ticket_id=r[2],
            status=r[3],
            requested_at=parse_utc(r[4]),
            completed_at=opt_utc(r[5]),
            attempts=r[6],
            detail=json.loads(r[7]),
        )
        for r in conn.execute(
            "SELECT request_id, processor, ticket_id, status, requested_at, completed_at, attempts, detail "
            "FROM receipts WHERE request_id = ? ORDER BY processor",
            (request_id,),
        )
    ]
