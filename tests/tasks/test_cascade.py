"""The cascade on real stores in temp dirs (no Prefect: the same step functions the flow's tasks run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from memory.schema import create
from tasks.runner import run_cascade
from tests.cascade_fixtures import BYSTANDER, SUBJECT, SUBJECT_PHRASE, build_store, owned_counts, store_bytes, submit
from tests.proof_fixtures import TIERS


@pytest.fixture
def built(home, tmp_path: Path):  # type: ignore[no-untyped-def]
    build_store(home, tmp_path)
    submit(home)
    return home


def test_every_tier_of_the_subject_is_erased_and_the_bystander_keeps_everything(built) -> None:  # type: ignore[no-untyped-def]
    before_subject = owned_counts(built, SUBJECT)
    before_bystander = owned_counts(built, BYSTANDER)
    assert before_subject["frames"] > 0 and before_subject["blobs"] > 0 and before_subject["ft_examples"] > 0
    records = run_cascade("req-ann-1", built)
    assert [r["step"] for r in records] == list(TIERS)
    assert all(r["after_count"] == 0 for r in records)
    assert {r["step"]: r["status"] for r in records}["fine_tune"] == "exception"  # a model was trained on it
    assert all(v == 0 for v in owned_counts(built, SUBJECT).values())
    assert owned_counts(built, BYSTANDER) == before_bystander


def test_bytes_of_the_subject_leave_every_file(built) -> None:  # type: ignore[no-untyped-def]
    assert SUBJECT.email is not None and BYSTANDER.email is not None
    data = store_bytes(built)
    assert SUBJECT.email.encode() in data and SUBJECT_PHRASE.encode() in data
    run_cascade("req-ann-1", built)
    data = store_bytes(built)
    for needle in [*SUBJECT.identifiers(), SUBJECT_PHRASE]:
        assert needle.encode() not in data, needle
    assert BYSTANDER.email.encode() in data


def test_derived_frames_that_reference_or_quote_the_subject_go_and_bystander_digests_stay(built) -> None:  # type: ignore[no-untyped-def]
    run_cascade("req-ann-1", built)
    conn = create(built.store_dir)
    derived = [r[0] for r in conn.execute("SELECT content FROM frames WHERE kind = 'derived'")]
    assert derived == ["Bystander-only digest: laptop refunds are slow."]
    assert cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM recall_cache").fetchone())[0] == 1


def test_shared_topic_entities_survive(built) -> None:  # type: ignore[no-untyped-def]
    run_cascade("req-ann-1", built)
    conn = create(built.store_dir)
    topics = {r[0] for r in conn.execute("SELECT name FROM kg_entities WHERE kind = 'topic'")}
    assert {"billing", "refund", "invoice", "subscription"} <= topics  # Bob discussed them too
    assert "delivery" not in topics  # only the subject did


def test_step_records_are_one_per_step_and_written_to_evidence(built) -> None:  # type: ignore[no-untyped-def]
    run_cascade("req-ann-1", built)
    run_cascade("req-ann-1", built)  # idempotent: a second run changes nothing
    engine = open_engine(built.engine_db)
    steps = request_records.steps(engine, "req-ann-1")
    assert len(steps) == 9
    lines = (built.evidence_dir("req-ann-1") / "steps.jsonl").read_text().splitlines()
    assert len(lines) == 9
    for needle in SUBJECT.identifiers():
        assert needle not in "".join(lines)


@pytest.mark.parametrize("left", ["torn", "earlier-format"])
def test_a_rerun_writes_audit_evidence_again_that_a_crash_tore_or_an_earlier_version_wrote(
    built: Home, left: str
) -> None:
    """The audit-log step was counted done while its evidence file existed at all: a write torn by a
    crash, or a file an earlier version wrote in a format it has since outgrown (v2 evidence of a heavy
    subject is past the verifier's size limit), then failed every pack of the request, rerun after rerun."""
    import json

    from proof import verify

    run_cascade("req-ann-1", built)
    path = built.evidence_dir("req-ann-1") / "audit-log-redaction.json"
    data = path.read_bytes()
    if left == "torn":
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_bytes(data.replace(b'"audit-log-redaction/v3"', b'"audit-log-redaction/v2"'))
    records = run_cascade("req-ann-1", built)
    assert {r["step"]: r["after_count"] for r in records}["audit_log"] == 0
    doc = json.loads(path.read_bytes())
    assert doc["format"] == "audit-log-redaction/v3"
    assert verify.check_audit_log(path.read_bytes()).redaction_request == "req-ann-1"
