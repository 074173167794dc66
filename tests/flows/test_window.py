"""Erasure windows (`erasure-window`): several requests erased as one window on a real store through the
real flow: every subject gone to the byte, the people outside the window untouched, a held request
skipped and reported, one request's failure leaving the others' results, a Prefect task count that
does not grow with the requests, and every pack verifying offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.subject import Subject
from erasure.tiers import CASCADE_ORDER
from flows.ended import state_data
from memory import holds
from memory.schema import create
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store, owned_counts, submit
from tests.redteam.test_no_false_all_clear import add_items, bystander_state, home_hits

CARL = Subject(id="cust-carl-5521", email="carl.weiss@example.com", name="Carl Weiss", phone="+49 30 1234 5678")
DANA = Subject(id="cust-dana-8810", email="dana.okoro@example.com", name="Dana Okoro")


@pytest.fixture
def store(home: Home, tmp_path: Path, prefect_harness: None) -> Home:
    from proof.keys import generate_keypair

    build_store(home, tmp_path)  # Ann (SUBJECT) and Bob (BYSTANDER), derived frames quoting both
    add_items(
        home,
        [
            {
                "source": "chat",
                "source_ref": "conv-7001",
                "subject": CARL.model_dump(),
                "content": f"Carl here: my parcel to Leipzig is late, and {SUBJECT.name} from the other team "
                "said hers was too.",
                "training": True,
            },
            {
                "source": "chat",
                "source_ref": "conv-7002",
                "subject": DANA.model_dump(),
                "content": f"Dana writing: {BYSTANDER.name} and I split the invoice for the shared printer.",
                "training": True,
            },
            {
                "source": "email",
                "source_ref": "msg-7003",
                "subject": DANA.model_dump(),
                "content": "Please update the billing contact on my account to the finance team.",
                "training": False,
            },
        ],
    )
    generate_keypair("engine", home.keys_dir)
    return home


def window(ids: list[str] | None) -> tuple[Any, dict[str, dict[str, Any]]]:
    from flows.window import erasure_window

    state = erasure_window(ids, return_state=True)
    data = cast(dict[str, Any], state_data(state))
    return state, data["requests"]


def request_state(home: Home, rid: str) -> str:
    engine = open_engine(home.engine_db)
    try:
        return request_records.get(engine, rid).state.value
    finally:
        engine.close()


def verify_offline(home: Home, rid: str) -> None:
    from proof.verify import verify_pack

    verify_pack(
        home.evidence_dir(rid) / "proof.tar.gz",
        (home.keys_dir / "engine.pub.pem").read_bytes(),
        None,
        require_dpo=False,
    )


def corpus_versions(home: Home) -> int:
    conn = create(home.store_dir)
    try:
        return int(cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM ft_corpora").fetchone())[0])
    finally:
        conn.close()


def fine_tune_record(home: Home, rid: str) -> Any:
    engine = open_engine(home.engine_db)
    try:
        return next(s for s in request_records.steps(engine, rid) if s.step == "fine_tune")
    finally:
        engine.close()


def task_names(flow_run_id: Any) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return sorted(r.name for r in runs)


def test_a_window_erases_every_subject_to_the_byte_and_no_one_else(
    store: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasks import mentions

    whole_reads: list[str] = []
    read = mentions.MentionIndex._read

    def counted(index: mentions.MentionIndex, conn: Any, table: str, after: int) -> tuple[int, list[set[int]]]:
        if after == mentions._MIN_ROWID:
            whole_reads.append(table)
        return read(index, conn, table, after)

    monkeypatch.setattr(mentions.MentionIndex, "_read", counted)
    for subject in (SUBJECT, BYSTANDER, CARL):
        assert home_hits(store, subject)  # the check can fail: each one is there
    dana_before = bystander_state(store, DANA.id)
    versions_before = corpus_versions(store)
    for rid, subject in (("req-w-1", SUBJECT), ("req-w-2", BYSTANDER), ("req-w-3", CARL)):
        submit(store, rid, subject)
    state, report = window(None)  # every submitted request
    assert state.is_completed(), state.message
    assert {r: v["outcome"] for r, v in report.items()} == dict.fromkeys(["req-w-1", "req-w-2", "req-w-3"], "all_clear")
    for rid, subject in (("req-w-1", SUBJECT), ("req-w-2", BYSTANDER), ("req-w-3", CARL)):
        assert home_hits(store, subject) == {}, rid
        assert set(owned_counts(store, subject).values()) == {0}, rid
        assert request_state(store, rid) == "awaiting attestation"
        ver = json.loads((store.evidence_dir(rid) / "verification.json").read_text())
        assert ver["all_clear"] is True and not ver["lost_bystander_tiers"]
        verify_offline(store, rid)
    # One corpus rewrite for the window (not one per request), and each request's fine-tune record still
    # counts the examples it had.
    assert corpus_versions(store) == versions_before + 1
    for rid in ("req-w-1", "req-w-2", "req-w-3"):
        assert fine_tune_record(store, rid).before_count, rid
    # Dana is outside the window: her items stay (her frame that named Bob has Bob's name redacted).
    assert bystander_state(store, DANA.id) == dana_before
    # The store's texts (and personal entities, for attribution) were read for mentions once for the
    # whole window, not per request and step.
    assert sorted(whole_reads) == ["frames", "kg_entities", "raw_archive", "working_sessions"]
    # One task per step for the whole window, not one per request and step (and one for the processors'
    # calls, one for the verification's reading of the store under its lock).
    names = task_names(state.state_details.flow_run_id)
    assert len(names) == 8 + len(CASCADE_ORDER), names
    assert sum(n.startswith("step-") for n in names) == len(CASCADE_ORDER)


def test_a_held_request_is_skipped_and_reported_and_the_others_run(store: Home) -> None:
    conn = create(store.store_dir)
    try:
        holds.place(conn, BYSTANDER.id, "litigation (case 2026-114)", "legal-team")
    finally:
        conn.close()
    bob_before = owned_counts(store, BYSTANDER)
    submit(store, "req-h-1", SUBJECT)
    submit(store, "req-h-2", BYSTANDER)
    state, report = window(["req-h-2", "req-h-1"])
    assert state.is_completed(), state.message  # a held request is reported, not a failure
    assert report["req-h-2"]["outcome"] == "held" and "hold" in report["req-h-2"]["detail"]
    assert report["req-h-1"]["outcome"] == "all_clear"
    assert request_state(store, "req-h-2") == "blocked"
    assert owned_counts(store, BYSTANDER) == bob_before
    assert home_hits(store, SUBJECT) == {}
    verify_offline(store, "req-h-1")


def test_one_request_that_fails_leaves_the_others_results(store: Home) -> None:
    conn = create(store.store_dir)
    try:
        key = str(
            cast(
                tuple[Any, ...],
                conn.execute("SELECT blob_key FROM blobs WHERE subject_id = ?", (SUBJECT.id,)).fetchone(),
            )[0]
        )
    finally:
        conn.close()
    blob = next(store.store_dir.rglob(key))
    blob.unlink()
    blob.mkdir()  # the upload's file can no longer be removed (a directory stands where it was)
    submit(store, "req-f-1", SUBJECT)
    submit(store, "req-f-2", BYSTANDER)
    state, report = window(["req-f-1", "req-f-2"])
    assert state.is_failed()
    assert report["req-f-1"]["outcome"] == "failed" and "uploads" in report["req-f-1"]["detail"]
    assert request_state(store, "req-f-1") == "exception"
    assert report["req-f-2"]["outcome"] == "all_clear"
    assert home_hits(store, BYSTANDER) == {}
    verify_offline(store, "req-f-2")
    assert not (store.evidence_dir("req-f-1") / "proof.tar.gz").exists()


def test_window_ids_are_tokens_and_an_empty_window_runs_nothing(store: Home) -> None:
    from flows.window import erasure_window

    state, report = window(None)
    assert state.is_completed() and report == {}
    # Not a token (an identifier would reach Prefect's storage as a parameter before any refusal).
    refused = erasure_window(["not a request id!"], return_state=True)
    assert refused.is_failed()


def test_a_window_killed_mid_step_finishes_on_the_next_window(store: Home) -> None:
    """kill -9 inside the first batch transaction of the episodic step: the requests stay `running`;
    the next `--all` window takes them up again and ends all clear, nothing of them left.

    The killed process runs the window's body (`flows.window._window`, the tasks on the test server)
    without the flow's store slot: a slot a killed run held is freed by the Prefect server's lease
    reaper, which a full server runs (`erasure server start`) and the test server does not."""
    import os
    import subprocess
    import sys

    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL

    submit(store, "req-k-1", SUBJECT)
    submit(store, "req-k-2", BYSTANDER)
    env = {
        **os.environ,
        "ERASURE_CRASH_AT": "mid:episodic:0",
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "PREFECT_API_AUTH_STRING": str(PREFECT_API_AUTH_STRING.value()),  # the harness requires it
        "ERASURE_HOME": str(store.root),
        "ERASURE_EVIDENCE": str(store.evidence_root),
    }
    died = subprocess.run(
        [sys.executable, "-c", "from flows.window import _window; _window(['req-k-1', 'req-k-2'])"],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert died.returncode == -9, died.stderr[-2000:]
    assert {request_state(store, r) for r in ("req-k-1", "req-k-2")} == {"running"}
    assert home_hits(store, SUBJECT)  # the kill came before the subject's frames were gone
    state, report = window(None)
    assert state.is_completed(), state.message
    assert {r: v["outcome"] for r, v in report.items()} == {"req-k-1": "all_clear", "req-k-2": "all_clear"}
    for rid, subject in (("req-k-1", SUBJECT), ("req-k-2", BYSTANDER)):
        assert home_hits(store, subject) == {}
        verify_offline(store, rid)
