"""Service mode on a real long-lived Prefect server, on SQLite and on PostgreSQL (issue 12, items 2-6).

Per backend, one module-scoped server started the way a user starts it (`erasure server start --workers 0
[--postgres]` in a fresh home, on a free port), and two workers started by hand, each in its own process:
`prefect worker start --pool erasure-local` from an unrelated folder, with no ERASURE_* variable and a
Prefect home of its own, so everything a run needs comes from the deployment (prefect.yaml's
`job_variables.env` and its `pull:` step). Then:
- every deployment runs through those workers;
- eight erasure requests submitted at once with `run_deployment` all complete, each erased once, the
  store's writers one at a time (the global concurrency limit), no "database is locked" anywhere;
- `erasure server status` shows the next run of sla-monitor and intake;
- `erasure request run` uses the home's server by itself; `server stop` stops everything it started.

The home lives in a folder of its own under /tmp (mode 0711), so the `postgres` user can reach its
cluster when the suite runs as root (pytest's own temp folders are closed to other users).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from erasure import request_records
from erasure.config import PROJECT_ROOT, Home
from erasure.engine import open_engine
from erasure.models import ErasureRequestEnvelope
from erasure.states import RequestState
from erasure.subject import Subject
from erasure.tiers import CASCADE_ORDER
from memory import holds
from memory.schema import create, open_store
from tests.flows.test_deployments import DEPLOYMENTS, vault
from tests.process_fixtures import clean_env, erasure, free_port, pause_the_hourly_window

pytestmark = pytest.mark.slow

QUEUED = [f"req-q-{i}" for i in range(8)]
START_TIMEOUT = 600
RUN_TIMEOUT = 900.0


def envelope(request_id: str, subject: Subject) -> ErasureRequestEnvelope:
    return ErasureRequestEnvelope.model_validate(
        {
            "request_id": request_id,
            "tenant_id": "default",
            "subject": subject.model_dump(exclude_none=True),
            "legal_basis": "GDPR",
            "received_at": (datetime.now(UTC) - timedelta(days=3)).isoformat(),
            "requester_identity_proof_ref": "idv/svc",
            "reason": "Art.17 request via the privacy portal",
        }
    )


@dataclass
class Service:
    backend: str
    root: Path
    home: Home
    api: str
    env: dict[str, str]
    subjects: list[Subject]
    workers: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)


def _own_groups(uid: int) -> list[int]:
    """The supplementary groups `uid` has by /etc/group (none of root's)."""
    pw = pwd.getpwuid(uid)
    return os.getgrouplist(pw.pw_name, pw.pw_gid)


def start_worker(root: Path, api: str, n: int, secret: str, owner: int) -> tuple[subprocess.Popen[bytes], Path]:
    """`prefect worker start --pool erasure-local`, by hand: its own process and session, an unrelated
    working folder, its own Prefect home, and no ERASURE_* variable; only the server's credential. As the
    home's `owner` (uid): root's `server start` gave the home to its service user, and runs are never root's."""
    cwd = root / f"elsewhere-{n}"
    cwd.mkdir(exist_ok=True)
    log = root / f"worker-{n}.log"
    (root / f"worker-{n}-prefect").mkdir(exist_ok=True)
    for d in (cwd, root / f"worker-{n}-prefect"):
        os.chown(d, owner, -1)
    drop = os.geteuid() == 0 and owner != 0
    env = clean_env(PREFECT_API_URL=api, PREFECT_HOME=str(root / f"worker-{n}-prefect"), PREFECT_API_AUTH_STRING=secret)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "prefect"), "worker", "start", "--pool", "erasure-local"],
            cwd=cwd,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            user=owner if drop else None,
            extra_groups=_own_groups(owner) if drop else None,  # as runuser gives them: the user's own
        )
    return proc, log


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to every worker's process group at once, SIGKILL to those still up 5 s later. Prefect's
    worker forwards SIGTERM to its process as SIGINT and then waits on its own loops for well over 30 s
    (measured: still up after 60 s); nothing of ours runs in it at teardown, so nothing is lost."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def service(request: pytest.FixtureRequest) -> Iterator[Service]:
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from cli.prefect_auth import home_secret
    from memory.demo import build_demo
    from proof.keys import generate_keypair

    backend = str(request.param)
    root = Path(tempfile.mkdtemp(prefix=f"erasure-svc-{backend[:2]}-", dir="/tmp"))
    root.chmod(0o711)
    h = Home.resolve(root / "home", root / "evidence").ensure()
    conn = create(h.store_dir)
    try:
        subjects = build_demo(conn, h.store_dir, frames=1200, subjects=12, seed=12).subjects
    finally:
        conn.close()
    generate_keypair("engine", h.keys_dir)
    for rid, subject in zip([*QUEUED, "req-dep-1", "req-clock-1", "req-hold-1"], subjects, strict=False):
        vault(h, envelope(rid, subject))
    (h.inbox_dir / "incoming-1.json").write_text(json.dumps(envelope("req-inbox-1", subjects[11]).canonical_dict()))
    env = clean_env(ERASURE_HOME=str(h.root), ERASURE_EVIDENCE=str(h.evidence_root))
    args = ["server", "start", "--port", str(free_port()), "--workers", "0", "--json"]
    res = erasure(env, *args, *(["--postgres"] if backend == "postgres" else []), timeout=START_TIMEOUT)
    if res.returncode != 0:
        erasure(env, "server", "stop")
        shutil.rmtree(root, ignore_errors=True)
        raise AssertionError(f"erasure server start failed:\n{res.stdout}\n{res.stderr}")
    api = json.loads(res.stdout)["api_url"]
    svc = Service(backend, root, h, api, env, subjects)
    try:
        svc.workers = [start_worker(root, api, n, home_secret(h), h.root.stat().st_uid) for n in (1, 2)]
        with temporary_settings({PREFECT_API_URL: api, PREFECT_API_AUTH_STRING: home_secret(h)}):
            pause_the_hourly_window()
            yield svc
    finally:
        stop_workers([proc for proc, _log in svc.workers])
        erasure(env, "server", "stop")
        shutil.rmtree(root, ignore_errors=True)


def trigger(name: str, **params: Any) -> Any:
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment

    # called from sync code: the run itself, not a coroutine; does not wait, does not raise
    return cast(FlowRun, run_deployment(f"{name}/{name}", parameters=params, timeout=0)).id


def wait_final(run_ids: dict[str, Any], timeout: float = RUN_TIMEOUT) -> dict[str, Any]:
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            runs = {k: client.read_flow_run(rid) for k, rid in run_ids.items()}
            if all(r.state is not None and r.state.is_final() for r in runs.values()):
                return runs
            if time.monotonic() > deadline:
                raise AssertionError({k: (r.state.type if r.state else None) for k, r in runs.items()})
            time.sleep(1.0)


def logs_of(run_ids: list[Any]) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    out: list[Any] = []
    with get_client(sync_client=True) as client:
        while True:
            page = client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=run_ids)), limit=200, offset=len(out)
            )
            out += page
            if len(page) < 200:
                return out


def request_state(h: Home, request_id: str) -> RequestState:
    engine = open_engine(h.engine_db)
    try:
        return request_records.get(engine, request_id).state
    finally:
        engine.close()


def test_the_deployments_carry_the_environment_and_the_working_directory(service: Service) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        deps = {d.name: d for d in client.read_deployments()}
    assert set(deps) == DEPLOYMENTS
    for name, d in deps.items():
        env = d.job_variables["env"]
        assert env["ERASURE_HOME"] == str(service.home.root), name
        assert env["ERASURE_EVIDENCE"] == str(service.home.evidence_root), name
        assert {
            "ERASURE_HOLIDAYS",
            "ERASURE_INTERNAL_BOUND_DAYS",
            "ERASURE_TARGET_DAYS_BEFORE",
            "ERASURE_LEGAL_TZ",
        } <= set(env), name
        assert not any("{{" in str(v) for v in env.values()), name
        assert d.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(PROJECT_ROOT)}}]


def test_hand_started_workers_run_every_deployment(service: Service) -> None:
    h = service.home
    first = wait_final(
        {
            "hold": trigger("hold-place", request_id="req-hold-1", reference="case-77", actor="legal"),
            "pause": trigger("request-pause", request_id="req-clock-1", reference="idv-12"),
            "erasure": trigger("erasure-request", request_id="req-dep-1"),
            "sla": trigger("sla-monitor"),
            "intake": trigger("intake"),
        }
    )
    second = wait_final(
        {
            "release": trigger("hold-release", request_id="req-hold-1", reference="case-77", actor="legal"),
            "resume": trigger("request-resume", request_id="req-clock-1", reference="idv-12"),
            "verify": trigger("verification", request_id="req-dep-1"),
        }
    )
    third = wait_final(
        {
            "extend": trigger("request-extend", request_id="req-clock-1", reference="ticket-9"),
            "reconsent": trigger("suppression-allow", request_id="req-dep-1", reference="consent-3", actor="dpo"),
        }
    )
    runs = {**first, **second, **third}
    assert {k: r.state.type.value for k, r in runs.items()} == dict.fromkeys(runs, "COMPLETED"), {
        k: r.state.message for k, r in runs.items()
    }
    assert {r.work_pool_name for r in runs.values()} == {"erasure-local"}
    # What each run did, read from the home the deployment named (the workers were never told it).
    assert request_state(h, "req-dep-1") is RequestState.awaiting_attestation
    assert (h.evidence_dir("req-dep-1") / "proof.tar.gz").exists()
    assert request_state(h, "req-inbox-1") is RequestState.submitted and not list(h.inbox_dir.glob("*.json"))
    engine = open_engine(h.engine_db)
    try:
        events = [
            r[0]
            for r in engine.execute(
                "SELECT event FROM engine_events WHERE request_id = ? ORDER BY seq", ("req-clock-1",)
            )
        ]
        clock = request_records.get(engine, "req-clock-1")
    finally:
        engine.close()
    assert {"request.paused", "request.resumed", "request.extended"} <= set(events), events
    assert clock.state is RequestState.submitted
    store = open_store(h.store_dir)
    try:
        held = holds.list_holds(store)
    finally:
        store.close()
    assert held and all(x.released_at is not None for x in held)
    assert (h.root / "metrics" / "erasure_sla.prom").exists()
    for proc, log in service.workers:
        assert proc.poll() is None, log.read_text()[-2000:]


def test_eight_requests_at_once_queue_on_the_store_and_all_complete(service: Service) -> None:
    h = service.home
    ids = {rid: trigger("erasure-request", request_id=rid) for rid in QUEUED}
    runs = wait_final(ids)
    assert {k: r.state.type.value for k, r in runs.items()} == dict.fromkeys(QUEUED, "COMPLETED"), {
        k: r.state.message for k, r in runs.items()
    }
    # They waited on each other: several were running at once, yet their store writers never overlapped.
    spans = sorted((r.start_time, r.end_time) for r in runs.values())
    assert any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1)), "the runs never overlapped"
    deadline = time.monotonic() + 120
    while True:  # a run's last log lines reach the server shortly after its final state
        logs = logs_of(list(ids.values()))
        slots: dict[Any, dict[str, datetime]] = {}
        for rec in logs:
            if "store writer slot" in rec.message:
                slots.setdefault(rec.flow_run_id, {})["acquired" if "acquired" in rec.message else "released"] = (
                    rec.timestamp
                )
        complete = len(slots) == 8 and all(set(s) == {"acquired", "released"} for s in slots.values())
        if complete or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert complete, slots
    held = sorted((s["acquired"], s["released"]) for s in slots.values())
    for (_a1, r1), (a2, _r2) in itertools.pairwise(held):
        assert a2 >= r1, "two requests wrote the store at the same time"
    text = "\n".join(rec.message for rec in logs) + "".join(log.read_text() for _p, log in service.workers)
    assert "database is locked" not in text
    # Each erased once, completely: one run per request, every step done, the subject's items found
    # by its own run (before > 0), none left after.
    engine = open_engine(h.engine_db)
    try:
        for rid in QUEUED:
            assert request_records.get(engine, rid).state is RequestState.awaiting_attestation, rid
            steps = {s.step: s for s in request_records.steps(engine, rid)}
            assert set(steps) == {t.value for t in CASCADE_ORDER}, rid
            assert steps["episodic"].before_count and steps["episodic"].after_count == 0, rid
    finally:
        engine.close()
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName, FlowRunFilter

    with get_client(sync_client=True) as client:
        limits = [x for x in client.read_global_concurrency_limits(limit=100) if x.name.startswith("erasure-store-")]
        all_runs = client.read_flow_runs(
            deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=["erasure-request"])),
            flow_run_filter=FlowRunFilter(),
        )
    assert [(x.limit, x.active, x.active_slots) for x in limits] == [(1, True, 0)]
    per_request = [r.parameters["request_id"] for r in all_runs if r.parameters["request_id"] in QUEUED]
    assert sorted(per_request) == sorted(QUEUED)


def test_status_shows_the_next_scheduled_runs(service: Service) -> None:
    deadline = time.monotonic() + 120
    while True:  # the server's scheduler creates the runs of a new deployment within seconds
        res = erasure(service.env, "server", "status", "--json")
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        nxt = {k: v["next_run"] for k, v in doc["scheduled"].items()}
        if all(nxt.values()) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert doc["running"] and doc["database"] == ("postgresql" if service.backend == "postgres" else "sqlite")
    assert set(nxt) == {"sla-monitor", "intake"} and all(nxt.values()), nxt
    when = {k: datetime.fromisoformat(v) for k, v in nxt.items()}
    assert when["sla-monitor"].minute == 0 and when["sla-monitor"] - datetime.now(UTC) <= timedelta(hours=1)
    # A worker takes a run up to PREFECT_WORKER_PREFETCH_SECONDS (10 s) before its time: the next one still
    # scheduled can then be one interval and those seconds away (seen: 10 min 4 s on a loaded machine).
    from prefect.settings import PREFECT_WORKER_PREFETCH_SECONDS

    prefetch = timedelta(seconds=PREFECT_WORKER_PREFETCH_SECONDS.value())
    assert when["intake"] - datetime.now(UTC) <= timedelta(minutes=10) + prefetch
    text = erasure(service.env, "server", "status")
    assert text.returncode == 0 and "next sla-monitor:" in text.stdout and "next intake:" in text.stdout


def test_request_run_uses_the_homes_server(service: Service) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.client.schemas.objects import State

    h = service.home
    vault(h, envelope("req-cli-1", Subject(id="subj-cli-unknown-1")))
    res = erasure(service.env, "request", "run", "req-cli-1", "--json", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    with get_client(sync_client=True) as client:
        found = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=["erasure-req-cli-1"])))
    # on this server, not a temporary one
    assert [cast("State[Any]", r.state).type.value for r in found] == ["COMPLETED"]


def test_serve_reuses_the_running_server_and_keeps_the_pool(service: Service) -> None:
    """`make serve` in the foreground beside `erasure server start`: it deploys and runs a worker on the
    running server, leaves the pool's settings alone (no --overwrite), and stops only its own worker."""
    import httpx

    from cli.prefect_auth import api_client, home_secret

    pool = "/work_pools/erasure-local"
    api = api_client(service.api, home_secret(service.home))
    api.patch(pool, json={"concurrency_limit": 7}).raise_for_status()
    out = service.root / "serve.out"
    with open(out, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.serve",
                "--home",
                str(service.home.root),
                "--port",
                str(free_port()),
                "--no-sla-now",
            ],
            cwd=PROJECT_ROOT,
            env=service.env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while "ready:" not in out.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.5)
        assert f"reusing the Prefect server at {service.api}" in out.read_text()
        assert api.get(pool).json()["concurrency_limit"] == 7
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        api.patch(pool, json={"concurrency_limit": None})
        api.close()
    assert proc.returncode == 0, out.read_text()
    assert httpx.get(f"{service.api}/health", timeout=10).json() is True  # the server it reused still runs
