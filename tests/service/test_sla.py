"""The SLA table (`erasure.sla`) on a real engine database: deadlines near and past, at-risk and
breached flags, days left, pauses and extensions shown in every SLA view (rows, Markdown, metrics,
`erasure sla --json`); the Prometheus textfile parses with prometheus_client's own parser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import apsw
import pytest
import typer
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from cli.sla import sla
from erasure import request_records
from erasure.clocks import ClockPolicy, LegalBasis, iso_utc
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import InputError
from erasure.models import ErasureRequestEnvelope
from erasure.sla import COLUMNS, sla_rows, state_counts, summarise, to_markdown
from erasure.states import RequestState
from service.clocks import clock_operation
from service.metrics import default_textfile, families, write_textfile
from tests.engine_of import EngineOf

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)  # a Tuesday
POLICY = ClockPolicy()
SUBJECT = {"id": "subj-sla-9001", "email": "quilla.vance@example.org", "name": "Quilla Vance"}


def envelope(rid: str, basis: LegalBasis, received: datetime) -> ErasureRequestEnvelope:
    return ErasureRequestEnvelope.model_validate(
        {
            "request_id": rid,
            "tenant_id": "default",
            "legal_basis": basis.value,
            "subject": SUBJECT,
            "received_at": received.isoformat(),
            "requester_identity_proof_ref": "kyc/7",
            "reason": "Art.17 request via the privacy portal",
        },
        context={"now": received + timedelta(minutes=1)},
    )


def submit(conn: apsw.Connection, rid: str, basis: LegalBasis, days_ago: float, now: datetime = NOW) -> None:
    received = now - timedelta(days=days_ago)
    request_records.submit(conn, envelope(rid, basis, received), now=received + timedelta(minutes=1), policy=POLICY)


@pytest.fixture
def engine(home: Home) -> Iterator[apsw.Connection]:
    conn = open_engine(home.engine_db)
    yield conn
    conn.close()


@pytest.fixture
def mixed(engine: apsw.Connection) -> apsw.Connection:
    """CCPA requests (45 calendar days) at known distances from their deadlines, a paused and an
    extended GDPR request, and one already notified (closed)."""
    submit(engine, "r-ok", LegalBasis.CCPA, 1)  # 44 days left
    submit(engine, "r-edge-out", LegalBasis.CCPA, 37)  # 8 days left: not at risk with 7
    submit(engine, "r-edge-in", LegalBasis.CCPA, 38)  # 7 days left: at risk (inclusive)
    submit(engine, "r-today", LegalBasis.CCPA, 45)  # deadline tonight: 0 days left, not breached
    submit(engine, "r-late", LegalBasis.CCPA, 50)  # 5 days overdue
    submit(engine, "r-paused", LegalBasis.GDPR, 2)
    request_records.pause(engine, "r-paused", "identity verification", now=NOW - timedelta(days=1), policy=POLICY)
    submit(engine, "r-ext", LegalBasis.GDPR, 20)
    request_records.extend(engine, "r-ext", "complex request", now=NOW - timedelta(days=1), policy=POLICY)
    submit(engine, "r-closed", LegalBasis.CCPA, 60)
    request_records.set_state(engine, "r-closed", RequestState.notified)
    request_records.set_state(engine, "r-edge-in", RequestState.blocked, "held: 3 items")
    return engine


def by_id(conn: apsw.Connection, **kw: Any) -> dict[str, Any]:
    return {r.request_id: r for r in sla_rows(conn, now=NOW, policy=POLICY, **kw)}


def test_rows_flag_at_risk_and_breached_with_days_left(mixed: apsw.Connection) -> None:
    rows = by_id(mixed)
    assert set(rows) == {"r-ok", "r-edge-out", "r-edge-in", "r-today", "r-late", "r-paused", "r-ext"}
    expect = {  # days_left, at_risk, breached
        "r-ok": (44, False, False),
        "r-edge-out": (8, False, False),
        "r-edge-in": (7, True, False),
        "r-today": (0, True, False),
        "r-late": (-5, False, True),
    }
    for rid, (days, at_risk, breached) in expect.items():
        r = rows[rid]
        assert (r.days_left, r.at_risk, r.breached) == (days, at_risk, breached), rid
    assert rows["r-late"].seconds_left < -4 * 86400
    assert 0 < rows["r-today"].seconds_left <= 12 * 3600
    assert rows["r-edge-in"].state is RequestState.blocked
    assert rows["r-today"].past_target and not rows["r-ok"].past_target


def test_rows_are_soonest_deadline_first_and_threshold_is_configurable(mixed: apsw.Connection) -> None:
    rows = sla_rows(mixed, now=NOW, policy=POLICY)
    assert [r.deadline for r in rows] == sorted(r.deadline for r in rows)
    assert rows[0].request_id == "r-late"
    wide = by_id(mixed, at_risk_days=10)
    assert wide["r-edge-out"].at_risk
    none = by_id(mixed, at_risk_days=0)
    assert [rid for rid, r in none.items() if r.at_risk] == ["r-today"]
    with pytest.raises(InputError):
        sla_rows(mixed, now=NOW, at_risk_days=-1)


def test_paused_and_extended_are_shown_and_a_pause_keeps_days_left(mixed: apsw.Connection) -> None:
    rows = by_id(mixed)
    paused, ext = rows["r-paused"], rows["r-ext"]
    assert (paused.paused, paused.extended, paused.state) == (True, False, RequestState.paused)
    assert (ext.extended, ext.paused) == (True, False)
    assert ext.days_left > 60  # GDPR: two further months
    later = {r.request_id: r for r in sla_rows(mixed, now=NOW + timedelta(days=3), policy=POLICY)}
    assert later["r-paused"].days_left == paused.days_left  # the clock stands still while paused
    assert later["r-paused"].deadline == paused.deadline + timedelta(days=3)
    assert later["r-ok"].days_left == rows["r-ok"].days_left - 3


def test_a_request_waiting_for_the_dpo_shows_how_long_it_has_waited(engine: apsw.Connection) -> None:
    submit(engine, "r-dpo", LegalBasis.GDPR, 10)
    request_records.set_state(engine, "r-dpo", RequestState.awaiting_attestation, now=NOW - timedelta(days=3, hours=12))
    submit(engine, "r-new", LegalBasis.GDPR, 0.25)  # vaulted six hours ago, state unchanged since
    rows = by_id(engine)
    assert rows["r-dpo"].state is RequestState.awaiting_attestation
    assert rows["r-dpo"].in_state_days == 3.5 and rows["r-dpo"].as_dict()["in_state_days"] == 3.5
    assert 0.2 <= rows["r-new"].in_state_days <= 0.3
    assert "in_state_days" in COLUMNS


def test_filter_by_legal_basis(mixed: apsw.Connection) -> None:
    assert set(by_id(mixed, legal_bases=[LegalBasis.GDPR])) == {"r-paused", "r-ext"}
    assert by_id(mixed, legal_bases=["POPIA"]) == {}


def test_summary_counts_and_markdown(mixed: apsw.Connection) -> None:
    rows = sla_rows(mixed, now=NOW, policy=POLICY)
    s = summarise(rows)
    assert (s.open, s.at_risk, s.breached, s.paused, s.extended) == (7, 2, 1, 1, 1)
    md = to_markdown(rows, now=NOW)
    assert "**7** open, **1** breached, **2** at risk" in md
    line = next(ln for ln in md.splitlines() if "`r-late`" in ln)
    assert "BREACHED" in line and "| -5 |" in line
    ext_line = next(ln for ln in md.splitlines() if "`r-ext`" in ln)
    assert "| yes | no | ok |" in ext_line
    assert "No open requests." in to_markdown([], now=NOW)


def test_state_counts_include_every_state(mixed: apsw.Connection) -> None:
    counts = state_counts(mixed)
    assert set(counts) == {s.value for s in RequestState}
    assert counts["submitted"] == 5 and counts["paused"] == 1 and counts["blocked"] == 1
    assert counts["notified"] == 1 and counts["sealed"] == 0


def test_rows_and_reports_carry_no_identifiers(mixed: apsw.Connection) -> None:
    rows = sla_rows(mixed, now=NOW, policy=POLICY)
    text = json.dumps([r.as_dict() for r in rows]) + to_markdown(rows, now=NOW)
    for value in (*SUBJECT.values(), "quilla", "vance"):
        assert value.lower() not in text.lower()
    assert list(rows[0].as_dict())[: len(COLUMNS)] == list(COLUMNS)


def test_metrics_textfile_parses_with_prometheus_parser(mixed: apsw.Connection, home: Home) -> None:
    rows = sla_rows(mixed, now=NOW, policy=POLICY)
    path = write_textfile(default_textfile(home), rows, state_counts(mixed), now=NOW)
    assert path == home.root / "metrics" / "erasure_sla.prom"
    fams = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    seconds = {s.labels["request_id"]: s for s in fams["erasure_request_seconds_to_deadline"].samples}
    assert set(seconds) == {r.request_id for r in rows}
    assert seconds["r-late"].value < 0 < seconds["r-ok"].value
    assert seconds["r-paused"].labels["paused"] == "true" and seconds["r-ext"].labels["extended"] == "true"
    assert seconds["r-edge-in"].labels["state"] == "blocked"
    deadline = {s.labels["request_id"]: s.value for s in fams["erasure_request_deadline_timestamp_seconds"].samples}
    assert deadline["r-late"] == pytest.approx(
        (NOW - timedelta(days=5)).replace(hour=23, minute=59, second=59, microsecond=999999).timestamp()
    )
    days = {s.labels["request_id"]: s.value for s in fams["erasure_request_days_left"].samples}
    assert days["r-edge-in"] == 7
    by_state = {s.labels["state"]: s.value for s in fams["erasure_requests"].samples}
    assert by_state["notified"] == 1 and by_state["paused"] == 1
    assert fams["erasure_requests_overdue"].samples[0].value == 1
    assert fams["erasure_requests_at_risk"].samples[0].value == 2
    assert fams["erasure_requests_open"].samples[0].value == 7
    assert fams["erasure_sla_generated_timestamp_seconds"].samples[0].value == NOW.timestamp()
    assert not list(path.parent.glob("*.tmp*"))  # written atomically: no temp file left


def test_metrics_of_an_empty_engine(engine: apsw.Connection) -> None:
    names = {f.name: f for f in families([], state_counts(engine), now=NOW)}
    assert names["erasure_requests_open"].samples[0].value == 0
    assert names["erasure_request_seconds_to_deadline"].samples == []


def test_clock_operations_are_audited_and_shown_in_every_sla_view(
    engine: apsw.Connection, home: Home, engine_of: EngineOf
) -> None:
    now = datetime.now(UTC)
    submit(engine, "r-clock", LegalBasis.GDPR, 3, now=now)
    submit(engine, "r-ccpa", LegalBasis.CCPA, 44, now=now)  # 1 day left: at risk
    before = by_id_now(engine, now)["r-clock"]
    paused = clock_operation(engine_of(home), "pause", "r-clock", "identity verification", now=now)
    assert paused["paused"] is True
    resumed = clock_operation(engine_of(home), "resume", "r-clock", "identity verified", now=now + timedelta(days=2))
    assert resumed["deadline"] == iso_utc(before.deadline + timedelta(days=2))
    extended = clock_operation(engine_of(home), "extend", "r-clock", "complex request", now=now + timedelta(days=2))
    assert extended["extended"] is True
    events = [r[0] for r in engine.execute("SELECT event FROM engine_events WHERE request_id = 'r-clock' ORDER BY seq")]
    assert events == ["request.submitted", "request.paused", "request.resumed", "request.extended"]
    assert [e.kind for e in request_records.clock_events(engine, "r-clock")] == ["pause", "resume", "extend"]

    row = by_id_now(engine, now + timedelta(days=2))["r-clock"]
    assert row.extended and not row.paused
    assert row.deadline == request_records.get(engine, "r-clock").deadline

    app = typer.Typer()
    app.command()(sla)
    res = CliRunner().invoke(app, ["--json"], env={"ERASURE_HOME": str(home.root)})
    assert res.exit_code == 0, res.output
    out = {d["request_id"]: d for d in json.loads(res.stdout)}
    for d in out.values():
        assert {
            "request_id",
            "legal_basis",
            "deadline",
            "days_left",
            "state",
            "at_risk",
            "breached",
            "extended",
            "paused",
        } <= set(d)
    assert out["r-clock"]["extended"] is True and out["r-clock"]["state"] == "submitted"
    assert out["r-ccpa"]["at_risk"] is True and out["r-ccpa"]["days_left"] == 1
    table = CliRunner().invoke(app, [], env={"ERASURE_HOME": str(home.root), "COLUMNS": "200"})
    assert table.exit_code == 0 and "r-clock" in table.stdout and "at risk" in table.stdout
    assert SUBJECT["email"] not in table.stdout + res.stdout


def by_id_now(conn: apsw.Connection, now: datetime) -> dict[str, Any]:
    return {r.request_id: r for r in sla_rows(conn, now=now)}


def test_grafana_dashboard_reads_only_metrics_we_export(mixed: apsw.Connection) -> None:
    import re

    from erasure.config import PROJECT_ROOT

    dash = json.loads((PROJECT_ROOT / "dashboards" / "grafana-erasure-sla.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\berasure_[a-z_]+\b", e)}
    exported = {f.name for f in families(sla_rows(mixed, now=NOW, policy=POLICY), state_counts(mixed), now=NOW)}
    assert used and used <= exported, used - exported
    labels = {m for e in exprs for m in re.findall(r"by \(([^)]*)\)", e)}
    assert {lab.strip() for group in labels for lab in group.split(",")} <= {
        "request_id",
        "legal_basis",
        "state",
        "extended",
        "paused",
    }


def test_live_metrics_endpoint_recomputes_on_every_scrape(home: Home, engine: apsw.Connection) -> None:
    import socket

    import httpx

    from service.metrics import serve_metrics, stop_metrics

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = serve_metrics(home, port, secret="scrape-secret")
    try:

        def scrape() -> dict[str, Any]:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5, auth=("prometheus", "scrape-secret")).text
            return {f.name: f for f in text_string_to_metric_families(text)}

        assert scrape()["erasure_requests_open"].samples[0].value == 0
        submit(engine, "r-live", LegalBasis.CCPA, 50, now=datetime.now(UTC))
        fams = scrape()
        assert fams["erasure_requests_overdue"].samples[0].value == 1
        assert [s.labels["request_id"] for s in fams["erasure_request_seconds_to_deadline"].samples] == ["r-live"]
    finally:
        stop_metrics(server)
