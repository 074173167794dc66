"""The SLA table: every open request against its legal deadline (pure computation over the engine).

One row per open request (`erasure.states.OPEN_STATES`: until the requester is notified) with its
effective clock at `now` (pauses and extensions applied, an open pause counted up to `now`). Rows
carry request ids, dates, counts and flags only: never the subject's identifiers.

- `breached`: `now` is past the deadline.
- `at_risk`: not breached, and at most `at_risk_days` calendar days left (legal timezone).

The sla-monitor flow, the metrics and `erasure sla` all read these rows, so every view agrees.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import apsw

from erasure import request_records
from erasure.clocks import ClockPolicy, LegalBasis, iso_utc
from erasure.errors import InputError
from erasure.states import OPEN_STATES, RequestState

DEFAULT_AT_RISK_DAYS = 7
"""A request is at risk when this many calendar days or fewer are left before its deadline."""

COLUMNS = (
    "request_id",
    "legal_basis",
    "state",
    "in_state_days",
    "deadline",
    "target",
    "days_left",
    "extended",
    "paused",
    "at_risk",
    "breached",
)
"""The columns every SLA view shows, in this order."""


@dataclass(frozen=True)
class SlaRow:
    """One open request against its deadline (no identifiers)."""

    request_id: str
    legal_basis: LegalBasis
    state: RequestState
    in_state_days: float
    """How long the request has been in its state (a run waiting for the DPO's sign-off, its age)."""
    deadline: datetime
    target: datetime
    days_left: int
    seconds_left: float
    extended: bool
    paused: bool
    at_risk: bool
    breached: bool

    @property
    def past_target(self) -> bool:
        """The internal target (a configurable lead time before the deadline) has passed."""
        return self.seconds_left < (self.deadline - self.target).total_seconds()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the `COLUMNS` first): enums as their values, datetimes as ISO 8601 UTC with a 'Z'."""
        return {
            "request_id": self.request_id,
            "legal_basis": self.legal_basis.value,
            "state": self.state.value,
            "in_state_days": self.in_state_days,
            "deadline": iso_utc(self.deadline),
            "target": iso_utc(self.target),
            "days_left": self.days_left,
            "extended": self.extended,
            "paused": self.paused,
            "at_risk": self.at_risk,
            "breached": self.breached,
            "seconds_left": round(self.seconds_left, 3),
            "past_target": self.past_target,
        }


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now


def sla_rows(
    conn: apsw.Connection,
    *,
    now: datetime,
    policy: ClockPolicy | None = None,
    at_risk_days: int = DEFAULT_AT_RISK_DAYS,
    legal_bases: Iterable[LegalBasis | str] | None = None,
) -> list[SlaRow]:
    """The SLA table at `now`: one row per open request (optionally only for `legal_bases`), soonest
    deadline first. `InputError` if `at_risk_days` is negative."""
    now = _aware(now)
    if at_risk_days < 0:
        raise InputError("at_risk_days: must not be negative")
    policy = policy or ClockPolicy.from_env()
    bases = None if legal_bases is None else {LegalBasis(b) for b in legal_bases}
    out: list[SlaRow] = []
    for row in request_records.list_requests(conn, OPEN_STATES):
        if bases is not None and row.legal_basis not in bases:
            continue
        clock = request_records.deadline_of(conn, row.request_id, now=now, policy=policy)
        breached = clock.overdue(now)
        out.append(
            SlaRow(
                request_id=row.request_id,
                legal_basis=row.legal_basis,
                state=row.state,
                in_state_days=round(max(0.0, (now - row.updated_at).total_seconds()) / 86400, 1),
                deadline=clock.deadline,
                target=clock.target,
                days_left=clock.days_left,
                seconds_left=(clock.deadline - now).total_seconds(),
                extended=clock.extended,
                paused=clock.paused,
                at_risk=not breached and clock.days_left <= at_risk_days,
                breached=breached,
            )
        )
    # The stored deadline of a paused request lags its effective one: sort on what was computed.
    out.sort(key=lambda r: (r.deadline, r.request_id))
    return out


def state_counts(conn: apsw.Connection) -> dict[str, int]:
    """How many requests are in each state (every state listed, zeros included)."""
    counts = {s.value: 0 for s in RequestState}
    for state, n in conn.execute("SELECT state, count(*) FROM requests GROUP BY state"):
        counts[RequestState(state).value] = int(n)
    return counts


@dataclass(frozen=True)
class SlaSummary:
    """Totals over a set of rows."""

    open: int
    at_risk: int
    breached: int
    paused: int
    extended: int


def summarise(rows: Sequence[SlaRow]) -> SlaSummary:
    """Totals of the rows' flags."""
    return SlaSummary(
        open=len(rows),
        at_risk=sum(r.at_risk for r in rows),
        breached=sum(r.breached for r in rows),
        paused=sum(r.paused for r in rows),
        extended=sum(r.extended for r in rows),
    )


def _flag(row: SlaRow) -> str:
    if row.breached:
        return "BREACHED"
    if row.at_risk:
        return "at risk"
    return "ok"


def to_markdown(rows: Sequence[SlaRow], *, now: datetime, at_risk_days: int = DEFAULT_AT_RISK_DAYS) -> str:
    """A Markdown report of the rows: totals, then one table line per request."""
    s = summarise(rows)
    lines = [
        "# Erasure requests against their legal deadlines",
        "",
        f"As of {iso_utc(_aware(now))}: **{s.open}** open, **{s.breached}** breached, "
        f"**{s.at_risk}** at risk (≤ {at_risk_days} days left), {s.paused} paused, {s.extended} extended.",
        "",
    ]
    if not rows:
        lines.append("No open requests.")
        return "\n".join(lines) + "\n"
    lines += [
        "| request | basis | state | deadline (UTC) | days left | extended | paused | status |",
        "| --- | --- | --- | --- | ---: | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| `{r.request_id}` | {r.legal_basis.value} | {r.state.value} | "
            f"{iso_utc(r.deadline)[:16].replace('T', ' ')} | {r.days_left} | "
            f"{'yes' if r.extended else 'no'} | {'yes' if r.paused else 'no'} | {_flag(r)} |"
        )
    return "\n".join(lines) + "\n"
