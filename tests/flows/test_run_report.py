"""What an erasure-request run publishes for the team (service-mode issue, item 7), on the session's
Prefect test server: the tier table and the summary artifacts under the request id, and the events an
automation notifies the DPO on. Nothing in them names the subject."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flows.run_report import EVENT_AWAITING, EVENT_BLOCKED, EVENT_COMPLETED, artifact_key, summary_key
from tests.cascade_fixtures import SUBJECT, SUBJECT_PHRASE, build_store, submit
from tests.proof_fixtures import TIERS


@pytest.fixture
def ready(home, tmp_path: Path, prefect_harness):  # type: ignore[no-untyped-def]
    from proof.keys import generate_keypair

    build_store(home, tmp_path)
    submit(home)
    generate_keypair("engine", home.keys_dir)
    return home


def artifacts(key: str, flow_run_id: Any) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[key]), flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])
            )
        )


def events_of(resource: str, names: set[str], since: datetime, timeout: float = 60.0) -> list[Any]:
    """The events named `names` on `resource` since `since` (the session's server keeps other tests'
    events of the same request id; events reach it asynchronously: wait for them)."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventOccurredFilter, EventResourceFilter

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            page = client.read_events(
                filter=EventFilter(
                    event=EventNameFilter(name=sorted(names)),
                    # pydantic validates a datetime into prefect's DateTime
                    occurred=EventOccurredFilter(since=since),  # type: ignore[arg-type]
                    resource=EventResourceFilter(id=[resource]),
                ),
                limit=50,
            )
            got = [e for e in page.events if e.event in names]
            if {e.event for e in got} >= names or time.monotonic() > deadline:
                return got
            time.sleep(0.5)


def test_artifact_keys_are_the_request_id_and_fit_prefects_rule() -> None:
    assert artifact_key("req-ann-1") == "erasure-run-req-ann-1"
    assert summary_key("req-ann-1") == "erasure-run-req-ann-1-summary"
    odd = artifact_key("REQ_2026.01")
    assert odd.startswith("erasure-run-req-2026-01-") and odd != artifact_key("req-2026-01")
    assert all(c.islower() or c.isdigit() or c == "-" for c in odd)


def test_a_finished_run_publishes_its_tier_table_summary_and_events(ready) -> None:  # type: ignore[no-untyped-def]
    from flows.erasure_request import erasure_request

    since = datetime.now(UTC)
    state = erasure_request("req-ann-1", return_state=True)
    assert state.is_completed(), state.message
    run_id = state.state_details.flow_run_id
    (table,) = artifacts("erasure-run-req-ann-1", run_id)
    rows = json.loads(table.data)
    by_tier = {r["tier"]: r for r in rows}
    assert list(by_tier)[:9] == list(TIERS)
    assert by_tier["episodic"]["before"] > 0 and by_tier["episodic"]["after"] == 0
    assert all(r["residue"] == 0 for r in rows), rows  # all clear: the probes found nothing anywhere
    assert by_tier["bytes (every file)"]["status"] == "scanned"
    (summary,) = artifacts("erasure-run-req-ann-1-summary", run_id)
    md = str(summary.data)
    pack = ready.evidence_dir("req-ann-1") / "proof.tar.gz"
    import hashlib

    assert "**all clear**" in md and "awaiting attestation" in md
    assert str(pack) in md and hashlib.sha256(pack.read_bytes()).hexdigest() in md
    assert f"{pack.stat().st_size:,} bytes" in md
    assert "erasure attest req-ann-1 --dpo-key" in md
    got = events_of("erasure.request.req-ann-1", {EVENT_COMPLETED, EVENT_AWAITING}, since)
    assert {e.event for e in got} == {EVENT_COMPLETED, EVENT_AWAITING}
    awaiting = next(e for e in got if e.event == EVENT_AWAITING)
    assert awaiting.payload["all_clear"] is True and awaiting.payload["request_state"] == "awaiting attestation"
    published = table.model_dump_json() + summary.model_dump_json() + "".join(e.model_dump_json() for e in got)
    for needle in [*SUBJECT.identifiers(), SUBJECT_PHRASE]:
        assert needle not in published, "an identifier reached an artifact or an event"


def test_a_blocked_run_says_nothing_was_erased_and_emits_blocked(ready) -> None:  # type: ignore[no-untyped-def]
    from flows.erasure_request import erasure_request
    from memory import holds
    from memory.schema import open_store

    store = open_store(ready.store_dir)
    holds.place(store, SUBJECT.id, "litigation: case 2026-201", "legal-team")
    store.close()
    since = datetime.now(UTC)
    state = erasure_request("req-ann-1", return_state=True)
    assert state.name == "Blocked"
    (summary,) = artifacts("erasure-run-req-ann-1-summary", state.state_details.flow_run_id)
    assert "blocked" in str(summary.data) and "Nothing was erased" in str(summary.data)
    (table,) = artifacts("erasure-run-req-ann-1", state.state_details.flow_run_id)
    assert {r["status"] for r in json.loads(table.data)} == {"not run"}
    got = events_of("erasure.request.req-ann-1", {EVENT_BLOCKED}, since)
    assert [e.event for e in got] == [EVENT_BLOCKED]
