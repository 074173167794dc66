"""A request's legal clock: pause it (identity verification), resume it, extend it once. One function
for the CLI (`erasure request pause|resume|extend`) and the `request-*` deployments; audited in the
engine's event log as 'request.paused' / 'request.resumed' / 'request.extended'."""

from __future__ import annotations

from datetime import UTC, date, datetime
from enum import StrEnum
from typing import TypedDict

from erasure import request_records
from erasure.clocks import ClockPolicy, Deadline, iso_utc
from erasure.engine_db import Engine
from erasure.request_ids import checked_request_id


class ClockOp(StrEnum):
    """What to do to a clock."""

    pause = "pause"
    resume = "resume"
    extend = "extend"


class ClockView(TypedDict):
    """A request's clock as the surfaces show it (dates as ISO 8601 UTC strings)."""

    request_id: str
    deadline: str
    target: str
    days_left: int
    paused: bool
    extended: bool


def clock_view(request_id: str, clock: Deadline) -> ClockView:
    """The view of `clock`."""
    return {
        "request_id": request_id,
        "deadline": iso_utc(clock.deadline),
        "target": iso_utc(clock.target),
        "days_left": clock.days_left,
        "paused": clock.paused,
        "extended": clock.extended,
    }


def clock_operation(
    engine: Engine,
    op: ClockOp | str,
    request_id: str,
    reason: str,
    *,
    until: date | None = None,
    now: datetime | None = None,
) -> ClockView:
    """Pause, resume or extend (to `until`, default the legal maximum) a request's clock; the new clock.
    `ValueError` for an operation that is none of these."""
    op = ClockOp(op)
    checked_request_id(request_id)
    now = now or datetime.now(UTC)
    policy = ClockPolicy.from_env()
    with engine.lent() as conn:
        if op is ClockOp.extend:
            clock = request_records.extend(conn, request_id, reason, now=now, until=until, policy=policy)
        elif op is ClockOp.pause:
            clock = request_records.pause(conn, request_id, reason, now=now, policy=policy)
        else:
            clock = request_records.resume(conn, request_id, reason, now=now, policy=policy)
    return clock_view(request_id, clock)
