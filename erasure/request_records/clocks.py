"""The request's regulatory clock in the engine: pauses (identity verification), resumes and the one
extension, each logged; the deadline and target on the request row follow them."""

from __future__ import annotations

import json
from datetime import date, datetime

import apsw

from erasure.clocks import (
    ClockEvent,
    ClockKind,
    ClockPolicy,
    Deadline,
    check_clock_event,
    effective_deadline,
    iso_utc,
    parse_utc,
)
from erasure.errors import Conflict, InputError
from erasure.request_records._common import insert_event, json_text, utc_now, writing
from erasure.request_records.intake import get
from erasure.request_records.vault import load_envelope, refuse_if_names_a_subject
from erasure.states import OPEN_STATES, RequestState

MAX_REASON = 2000


def clock_events(conn: apsw.Connection, request_id: str) -> list[ClockEvent]:
    """The request's pauses, resumes and extensions, oldest first."""
    out: list[ClockEvent] = []
    for kind, at, detail in conn.execute(
        "SELECT kind, at, detail FROM clock_events WHERE request_id = ? ORDER BY at, event_id", (request_id,)
    ):
        until = json.loads(detail).get("until")
        out.append(ClockEvent(kind, parse_utc(at), date.fromisoformat(until) if until else None))
    return out


def deadline_of(
    conn: apsw.Connection, request_id: str, *, now: datetime, policy: ClockPolicy | None = None
) -> Deadline:
    """The request's clock at `now` (an open pause counts up to `now`)."""
    row = get(conn, request_id)
    return effective_deadline(
        row.legal_basis,
        row.received_at,
        clock_events(conn, request_id),
        now=utc_now(now),
        policy=policy or ClockPolicy.from_env(),
    )


def _clock_op(
    conn: apsw.Connection,
    request_id: str,
    kind: ClockKind,
    reason: str,
    *,
    now: datetime,
    until: date | None,
    policy: ClockPolicy | None,
) -> Deadline:
    now = utc_now(now)
    policy = policy or ClockPolicy.from_env()
    reason = reason.strip()
    if not reason or len(reason) > MAX_REASON:
        raise InputError(f"reason: must be 1-{MAX_REASON} characters")
    with writing(conn):
        row = get(conn, request_id)
        refuse_if_names_a_subject(conn, {"reason": reason}, load_envelope(conn, request_id).subject)
        if row.state not in OPEN_STATES:
            raise Conflict(f"{kind}: request {request_id} is {row.state.value}")
        if kind == "pause" and row.state not in (RequestState.submitted, RequestState.paused):
            raise Conflict(
                f"pause: request {request_id} is {row.state.value}; only a submitted request "
                "waits for identity verification"
            )
        events = clock_events(conn, request_id)
        new = ClockEvent(kind, now, until)
        check_clock_event(row.legal_basis, row.received_at, events, new, policy=policy)
        conn.execute(
            "INSERT INTO clock_events(request_id, kind, at, reason, detail) VALUES (?, ?, ?, ?, ?)",
            (request_id, kind, iso_utc(now), reason, json_text({"until": until.isoformat()} if until else None)),
        )
        clock = effective_deadline(row.legal_basis, row.received_at, [*events, new], now=now, policy=policy)
        state = row.state
        if kind == "pause":
            state = RequestState.paused
        elif kind == "resume" and row.state is RequestState.paused:
            state = RequestState.submitted
        conn.execute(
            "UPDATE requests SET deadline = ?, target = ?, state = ?, updated_at = ? WHERE request_id = ?",
            (iso_utc(clock.deadline), iso_utc(clock.target), state.value, iso_utc(now), request_id),
        )
        past = {"pause": "paused", "resume": "resumed", "extend": "extended"}[kind]
        insert_event(conn, request_id, f"request.{past}", {"deadline": iso_utc(clock.deadline)}, now)
    return clock


def pause(
    conn: apsw.Connection, request_id: str, reason: str, *, now: datetime, policy: ClockPolicy | None = None
) -> Deadline:
    """Pause the clock while the subject's identity is verified (state 'paused')."""
    return _clock_op(conn, request_id, "pause", reason, now=now, until=None, policy=policy)


def resume(
    conn: apsw.Connection, request_id: str, reason: str, *, now: datetime, policy: ClockPolicy | None = None
) -> Deadline:
    """Resume a paused clock; the deadline moves by the whole paused time (state 'submitted')."""
    return _clock_op(conn, request_id, "resume", reason, now=now, until=None, policy=policy)


def extend(
    conn: apsw.Connection,
    request_id: str,
    reason: str,
    *,
    now: datetime,
    until: date | None = None,
    policy: ClockPolicy | None = None,
) -> Deadline:
    """Extend the deadline once, to the legal maximum or to `until` (a day not past it). Refused for
    POPIA/KE_DPA, past the maximum (`InputError`), a second time or after the original deadline
    (`Conflict`)."""
    return _clock_op(conn, request_id, "extend", reason, now=now, until=until, policy=policy)
