"""Regulatory clocks (DESIGN.md, "Regulatory clocks"): pure functions on plain data.

- GDPR Art.12(3): one month from receipt, counted as Regulation 1182/71 Art.3 does: the same date
  in the next month; if that month has no such date, its last day; if that day is a Saturday, Sunday
  or configured public holiday, the next working day. Extendable once by two further months, counted
  the same way from the original deadline, with notice inside the first month.
- CCPA/CPRA: 45 calendar days, extendable once by 45 with notice.
- POPIA, Kenya DPA: "without undue delay": a configurable internal bound (30 days); no extension.

A deadline is the end of its day (23:59:59.999999) in the legal timezone, stored as UTC. Pauses
(identity verification) move it by the whole paused time; an open pause by `now - paused_at`.
"""

from __future__ import annotations

import calendar
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Literal, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from erasure.errors import ConfigError, Conflict, InputError


class LegalBasis(StrEnum):
    """The law under which the subject asked for erasure; it decides the clock."""

    GDPR = "GDPR"
    CCPA = "CCPA"
    POPIA = "POPIA"
    KE_DPA = "KE_DPA"


CLOCK_SKEW = timedelta(minutes=5)
"""How far in the future a `received_at` may be before it is refused."""

END_OF_DAY = time(23, 59, 59, 999999)
CCPA_DAYS = 45
GDPR_MONTHS = 1
GDPR_EXTENSION_MONTHS = 2
EXTENDABLE = frozenset({LegalBasis.GDPR, LegalBasis.CCPA})

ClockKind = Literal["pause", "resume", "extend"]


@dataclass(frozen=True)
class ClockPolicy:
    """Configuration of the clocks: public holidays (GDPR working days), the internal bound for laws
    that say "without undue delay", the internal target's lead time, and the legal timezone."""

    holidays: frozenset[date] = field(default_factory=frozenset)
    internal_bound_days: int = 30
    target_days_before: int = 7
    legal_tz: str = "UTC"

    def __post_init__(self) -> None:
        if self.internal_bound_days < 1:
            raise ConfigError("internal bound must be at least 1 day")
        if self.target_days_before < 0:
            raise ConfigError("target days before the deadline must not be negative")
        try:
            ZoneInfo(self.legal_tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown legal timezone {self.legal_tz!r}") from None

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.legal_tz)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClockPolicy:
        """Policy from the environment: `ERASURE_HOLIDAYS` (path to a JSON list of ISO dates),
        `ERASURE_INTERNAL_BOUND_DAYS`, `ERASURE_TARGET_DAYS_BEFORE`, `ERASURE_LEGAL_TZ`; unset ones
        take the defaults. Raises `ConfigError` on a bad value."""
        e = os.environ if env is None else env
        holidays = load_holidays(Path(e["ERASURE_HOLIDAYS"])) if e.get("ERASURE_HOLIDAYS") else frozenset()
        return cls(
            holidays=holidays,
            internal_bound_days=_int_env(e, "ERASURE_INTERNAL_BOUND_DAYS", 30),
            target_days_before=_int_env(e, "ERASURE_TARGET_DAYS_BEFORE", 7),
            legal_tz=e.get("ERASURE_LEGAL_TZ") or "UTC",
        )


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number of days") from None


def load_holidays(path: Path) -> frozenset[date]:
    """A JSON list of ISO dates ("2024-12-25") -> the set of public holidays. `ConfigError` if bad."""
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read holidays: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: holidays are not valid JSON: {exc}") from None
    if not isinstance(items, list):
        raise ConfigError(f"{path}: holidays must be a JSON list of ISO dates")
    out: set[date] = set()
    for i, item in enumerate(items):
        try:
            out.add(date.fromisoformat(item))
        except (TypeError, ValueError):
            raise ConfigError(f"{path}: item {i}: not an ISO date (YYYY-MM-DD)") from None
    return frozenset(out)


class ClockEvent(NamedTuple):
    """One clock event as stored in `clock_events`: pause, resume, or extend (optionally to a date
    before the legal maximum)."""

    kind: ClockKind
    at: datetime
    until: date | None = None


@dataclass(frozen=True)
class Deadline:
    """A request's clock at one instant. `days_left` counts calendar days in the legal timezone from
    today to the deadline's day (0 on the day itself, negative when overdue)."""

    deadline: datetime
    target: datetime
    paused: bool
    extended: bool
    days_left: int

    def overdue(self, now: datetime) -> bool:
        """True once `now` is past the deadline."""
        return now > self.deadline


def iso_utc(dt: datetime) -> str:
    """ISO 8601 in UTC with microseconds and a 'Z' (fixed width, so text order is time order)."""
    if dt.tzinfo is None:
        raise ValueError("naive datetime")
    return dt.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_utc(text: str) -> datetime:
    """Inverse of `iso_utc` (accepts any ISO 8601 text with an offset)."""
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        raise ValueError("naive datetime")
    return dt.astimezone(UTC)


def add_months(d: date, months: int) -> date:
    """The same date `months` later; the month's last day where it has no such date."""
    m = d.month - 1 + months
    year, month = d.year + m // 12, m % 12 + 1
    return date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


def is_working_day(d: date, policy: ClockPolicy) -> bool:
    """Monday to Friday and not a configured public holiday."""
    return d.weekday() < 5 and d not in policy.holidays


def next_working_day(d: date, policy: ClockPolicy) -> date:
    """`d` itself if it is a working day, else the next one."""
    while not is_working_day(d, policy):
        d += timedelta(days=1)
    return d


def end_of_day(d: date, policy: ClockPolicy) -> datetime:
    """23:59:59.999999 of `d` in the legal timezone, as UTC. `InputError` for a day at the calendar's
    end that has no UTC time (9999-12-31 west of Greenwich)."""
    try:
        return datetime.combine(d, END_OF_DAY, tzinfo=policy.tz).astimezone(UTC)
    except OverflowError:
        raise InputError(f"{d.isoformat()}: out of range") from None


def _receipt_day(received_at: datetime, policy: ClockPolicy) -> date:
    if received_at.tzinfo is None:
        raise InputError("received_at: must include a timezone offset")
    return received_at.astimezone(policy.tz).date()


def _legal_day(basis: LegalBasis, received_at: datetime, policy: ClockPolicy) -> date:
    day = _receipt_day(received_at, policy)
    if basis is LegalBasis.GDPR:
        return next_working_day(add_months(day, GDPR_MONTHS), policy)
    if basis is LegalBasis.CCPA:
        return day + timedelta(days=CCPA_DAYS)
    return day + timedelta(days=policy.internal_bound_days)


def legal_deadline(basis: LegalBasis, received_at: datetime, *, policy: ClockPolicy) -> datetime:
    """The original legal deadline (no pause, no extension), as UTC."""
    return end_of_day(_legal_day(LegalBasis(basis), received_at, policy), policy)


def extended_deadline(basis: LegalBasis, received_at: datetime, *, policy: ClockPolicy) -> datetime:
    """The latest deadline the law allows after its one extension (no pause), as UTC.

    Raises `InputError` for POPIA and KE_DPA, whose laws provide no extension."""
    basis = LegalBasis(basis)
    if basis not in EXTENDABLE:
        raise InputError(f"{basis.value}: the law provides no extension of the deadline")
    original = _legal_day(basis, received_at, policy)
    if basis is LegalBasis.GDPR:
        day = next_working_day(add_months(original, GDPR_EXTENSION_MONTHS), policy)
    else:
        day = original + timedelta(days=CCPA_DAYS)
    return end_of_day(day, policy)


def _paused(events: Iterable[ClockEvent], now: datetime) -> tuple[timedelta, bool]:
    total = timedelta(0)
    paused_at: datetime | None = None
    for ev in sorted(events, key=lambda e: e.at):
        if ev.kind == "pause" and paused_at is None:
            paused_at = ev.at
        elif ev.kind == "resume" and paused_at is not None:
            total += ev.at - paused_at
            paused_at = None
    if paused_at is not None:
        total += max(now - paused_at, timedelta(0))
    return total, paused_at is not None


def _extension(events: Iterable[ClockEvent]) -> ClockEvent | None:
    return next((ev for ev in sorted(events, key=lambda e: e.at) if ev.kind == "extend"), None)


def effective_deadline(
    basis: LegalBasis, received_at: datetime, clock_events: Iterable[ClockEvent], *, now: datetime, policy: ClockPolicy
) -> Deadline:
    """The deadline at `now`: the legal deadline, or the extended one after an extension (to its
    `until` day when given, capped at the legal maximum), moved by the whole paused time."""
    events = list(clock_events)
    shift, paused = _paused(events, now)
    ext = _extension(events)
    if ext is None:
        base = legal_deadline(basis, received_at, policy=policy)
    else:
        base = extended_deadline(basis, received_at, policy=policy)
        if ext.until is not None:
            base = min(base, end_of_day(ext.until, policy))
    deadline = base + shift
    tz = policy.tz
    days_left = (deadline.astimezone(tz).date() - now.astimezone(tz).date()).days
    return Deadline(
        deadline=deadline,
        target=deadline - timedelta(days=policy.target_days_before),
        paused=paused,
        extended=ext is not None,
        days_left=days_left,
    )


def check_clock_event(
    basis: LegalBasis,
    received_at: datetime,
    clock_events: Iterable[ClockEvent],
    new: ClockEvent,
    *,
    policy: ClockPolicy,
) -> None:
    """Refuse a clock event that the law or the recorded history does not allow.

    `InputError`: an event dated before the last recorded one, an extension the law
    does not provide, or one past the legal maximum / not after the current deadline. `Conflict`:
    pausing a paused clock, resuming a running one, a second extension, or an extension noticed after
    the original deadline (GDPR: notice inside the first month)."""
    events = sorted(clock_events, key=lambda e: e.at)
    if events and new.at < events[-1].at:
        raise InputError(f"{new.kind}: the time is before the request's last recorded clock event")
    _, paused = _paused(events, new.at)
    if new.kind == "pause" and paused:
        raise Conflict("pause: the clock is already paused")
    if new.kind == "resume" and not paused:
        raise Conflict("resume: the clock is not paused")
    if new.kind != "extend":
        return
    maximum = extended_deadline(basis, received_at, policy=policy)  # InputError for POPIA/KE_DPA
    if _extension(events) is not None:
        raise Conflict("extend: the deadline was already extended once")
    current = effective_deadline(basis, received_at, events, now=new.at, policy=policy)
    if new.at > current.deadline:
        raise Conflict("extend: notice must be given before the original deadline, which has passed")
    if new.until is not None:
        until_end = end_of_day(new.until, policy)
        if until_end > maximum:
            raise InputError(
                f"extend: {new.until.isoformat()} is past the legal maximum "
                f"({maximum.astimezone(policy.tz).date().isoformat()})"
            )
        if until_end <= legal_deadline(basis, received_at, policy=policy):
            raise InputError("extend: the new date is not after the original deadline")
