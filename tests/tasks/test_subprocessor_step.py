"""Step 8 against real processor services on 127.0.0.1: receipts with ticket ids, an asynchronous job
polled to done, a flaky processor that succeeds after retries, and a processor that keeps failing:
an exception, never a success, finished by a rerun once the processor recovers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.models import StepStatus
from erasure.tiers import Tier
from memory import subprocessors as sp
from memory.schema import create
from memory.subprocessor_service import RunningService, start_service
from tasks.runner import StepIncomplete, run_cascade, run_step
from tests.cascade_fixtures import SUBJECT, build_store, submit

REQUEST = "req-ann-1"


def _records_left(home: Home) -> int:
    conn = create(home.store_dir)
    try:
        return int(
            cast(
                tuple[Any, ...],
                conn.execute(
                    "SELECT count(*) FROM subprocessor_records WHERE subject_id = ?", (SUBJECT.id,)
                ).fetchone(),
            )[0]
        )
    finally:
        conn.close()


def _engine_view(
    home: Home,
) -> tuple[list[request_records.ReceiptRow], list[request_records.ExceptionRow], dict[str, str]]:
    engine = open_engine(home.engine_db)
    try:
        return (
            request_records.receipts(engine, REQUEST),
            request_records.exceptions(engine, REQUEST),
            {s.step: s.status.value for s in request_records.steps(engine, REQUEST)},
        )
    finally:
        engine.close()


def _setup(home: Home, tmp_path: Path, svc: RunningService) -> None:
    build_store(home, tmp_path, processors=[svc])
    submit(home)
    assert _records_left(home) == 1
    assert sp.lookup_count(svc.url, SUBJECT.id) == 1  # ingest pushed the record to the processor


@pytest.fixture
def services(home: Home) -> Iterator[list[RunningService]]:
    started: list[RunningService] = []
    yield started
    for s in started:
        s.stop()


def _start(services: list[RunningService], home: Home, name: str, **mode: float | bool) -> RunningService:
    svc = start_service(name, home.services_dir, **mode)  # type: ignore[arg-type]
    services.append(svc)
    return svc


def test_synchronous_processor_receipt_with_ticket(home: Home, tmp_path: Path, services: list[RunningService]) -> None:
    svc = _start(services, home, "crm-sync")
    _setup(home, tmp_path, svc)
    run_cascade(REQUEST, home)
    receipts, exceptions, steps = _engine_view(home)
    assert [(r.processor, r.status) for r in receipts] == [("crm-sync", "done")]
    assert receipts[0].ticket_id is not None and receipts[0].ticket_id.startswith("del_")
    assert receipts[0].completed_at is not None and receipts[0].attempts == 1
    assert steps["subprocessors"] == "erased" and not [e for e in exceptions if e.tier == "subprocessors"]
    assert sp.lookup_count(svc.url, SUBJECT.id) == 0 and _records_left(home) == 0


def test_asynchronous_processor_is_polled_to_done(home: Home, tmp_path: Path, services: list[RunningService]) -> None:
    svc = _start(services, home, "llm-kb", async_delay=0.4)
    _setup(home, tmp_path, svc)
    run_cascade(REQUEST, home)
    receipts, _, steps = _engine_view(home)
    assert [(r.processor, r.status) for r in receipts] == [("llm-kb", "done")]
    assert receipts[0].ticket_id and receipts[0].completed_at is not None
    assert receipts[0].completed_at > receipts[0].requested_at
    assert steps["subprocessors"] == "erased"
    assert sp.lookup_count(svc.url, SUBJECT.id) == 0 and _records_left(home) == 0


def test_flaky_processor_succeeds_after_retries(home: Home, tmp_path: Path, services: list[RunningService]) -> None:
    svc = _start(services, home, "vector-saas", fail_every=2)
    _setup(home, tmp_path, svc)  # request 1: the ingest push; 2: the lookup (503), 3: its retry
    seen = svc.requests_seen
    assert seen % 2 == 1  # so the deletion call is an even-numbered request: it gets a 503 first
    run_cascade(REQUEST, home)
    receipts, _, steps = _engine_view(home)
    assert [(r.processor, r.status) for r in receipts] == [("vector-saas", "done")]
    assert receipts[0].attempts == 2 and svc.requests_seen - seen == 2
    assert steps["subprocessors"] == "erased"
    assert sp.lookup_count(svc.url, SUBJECT.id) == 0 and _records_left(home) == 0


def test_always_failing_processor_is_an_exception_and_a_rerun_completes_it(
    home: Home, tmp_path: Path, services: list[RunningService]
) -> None:
    svc = _start(services, home, "crm-sync", always_fail=True)
    _setup(home, tmp_path, svc)
    with pytest.raises(StepIncomplete):
        run_cascade(REQUEST, home)
    receipts, exceptions, steps = _engine_view(home)
    assert steps["subprocessors"] == StepStatus.failed.value
    assert "audit_log" not in steps  # the run stopped at the step that could not finish
    assert [(r.processor, r.status, r.ticket_id) for r in receipts] == [("crm-sync", "failed", None)]
    assert [(e.tier, e.kind, e.item_key, e.closed_at) for e in exceptions if e.tier == "subprocessors"] == [
        ("subprocessors", "subprocessor_not_confirmed", "crm-sync", None)
    ]
    assert _records_left(home) == 1 and sp.lookup_count(svc.url, SUBJECT.id) == 1
    with pytest.raises(StepIncomplete):  # a retry of the step alone fails the same way
        run_step(REQUEST, Tier.subprocessors, home)

    port = int(svc.url.rsplit(":", 1)[1])
    svc.stop()
    _start(services, home, "crm-sync", port=port)  # the processor recovers: same address, same data
    records = run_cascade(REQUEST, home)
    assert {r["step"]: r["status"] for r in records}["subprocessors"] == "erased"
    receipts, exceptions, steps = _engine_view(home)
    assert [(r.processor, r.status) for r in receipts] == [("crm-sync", "done")]
    assert receipts[0].ticket_id is not None and receipts[0].ticket_id.startswith("del_")
    assert len(steps) == 9 and steps["audit_log"] == "erased"
    sub = [e for e in exceptions if e.tier == "subprocessors"]
    assert len(sub) == 1 and sub[0].closed_at is not None  # kept as evidence, closed once confirmed
    assert _records_left(home) == 0 and sp.lookup_count(f"http://127.0.0.1:{port}", SUBJECT.id) == 0
