"""The compliance team's deployments on a REAL Prefect server.

One module-scoped console, started the way `make serve` starts it (`python -m cli.serve`: `prefect
server start` on a free port with PREFECT_HOME in a temp dir, the process pool, `prefect deploy --all`
from prefect.yaml, a worker subprocess). Flow runs are triggered by deployment with parameters and run
by the worker. Also here: the operations' library functions on real stores (no server).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client.parser import text_string_to_metric_families

from erasure import request_records
from erasure.config import PROJECT_ROOT, Home
from erasure.engine import open_engine
from erasure.errors import Conflict, InputError, NotFound
from erasure.models import ErasureRequestEnvelope
from erasure.states import RequestState
from erasure.tiers import CASCADE_ORDER
from memory import holds, keyed, suppression
from memory.schema import create
from proof.keys import generate_keypair
from service import clocks, consent, intake
from service import holds as service_holds
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store
from tests.cascade_fixtures import submit as submit_subject
from tests.engine_of import EngineOf
from tests.process_fixtures import free_port, pause_the_hourly_window

DEPLOYMENTS = {
    "erasure-request",
    "erasure-window",
    "erasure-replay",
    "verification",
    "reverification",
    "reverify-due",
    "sla-monitor",
    "hold-place",
    "hold-release",
    "suppression-allow",
    "request-extend",
    "request-pause",
    "request-resume",
    "intake",
}
INBOX_SUBJECT = {"id": "subj-inbox-5150", "email": "odalys.brenn@example.com", "name": "Odalys Brenn"}
READY_TIMEOUT = 180.0
RUN_TIMEOUT = 240.0


def envelope(rid: str, basis: str, days_ago: float, subject: dict[str, str] | None = None) -> ErasureRequestEnvelope:
    return ErasureRequestEnvelope.model_validate(
        {
            "request_id": rid,
            "tenant_id": "default",
            "legal_basis": basis,
            "subject": subject or {"id": f"subj-{rid}"},
            "received_at": (datetime.now(UTC) - timedelta(days=days_ago)).isoformat(),
            "requester_identity_proof_ref": "kyc/1",
            "reason": "deletion request via the portal",
        }
    )


def vault(h: Home, env: ErasureRequestEnvelope) -> None:
    engine = open_engine(h.engine_db)
    try:
        request_records.submit(engine, env, now=datetime.now(UTC))
    finally:
        engine.close()


def give_back(h: Home) -> None:
    """What this test process wrote into a running console's home as root (the library called directly,
    not the CLI, which becomes the home's owner first) is given to the user runs execute as."""
    if os.geteuid() == 0:
        from erasure.service_user import take_home

        take_home(h)


@dataclass
class Console:
    home: Home
    api: str
    proc: subprocess.Popen[bytes]
    out: Path


def start_console(h: Home, out: Path, *, sla_now: bool = False, hourly_window: bool = False) -> Console:
    """`python -m cli.serve` in its own session; returns once it prints `ready:`, with the hourly
    `erasure-window` deployment paused unless `hourly_window` (see `pause_the_hourly_window`)."""
    port = free_port()
    env = {
        **os.environ,
        "ERASURE_HOME": str(h.root),
        "ERASURE_EVIDENCE": str(h.evidence_root),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    with open(out, "wb") as fh:
        cmd = [
            sys.executable,
            "-m",
            "cli.serve",
            "--home",
            str(h.root),
            "--port",
            str(port),
            "--sla-now" if sla_now else "--no-sla-now",
        ]
        proc = subprocess.Popen(
            cmd,
            cwd=PROJECT_ROOT,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    c = Console(h, f"http://127.0.0.1:{port}/api", proc, out)
    deadline = time.monotonic() + READY_TIMEOUT
    while "ready:" not in out.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_console(c)
            raise AssertionError(f"erasure serve did not become ready:\n{out.read_text()}")
        time.sleep(0.3)
    if not hourly_window:
        _pause_the_hourly_window(c)
    return c


def _pause_the_hourly_window(c: Console) -> None:
    """`pause_the_hourly_window` on the console's API, with its credential."""
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from cli.prefect_auth import home_secret

    with temporary_settings({PREFECT_API_URL: c.api, PREFECT_API_AUTH_STRING: home_secret(c.home)}):
        pause_the_hourly_window()


def stop_console(c: Console) -> None:
    """SIGTERM: serve stops its worker and server itself; it must exit cleanly."""
    if c.proc.poll() is None:
        c.proc.send_signal(signal.SIGTERM)
        try:
            c.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(c.proc.pid, signal.SIGKILL)
            c.proc.wait()


def wait_final(client: Any, run_ids: dict[str, Any], timeout: float = RUN_TIMEOUT) -> dict[str, Any]:
    """Poll until every run is in a final state; returns the runs by label."""
    deadline = time.monotonic() + timeout
    while True:
        runs = {label: client.read_flow_run(rid) for label, rid in run_ids.items()}
        if all(r.state is not None and r.state.is_final() for r in runs.values()):
            return runs
        if time.monotonic() > deadline:
            raise AssertionError({k: (r.state.type if r.state else None) for k, r in runs.items()})
        time.sleep(1.0)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from cli.prefect_auth import home_secret

    tmp = tmp_path_factory.mktemp("deployments")
    h = Home.resolve(tmp / "home", tmp / "evidence").ensure()
    build_store(h, tmp)
    submit_subject(h, "req-ann-1")  # erased by deployment
    submit_subject(h, "req-hold", subject=BYSTANDER)  # held, then its erasure is blocked
    generate_keypair("engine", h.keys_dir)
    vault(h, envelope("sla-late", "CCPA", 50))  # 5 days overdue
    vault(h, envelope("sla-risk", "CCPA", 42))  # 3 days left
    vault(h, envelope("sla-ok", "CCPA", 2))  # 43 days left
    (h.inbox_dir / "incoming-0001.json").write_text(
        json.dumps(envelope("req-inbox", "GDPR", 1, INBOX_SUBJECT).canonical_dict())
    )
    c = start_console(h, tmp / "serve.out")
    try:
        with temporary_settings({PREFECT_API_URL: c.api, PREFECT_API_AUTH_STRING: home_secret(h)}):
            yield c
    finally:
        stop_console(c)


@pytest.fixture(scope="module")
def runs(console: Console) -> dict[str, Any]:
    """Every flow run of the module, triggered by deployment with parameters; the independent ones at
    once, then the erasure of the held request after its hold is in place."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment

    def trigger(name: str, **params: Any) -> Any:
        # called from sync code: the run itself, not a coroutine
        run = cast(FlowRun, run_deployment(name, parameters=params, timeout=0))  # does not wait, does not raise
        return run.id

    with get_client(sync_client=True) as client:
        first = {
            "erasure": trigger("erasure-request/erasure-request", request_id="req-ann-1"),
            "sla": trigger("sla-monitor/sla-monitor", at_risk_days=7),
            "hold": trigger(
                "hold-place/hold-place",
                request_id="req-hold",
                reason="litigation",
                reference="case-2026-17",
                actor="legal-team",
            ),
            "intake": trigger("intake/intake"),
        }
        done = wait_final(client, {"hold": first["hold"]})
        blocked = trigger("erasure-request/erasure-request", request_id="req-hold")
        done = wait_final(client, {**first, "blocked": blocked})
        # after the erasure: a replay beside it could see the ledger a moment ahead of the store's epoch
        replay = trigger("erasure-replay/erasure-replay", target="reference")
        done |= wait_final(client, {"replay": replay})
    return done


def test_every_deployment_comes_from_prefect_yaml_with_form_fields(console: Console) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        deps = {d.name: d for d in client.read_deployments()}
        pool = client.read_work_pool("erasure-local")
    assert set(deps) == DEPLOYMENTS
    assert pool.type == "process"
    assert {d.work_pool_name for d in deps.values()} == {"erasure-local"}
    sla = deps["sla-monitor"]
    assert [s.schedule.cron for s in sla.schedules] == ["0 * * * *"]  # type: ignore[union-attr]
    assert all(s.active for s in sla.schedules)
    window = deps["erasure-window"]
    assert [s.schedule.cron for s in window.schedules] == ["0 * * * *"]  # type: ignore[union-attr]
    assert window.parameter_openapi_schema is not None
    ids = window.parameter_openapi_schema["properties"]["request_ids"]
    assert ids["description"] and ids["anyOf"][0]["items"]["pattern"].startswith("^[A-Za-z0-9]")
    intake = deps["intake"]
    assert [s.schedule.interval.total_seconds() for s in intake.schedules] == [600.0]  # type: ignore[union-attr]
    assert all(s.active for s in intake.schedules)
    due = deps["reverify-due"]  # issue 27: daily, re-verifying requests last verified 30 or more days ago
    assert [s.schedule.interval.total_seconds() for s in due.schedules] == [86400.0]  # type: ignore[union-attr]
    assert all(s.active for s in due.schedules) and due.parameters == {"days": 30}
    assert {d.job_variables["env"]["ERASURE_HOME"] for d in deps.values()} == {str(console.home.root)}
    for name, d in deps.items():
        assert d.parameter_openapi_schema is not None
        props = d.parameter_openapi_schema["properties"]
        assert not {"subject", "subject_id", "email", "name", "phone"} & set(props), name
        if "request_id" in props and name not in {"erasure-request", "verification"}:
            assert props["request_id"]["pattern"].startswith("^[A-Za-z0-9]"), name
        if name not in {"erasure-request", "verification"}:  # the lead's flows; ours describe every field
            assert all(p.get("description") for p in props.values()), name
    assert deps["erasure-request"].parameter_openapi_schema is not None
    assert set(deps["erasure-request"].parameter_openapi_schema["properties"]) == {"request_id"}
    sla_schema = sla.parameter_openapi_schema
    assert sla_schema is not None
    assert sla_schema["definitions"]["LegalBasis"]["enum"] == ["GDPR", "CCPA", "POPIA", "KE_DPA"]
    assert deps["request-extend"].parameter_openapi_schema is not None
    until = deps["request-extend"].parameter_openapi_schema["properties"]["until"]
    assert {"type": "string", "format": "date"} in until["anyOf"]
    assert deps["hold-place"].parameter_openapi_schema is not None
    assert deps["hold-place"].parameter_openapi_schema["required"] == ["request_id", "reference", "actor"]
    for name, d in deps.items():  # no free text in any form: every string is an enum or a pattern-checked token
        assert d.parameter_openapi_schema is not None
        for field, prop in d.parameter_openapi_schema["properties"].items():
            if prop.get("type") == "string" and "format" not in prop:
                assert "pattern" in prop or "enum" in prop, (name, field)
    hold_schema = deps["hold-place"].parameter_openapi_schema
    assert hold_schema["definitions"]["HoldReason"]["enum"][0] == "litigation"


def test_erasure_request_by_deployment_completes_on_the_worker(console: Console, runs: dict[str, Any]) -> None:
    run = runs["erasure"]
    assert run.parameters == {"request_id": "req-ann-1"}
    assert run.work_pool_name == "erasure-local" and run.deployment_id is not None
    engine = open_engine(console.home.engine_db)
    try:
        steps = {s.step: s.status.value for s in request_records.steps(engine, "req-ann-1")}
        state = request_records.get(engine, "req-ann-1").state
    finally:
        engine.close()
    assert set(steps) == {t.value for t in CASCADE_ORDER}
    assert set(steps.values()) <= {"erased", "skipped", "exception"}, steps
    assert run.state.is_completed(), (run.state.type, run.state.message)
    assert state is RequestState.awaiting_attestation
    assert (console.home.evidence_dir("req-ann-1") / "verification.json").exists()


def test_replay_by_deployment_runs_on_the_worker(console: Console, runs: dict[str, Any]) -> None:
    """The UI's replay of a store that was not restored: nothing to replay, Completed, epochs equal."""
    run = runs["replay"]
    assert run.parameters == {"target": "reference"} and run.deployment_id is not None
    assert run.state.is_completed(), (run.state.type, run.state.message)
    assert run.state.message == "0 replayed on reference"


def test_hold_placed_by_request_id_blocks_that_requests_erasure(console: Console, runs: dict[str, Any]) -> None:
    assert runs["hold"].state.is_completed(), runs["hold"].state.message
    assert runs["hold"].parameters["request_id"] == "req-hold"
    store = create(console.home.store_dir)
    try:
        assert holds.active_holds(store, BYSTANDER.id) == 1
        assert holds.active_holds(store, SUBJECT.id) == 0
    finally:
        store.close()
    blocked = runs["blocked"]
    assert blocked.state.is_failed() and blocked.state.name == "Blocked", blocked.state
    engine = open_engine(console.home.engine_db)
    try:
        assert request_records.get(engine, "req-hold").state is RequestState.blocked
        events = [
            r[0] for r in engine.execute("SELECT event FROM engine_events WHERE request_id = 'req-hold' ORDER BY seq")
        ]
    finally:
        engine.close()
    assert "hold.placed" in events


def test_intake_vaults_the_inbox_and_deletes_the_file(console: Console, runs: dict[str, Any]) -> None:
    assert runs["intake"].state.is_completed(), runs["intake"].state.message
    assert runs["intake"].parameters == {}
    assert not list(console.home.inbox_dir.glob("*.json"))
    engine = open_engine(console.home.engine_db)
    try:
        assert request_records.get(engine, "req-inbox").state is RequestState.submitted
    finally:
        engine.close()


def test_sla_monitor_publishes_artifacts_events_and_metrics(console: Console, runs: dict[str, Any]) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.events.filters import EventFilter, EventNameFilter

    sla = runs["sla"]
    assert sla.state.is_completed(), sla.state.message
    with get_client(sync_client=True) as client:
        arts = {
            a.key: a
            for a in client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["erasure-sla", "erasure-sla-report"]))
            )
        }
        deadline = time.monotonic() + 60
        while True:
            page = client.read_events(
                filter=EventFilter(event=EventNameFilter(prefix=["erasure.request.deadline."])), limit=50
            )
            got = {(e.event, e.resource.id) for e in page.events}
            if {
                ("erasure.request.deadline.breached", "erasure.request.sla-late"),
                ("erasure.request.deadline.at-risk", "erasure.request.sla-risk"),
            } <= got:
                break
            assert time.monotonic() < deadline, got
            time.sleep(1.0)
    table = arts["erasure-sla"]
    assert table.type == "table" and table.flow_run_id == sla.id
    rows = {r["request_id"]: r for r in json.loads(table.data)}  # type: ignore[arg-type]
    assert rows["sla-late"]["status"] == "BREACHED" and rows["sla-late"]["days_left"] == -5
    assert rows["sla-late"]["needs"] == "operator + DPO"
    assert rows["sla-risk"]["status"] == "at risk" and rows["sla-risk"]["days_left"] == 3
    assert rows["sla-ok"]["status"] == "ok" and rows["sla-ok"]["needs"] == ""
    assert arts["erasure-sla-report"].type == "markdown"
    assert "`sla-late`" in str(arts["erasure-sla-report"].data)
    assert not {rid for _, rid in got} & {"erasure.request.sla-ok"}
    breached = next(e for e in page.events if e.event == "erasure.request.deadline.breached")
    assert breached.payload["days_left"] == -5 and breached.payload["legal_basis"] == "CCPA"
    prom = console.home.root / "metrics" / "erasure_sla.prom"
    fams = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    assert fams["erasure_requests_overdue"].samples[0].value >= 1
    secs = {s.labels["request_id"]: s.value for s in fams["erasure_request_seconds_to_deadline"].samples}
    assert secs["sla-late"] < 0 < secs["sla-risk"]


def test_no_identifier_reaches_prefects_database_or_logs(console: Console, runs: dict[str, Any]) -> None:
    """Invariant 6, checked: grep everything under PREFECT_HOME (database, WAL, server/worker logs)."""
    blob = b"".join(p.read_bytes() for p in sorted(console.home.prefect_home.rglob("*")) if p.is_file())
    assert b"req-ann-1" in blob  # the scan does see what the runs wrote
    for subject in (SUBJECT.model_dump(exclude_none=True), BYSTANDER.model_dump(exclude_none=True), INBOX_SUBJECT):
        for value in subject.values():
            assert value.encode() not in blob, "an identifier reached Prefect's home"


def test_serve_stops_everything_it_started(tmp_path: Path, console: Console) -> None:
    # Checked on the module's console at teardown would be too late to assert: look at its children now.
    pids = [
        int(p)
        for p in subprocess.run(["pgrep", "-P", str(console.proc.pid)], capture_output=True, text=True).stdout.split()
    ]
    assert len(pids) >= 2  # server and worker
    stop_console(console)
    assert console.proc.returncode == 0
    assert "stopped" in console.out.read_text()
    time.sleep(0.5)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# --- the operations' library functions, on real stores (no server) ------------------------------------


@pytest.fixture
def store_home(home: Home) -> Home:
    create(home.store_dir).close()
    vault(
        home, envelope("req-a", "GDPR", 1, {"id": "subj-ops-77", "email": "mira.oksa@example.net", "name": "Mira Oksa"})
    )
    return home


def test_hold_place_and_release_by_request_id(store_home: Home, engine_of: EngineOf) -> None:
    placed = service_holds.place_hold(engine_of(store_home), store_home, "req-a", "litigation: case 77", "legal")
    assert placed["active_holds"] == 1
    engine = open_engine(store_home.engine_db)
    try:
        request_records.set_state(engine, "req-a", RequestState.blocked, "held: 1 items")
    finally:
        engine.close()
    released = service_holds.release_hold(engine_of(store_home), store_home, "req-a", "case closed", "legal")
    assert released == {"request_id": "req-a", "released": [placed["hold_id"]], "active_holds": 0}
    engine = open_engine(store_home.engine_db)
    try:
        assert request_records.get(engine, "req-a").state is RequestState.submitted
        events = [r[0] for r in engine.execute("SELECT event FROM engine_events WHERE request_id='req-a' ORDER BY seq")]
    finally:
        engine.close()
    assert events[-4:] == ["hold.placed", "request.state", "hold.released", "request.state"]
    with pytest.raises(NotFound):
        service_holds.release_hold(engine_of(store_home), store_home, "req-a", "again", "legal")


@pytest.mark.parametrize(
    ("field", "text"),
    [("reason", "hold for Mira Oksa"), ("reason", "re mira.oksa@example.net"), ("actor", "subj-ops-77")],
)
def test_operations_refuse_text_that_names_the_subject(
    store_home: Home, field: str, text: str, engine_of: EngineOf
) -> None:
    args = {"reason": "litigation", "actor": "legal", field: text}
    with pytest.raises(InputError, match=field):
        service_holds.place_hold(engine_of(store_home), store_home, "req-a", args["reason"], args["actor"])
    store = create(store_home.store_dir)
    try:
        assert holds.list_holds(store) == []
    finally:
        store.close()


def test_operations_refuse_unknown_or_unsafe_request_ids(store_home: Home, engine_of: EngineOf) -> None:
    with pytest.raises(NotFound):
        service_holds.place_hold(engine_of(store_home), store_home, "req-nope", "litigation", "legal")
    with pytest.raises(InputError):
        service_holds.place_hold(engine_of(store_home), store_home, "../etc", "litigation", "legal")


def test_suppression_allow_removes_only_that_requests_keys(store_home: Home, engine_of: EngineOf) -> None:
    from erasure.sqlite import transaction

    store = create(store_home.store_dir)
    try:
        with transaction(store):
            suppression.record(store, "chat", "conv-1", "req-a")
            suppression.record(store, "email", "msg-2", "req-a")
            suppression.record(store, "chat", "conv-9", "req-other")
    finally:
        store.close()
    assert (
        consent.allow_reingest(engine_of(store_home), store_home, "req-a", "re-consent given", "dpo", "chat")["allowed"]
        == 1
    )
    assert consent.allow_reingest(engine_of(store_home), store_home, "req-a", "re-consent given", "dpo")["allowed"] == 1
    with pytest.raises(NotFound):
        consent.allow_reingest(engine_of(store_home), store_home, "req-a", "re-consent given", "dpo")
    store = create(store_home.store_dir)
    try:
        assert [(k.source, k.source_ref) for k in suppression.list_suppressed(store)] == [
            keyed.hashed_key(store, "chat", "conv-9")
        ]  # kept as keyed hashes
    finally:
        store.close()


def test_clock_operations_refusals_surface_as_errors(store_home: Home, engine_of: EngineOf) -> None:
    with pytest.raises(Conflict):
        clocks.clock_operation(engine_of(store_home), "resume", "req-a", "not paused")
    with pytest.raises(InputError, match="legal maximum"):
        clocks.clock_operation(
            engine_of(store_home), "extend", "req-a", "complex", until=datetime.now(UTC).date() + timedelta(days=400)
        )


def test_drain_inbox_vaults_deletes_and_rejects(home: Home, engine_of: EngineOf) -> None:
    inbox = home.inbox_dir
    good = envelope("req-in-1", "GDPR", 1, INBOX_SUBJECT).canonical_dict()
    (inbox / "a.json").write_text(json.dumps(good))
    (inbox / "b.json").write_text(json.dumps(good))  # identical: already present, still deleted
    (inbox / "c.json").write_text("{not json")
    (inbox / "d.json").write_text(json.dumps({**good, "reason": "x"}))  # same id, other body
    (inbox / ".partial.json").write_text("{")  # hidden: a file still being written
    (inbox / "notes.txt").write_text("ignored")
    res = intake.drain_inbox(engine_of(home), home)
    assert res.as_dict() == {
        "vaulted": ["req-in-1"],
        "already_present": ["req-in-1"],
        "rejected": 2,
        "purged": 0,
        "refused": 0,
    }
    assert sorted(p.name for p in inbox.iterdir() if p.is_file()) == [".intake.lock", ".partial.json", "notes.txt"]
    # rejected envelopes are sealed under random names (tests/service/test_inbox_hygiene.py)
    rejected = sorted(p.name for p in (inbox / "rejected").iterdir())
    assert len(rejected) == 4 and sum(n.endswith(".rejected") for n in rejected) == 2
    errors = [p.read_text() for p in (inbox / "rejected").glob("*.error.txt")]
    assert any("different body" in e for e in errors)
    assert intake.drain_inbox(engine_of(home), home).as_dict() == {
        "vaulted": [],
        "already_present": [],
        "rejected": 0,
        "purged": 0,
        "refused": 0,
    }
