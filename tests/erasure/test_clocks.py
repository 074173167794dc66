"""Regulatory clocks: GDPR month counting, working days, CCPA days, internal bounds, extensions, pauses;
and the same clocks driven through the request vault on a real engine database."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from erasure import request_records
from erasure.clocks import (
    ClockEvent,
    ClockPolicy,
    LegalBasis,
    check_clock_event,
    effective_deadline,
    extended_deadline,
    iso_utc,
    legal_deadline,
    parse_utc,
)
from erasure.engine import open_engine
from erasure.errors import ConfigError, Conflict, InputError
from erasure.models import ErasureRequestEnvelope
from erasure.states import RequestState
from tests import budget

POLICY = ClockPolicy()
GDPR, CCPA, POPIA, KE = LegalBasis.GDPR, LegalBasis.CCPA, LegalBasis.POPIA, LegalBasis.KE_DPA


def at(day: str, hhmm: str = "10:00") -> datetime:
    return datetime.fromisoformat(f"{day}T{hhmm}:00+00:00")


def eod(day: str) -> datetime:
    return datetime.combine(date.fromisoformat(day), time(23, 59, 59, 999999), tzinfo=UTC)


# --- GDPR: one month, Regulation 1182/71 Art.3 ---------------------------------------------------


@pytest.mark.parametrize(
    ("received", "deadline"),
    [
        ("2024-01-31", "2024-02-29"),  # leap year: the month has no 31st -> its last day (a Thursday)
        ("2023-01-31", "2023-02-28"),  # not a leap year -> 28 Feb (a Tuesday)
        ("2024-03-31", "2024-04-30"),  # 30-day month
        ("2024-01-15", "2024-02-15"),  # same date next month
        ("2024-12-02", "2025-01-02"),  # across the year end
    ],
)
def test_gdpr_one_month_same_date_or_month_end(received: str, deadline: str) -> None:
    assert legal_deadline(GDPR, at(received), policy=POLICY) == eod(deadline)


@pytest.mark.parametrize(
    ("received", "deadline"),
    [
        ("2024-04-04", "2024-05-06"),  # 4 May 2024 is a Saturday -> Monday 6 May
        ("2024-04-05", "2024-05-06"),  # 5 May 2024 is a Sunday -> Monday 6 May
        ("2023-08-30", "2023-10-02"),  # 30 Sep 2023 is a Saturday -> Monday 2 Oct
    ],
)
def test_gdpr_deadline_on_weekend_moves_to_monday(received: str, deadline: str) -> None:
    d = legal_deadline(GDPR, at(received), policy=POLICY)
    assert d == eod(deadline)
    assert d.weekday() == 0


def test_gdpr_configured_holidays_are_not_working_days() -> None:
    xmas = ClockPolicy(holidays=frozenset({date(2024, 12, 25), date(2024, 12, 26)}))
    assert legal_deadline(GDPR, at("2024-11-25"), policy=POLICY) == eod("2024-12-25")
    assert legal_deadline(GDPR, at("2024-11-25"), policy=xmas) == eod("2024-12-27")
    # A holiday on the Friday before a weekend pushes to Monday.
    friday = ClockPolicy(holidays=frozenset({date(2024, 3, 29)}))
    assert legal_deadline(GDPR, at("2024-02-29"), policy=friday) == eod("2024-04-01")


def test_deadline_is_end_of_day_in_the_legal_timezone_stored_as_utc() -> None:
    berlin = ClockPolicy(legal_tz="Europe/Berlin")
    # 23:30 UTC on 31 Jan is already 1 Feb in Berlin: the month runs from 1 Feb -> 1 Mar (a Friday).
    d = legal_deadline(GDPR, at("2024-01-31", "23:30"), policy=berlin)
    assert d.tzinfo is UTC
    assert d == datetime(2024, 3, 1, 22, 59, 59, 999999, tzinfo=UTC)
    assert legal_deadline(GDPR, at("2024-01-31", "23:30"), policy=POLICY) == eod("2024-02-29")


def test_gdpr_extension_two_further_months_from_the_original_deadline() -> None:
    assert extended_deadline(GDPR, at("2024-01-31"), policy=POLICY) == eod("2024-04-29")
    # Original deadline Mon 6 May (rolled) -> 6 Jul 2024 is a Saturday -> Monday 8 Jul.
    assert extended_deadline(GDPR, at("2024-04-04"), policy=POLICY) == eod("2024-07-08")


@settings(max_examples=budget.examples(300), deadline=None)
@given(received=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31), timezones=st.just(UTC)))
def test_gdpr_deadline_is_a_working_day_28_to_34_days_after_receipt(received: datetime) -> None:
    d = legal_deadline(GDPR, received, policy=POLICY)
    assert d.time() == time(23, 59, 59, 999999)
    assert d.weekday() < 5
    assert 28 <= (d.date() - received.date()).days <= 34
    ext = extended_deadline(GDPR, received, policy=POLICY)
    assert ext.weekday() < 5
    assert 59 <= (ext.date() - d.date()).days <= 65


# --- CCPA, POPIA, Kenya DPA ------------------------------------------------------------------


def test_ccpa_45_calendar_days_and_one_extension_by_45() -> None:
    assert legal_deadline(CCPA, at("2024-03-02"), policy=POLICY) == eod("2024-04-16")
    assert extended_deadline(CCPA, at("2024-03-02"), policy=POLICY) == eod("2024-05-31")
    # Calendar days: a Saturday stays a Saturday.
    sat = legal_deadline(CCPA, at("2024-01-31"), policy=POLICY)
    assert sat == eod("2024-03-16")
    assert sat.weekday() == 5


def test_popia_and_kenya_use_the_internal_bound_and_refuse_extension() -> None:
    assert legal_deadline(POPIA, at("2024-06-10"), policy=POLICY) == eod("2024-07-10")
    assert legal_deadline(KE, at("2024-06-10"), policy=ClockPolicy(internal_bound_days=14)) == eod("2024-06-24")
    for basis in (POPIA, KE):
        with pytest.raises(InputError, match="no extension"):
            extended_deadline(basis, at("2024-06-10"), policy=POLICY)
        with pytest.raises(InputError, match="no extension"):
            check_clock_event(basis, at("2024-06-10"), [], ClockEvent("extend", at("2024-06-11")), policy=POLICY)


def test_target_is_configurable_days_before_the_deadline() -> None:
    d = effective_deadline(GDPR, at("2024-01-31"), [], now=at("2024-02-01"), policy=POLICY)
    assert d.target == d.deadline - timedelta(days=7)
    d3 = effective_deadline(GDPR, at("2024-01-31"), [], now=at("2024-02-01"), policy=ClockPolicy(target_days_before=3))
    assert d3.target == eod("2024-02-26")
    assert (d.days_left, d.paused, d.extended) == (28, False, False)


# --- extensions: refusals --------------------------------------------------------------------


def test_extension_refused_past_the_legal_maximum() -> None:
    ok = ClockEvent("extend", at("2024-02-10"), date(2024, 4, 29))
    check_clock_event(GDPR, at("2024-01-31"), [], ok, policy=POLICY)
    too_far = ClockEvent("extend", at("2024-02-10"), date(2024, 4, 30))
    with pytest.raises(InputError, match="past the legal maximum"):
        check_clock_event(GDPR, at("2024-01-31"), [], too_far, policy=POLICY)
    with pytest.raises(InputError, match="past the legal maximum"):
        check_clock_event(
            CCPA, at("2024-03-02"), [], ClockEvent("extend", at("2024-03-03"), date(2024, 6, 1)), policy=POLICY
        )


def test_extension_to_a_day_sets_that_deadline() -> None:
    ev = ClockEvent("extend", at("2024-02-10"), date(2024, 3, 29))
    d = effective_deadline(GDPR, at("2024-01-31"), [ev], now=at("2024-02-10"), policy=POLICY)
    assert (d.deadline, d.extended) == (eod("2024-03-29"), True)


def test_second_extension_refused() -> None:
    first = ClockEvent("extend", at("2024-02-10"))
    with pytest.raises(Conflict, match="already extended"):
        check_clock_event(GDPR, at("2024-01-31"), [first], ClockEvent("extend", at("2024-02-11")), policy=POLICY)


def test_extension_after_the_original_deadline_refused() -> None:
    with pytest.raises(Conflict, match="before the original deadline"):
        check_clock_event(GDPR, at("2024-01-31"), [], ClockEvent("extend", at("2024-03-01", "00:00")), policy=POLICY)
    # The last moment of the deadline day is still inside.
    check_clock_event(GDPR, at("2024-01-31"), [], ClockEvent("extend", eod("2024-02-29")), policy=POLICY)


# --- pauses ------------------------------------------------------------------------------------


def test_pause_and_resume_move_the_deadline_by_the_paused_time() -> None:
    received = at("2024-01-31")
    events = [ClockEvent("pause", at("2024-02-01")), ClockEvent("resume", at("2024-02-04", "16:00"))]
    d = effective_deadline(GDPR, received, events, now=at("2024-02-10"), policy=POLICY)
    assert d.deadline == eod("2024-02-29") + timedelta(days=3, hours=6)
    assert not d.paused
    two = [*events, ClockEvent("pause", at("2024-02-05")), ClockEvent("resume", at("2024-02-06"))]
    assert effective_deadline(GDPR, received, two, now=at("2024-02-10"), policy=POLICY).deadline == (
        eod("2024-02-29") + timedelta(days=4, hours=6)
    )


def test_open_pause_moves_the_deadline_by_now_minus_paused_at() -> None:
    events = [ClockEvent("pause", at("2024-02-01"))]
    d = effective_deadline(GDPR, at("2024-01-31"), events, now=at("2024-02-03"), policy=POLICY)
    assert d.paused
    assert d.deadline == eod("2024-02-29") + timedelta(days=2)
    later = effective_deadline(GDPR, at("2024-01-31"), events, now=at("2024-02-05"), policy=POLICY)
    assert later.deadline == eod("2024-02-29") + timedelta(days=4)
    assert later.days_left == d.days_left  # the clock stands still while paused


def test_pause_twice_or_resume_unpaused_refused() -> None:
    with pytest.raises(Conflict, match="not paused"):
        check_clock_event(GDPR, at("2024-01-31"), [], ClockEvent("resume", at("2024-02-01")), policy=POLICY)
    with pytest.raises(Conflict, match="already paused"):
        check_clock_event(
            GDPR,
            at("2024-01-31"),
            [ClockEvent("pause", at("2024-02-01"))],
            ClockEvent("pause", at("2024-02-02")),
            policy=POLICY,
        )


def test_extension_with_a_pause_adds_both() -> None:
    events = [
        ClockEvent("pause", at("2024-02-01")),
        ClockEvent("resume", at("2024-02-03")),
        ClockEvent("extend", at("2024-02-10")),
    ]
    d = effective_deadline(GDPR, at("2024-01-31"), events, now=at("2024-02-11"), policy=POLICY)
    assert d.deadline == eod("2024-04-29") + timedelta(days=2)
    assert d.extended


# --- policy -----------------------------------------------------------------------------------


def test_policy_from_env(tmp_path: Path) -> None:
    hol = tmp_path / "holidays.json"
    hol.write_text(json.dumps(["2024-12-25", "2024-12-26"]))
    p = ClockPolicy.from_env(
        {
            "ERASURE_HOLIDAYS": str(hol),
            "ERASURE_INTERNAL_BOUND_DAYS": "21",
            "ERASURE_TARGET_DAYS_BEFORE": "5",
            "ERASURE_LEGAL_TZ": "Africa/Nairobi",
        }
    )
    assert p == ClockPolicy(
        holidays=frozenset({date(2024, 12, 25), date(2024, 12, 26)}),
        internal_bound_days=21,
        target_days_before=5,
        legal_tz="Africa/Nairobi",
    )
    assert ClockPolicy.from_env({}) == ClockPolicy()


@pytest.mark.parametrize("content", ['["2024-13-01"]', '{"a": 1}', "not json", "[20241225]"])
def test_policy_bad_holidays_file(tmp_path: Path, content: str) -> None:
    hol = tmp_path / "holidays.json"
    hol.write_text(content)
    with pytest.raises(ConfigError):
        ClockPolicy.from_env({"ERASURE_HOLIDAYS": str(hol)})


def test_policy_bad_values() -> None:
    with pytest.raises(ConfigError):
        ClockPolicy.from_env({"ERASURE_LEGAL_TZ": "Mars/Olympus"})
    with pytest.raises(ConfigError):
        ClockPolicy.from_env({"ERASURE_INTERNAL_BOUND_DAYS": "thirty"})
    with pytest.raises(ConfigError):
        ClockPolicy(internal_bound_days=0)
    with pytest.raises(ConfigError):
        ClockPolicy.from_env({"ERASURE_HOLIDAYS": "/nonexistent/holidays.json"})


def test_iso_utc_round_trip_and_order() -> None:
    a, b = at("2024-02-29", "23:59"), eod("2024-02-29")
    assert iso_utc(b) == "2024-02-29T23:59:59.999999Z"
    assert parse_utc(iso_utc(a)) == a
    assert iso_utc(a) < iso_utc(b)
    with pytest.raises(ValueError):
        iso_utc(datetime(2024, 1, 1))


# --- through the vault -------------------------------------------------------------------------


def envelope(basis: LegalBasis = GDPR, rid: str = "req-1") -> ErasureRequestEnvelope:
    return ErasureRequestEnvelope.model_validate(
        {
            "request_id": rid,
            "tenant_id": "t1",
            "legal_basis": basis.value,
            "subject": {"id": "subj-42", "email": "zelda.q@example.org", "name": "Zelda Quartz"},
            "received_at": "2024-01-31T10:00:00Z",
            "requester_identity_proof_ref": "kyc/1",
            "reason": "Art.17(1)(a) request",
        }
    )


def test_vault_pause_resume_extend_update_the_stored_deadline(home) -> None:  # type: ignore[no-untyped-def]
    conn = open_engine(home.engine_db)
    request_records.submit(conn, envelope(), now=at("2024-01-31", "11:00"), policy=POLICY)
    assert request_records.get(conn, "req-1").deadline == eod("2024-02-29")

    request_records.pause(conn, "req-1", "identity verification pending", now=at("2024-02-01"), policy=POLICY)
    row = request_records.get(conn, "req-1")
    assert row.state is RequestState.paused
    request_records.resume(conn, "req-1", "identity verified", now=at("2024-02-03"), policy=POLICY)
    row = request_records.get(conn, "req-1")
    assert row.state is RequestState.submitted
    assert row.deadline == eod("2024-02-29") + timedelta(days=2)
    assert row.target == row.deadline - timedelta(days=7)

    d = request_records.extend(conn, "req-1", "complex request: many tiers", now=at("2024-02-10"), policy=POLICY)
    assert d.deadline == eod("2024-04-29") + timedelta(days=2)
    assert request_records.get(conn, "req-1").deadline == d.deadline
    kinds = [e.kind for e in request_records.clock_events(conn, "req-1")]
    assert kinds == ["pause", "resume", "extend"]
    events = [r[0] for r in conn.execute("SELECT event FROM engine_events ORDER BY seq")]
    assert events == ["request.submitted", "request.paused", "request.resumed", "request.extended"]

    before = conn.execute("SELECT COUNT(*) FROM clock_events").fetchone()
    with pytest.raises(Conflict):
        request_records.extend(conn, "req-1", "again", now=at("2024-02-11"), policy=POLICY)
    assert conn.execute("SELECT COUNT(*) FROM clock_events").fetchone() == before


def test_vault_clock_refusals_write_nothing(home) -> None:  # type: ignore[no-untyped-def]
    conn = open_engine(home.engine_db)
    request_records.submit(conn, envelope(), now=at("2024-01-31", "11:00"), policy=POLICY)
    request_records.submit(conn, envelope(POPIA, "req-za"), now=at("2024-01-31", "11:00"), policy=POLICY)

    def snapshot() -> list[object]:
        return [
            conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
            for t in ("requests", "clock_events", "engine_events")
        ]

    before = snapshot()
    with pytest.raises(InputError, match="no extension"):
        request_records.extend(conn, "req-za", "busy", now=at("2024-02-01"), policy=POLICY)
    with pytest.raises(Conflict):
        request_records.extend(conn, "req-1", "late notice", now=at("2024-03-02"), policy=POLICY)
    with pytest.raises(InputError, match="legal maximum"):
        request_records.extend(conn, "req-1", "long", now=at("2024-02-02"), until=date(2024, 5, 1), policy=POLICY)
    with pytest.raises(InputError, match="subject's name"):
        request_records.pause(conn, "req-1", "waiting on Zelda's passport", now=at("2024-02-02"), policy=POLICY)
    with pytest.raises(InputError, match="subject's email"):
        request_records.pause(conn, "req-1", "sent to ZELDA.Q@example.org", now=at("2024-02-02"), policy=POLICY)
    with pytest.raises(Conflict, match="not paused"):
        request_records.resume(conn, "req-1", "verified", now=at("2024-02-02"), policy=POLICY)
    with pytest.raises(InputError, match="reason"):
        request_records.pause(conn, "req-1", "   ", now=at("2024-02-02"), policy=POLICY)
    request_records.set_state(conn, "req-1", RequestState.running, now=at("2024-02-02"))
    mid = snapshot()
    with pytest.raises(Conflict, match="running"):
        request_records.pause(conn, "req-1", "identity check", now=at("2024-02-03"), policy=POLICY)
    assert snapshot() == mid
    assert before[1] == mid[1] == []
