"""Sticky erasure: the erased subject's `(source, source_ref)` keys are recorded in the same transaction
as the deletes; re-ingesting the same items is skipped and counted; re-consent (`allow`, audited)
re-opens one key; an erase that rolls back leaves no suppression row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from erasure.config import Home
from memory import keyed, suppression
from memory.ingest import IngestReport, ingest
from memory.schema import create
from tasks import runner
from tasks.runner import run_cascade
from tests.cascade_fixtures import (
    BYSTANDER,
    SUBJECT,
    SUBJECT_PHRASE,
    build_store,
    memory_items,
    owned_counts,
    store_bytes,
    submit,
)

REQUEST = "req-ann-1"
SUBJECT_KEYS = [("chat", "conv-1001"), ("email", "msg-2002")]
BYSTANDER_KEYS = [("chat", "conv-3003"), ("chat", "conv-4004")]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def built(home: Home, tmp_path: Path) -> Home:
    build_store(home, tmp_path)
    submit(home)
    return home


def _suppressed(home: Home) -> list[tuple[str, str, str | None]]:
    """The list's keys in plaintext: each row's keyed hashes matched against the known keys (a key that
    matches none stays a hash)."""
    conn = create(home.store_dir)
    try:
        known = {keyed.hashed_key(conn, s, r): (s, r) for s, r in [*SUBJECT_KEYS, *BYSTANDER_KEYS]}
        return [
            (*known.get((k.source, k.source_ref), (k.source, k.source_ref)), k.request_ref)
            for k in suppression.list_suppressed(conn)
        ]
    finally:
        conn.close()


def test_reingest_after_erasure_is_skipped_and_counted(built: Home, tmp_path: Path) -> None:
    bystander = owned_counts(built, BYSTANDER)
    run_cascade(REQUEST, built)
    assert sorted(_suppressed(built)) == [(s, r, REQUEST) for s, r in SUBJECT_KEYS]  # the bystander's are not

    conn = create(built.store_dir)
    report = ingest(conn, built.store_dir, memory_items(tmp_path / "again"))
    conn.close()
    assert report.skipped_suppressed == 2 and report.ingested == 0
    assert report.skipped_duplicate == 2  # the bystander's items are simply already there
    assert owned_counts(built, SUBJECT) == dict.fromkeys(owned_counts(built, SUBJECT), 0)
    assert owned_counts(built, BYSTANDER) == bystander
    data = store_bytes(built)
    for needle in [*SUBJECT.identifiers(), SUBJECT_PHRASE]:
        assert needle.encode() not in data


def _reconsent_and_reingest(built: Home, tmp_path: Path) -> tuple[IngestReport, int]:
    run_cascade(REQUEST, built)
    conn = create(built.store_dir)
    try:
        assert suppression.allow(conn, "chat", "conv-1001", "subject re-consented in writing", "dpo@example.com")
        assert not suppression.allow(conn, "chat", "conv-1001", "again", "dpo@example.com")  # not listed now
        audited = int(
            cast(
                tuple[Any, ...],
                conn.execute("SELECT count(*) FROM audit_log WHERE event = 'suppression.allow'").fetchone(),
            )[0]
        )
        # the key alone is not enough since sticky erasure by identity: the subject's id is erased too
        assert ingest(conn, built.store_dir, memory_items(tmp_path / "held")[:1]).held_erased_identity == 1
        assert suppression.allow_identity(conn, SUBJECT, "subject re-consented in writing", "dpo@example.com")
        return ingest(conn, built.store_dir, memory_items(tmp_path / "again")[:2]), audited
    finally:
        conn.close()


def test_reconsent_is_audited_and_opens_only_its_own_key(built: Home, tmp_path: Path) -> None:
    report, audited = _reconsent_and_reingest(built, tmp_path)
    assert audited == 1
    assert report.skipped_suppressed == 1  # msg-2002 stays erased
    assert _suppressed(built) == [("email", "msg-2002", REQUEST)]


def test_reconsent_lets_the_item_be_imported_again(built: Home, tmp_path: Path) -> None:
    report, _ = _reconsent_and_reingest(built, tmp_path)
    assert report.ingested == 1
    counts = owned_counts(built, SUBJECT)
    assert counts["frames"] == 1 and counts["raw_archive"] == 1 and counts["blobs"] == 1


def test_an_erase_that_rolls_back_in_process_leaves_no_suppression_row(
    built: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(point: str) -> None:
        if point == "mid:working:0":  # inside the first batch's transaction, after its suppression rows
            raise RuntimeError("injected failure")

    monkeypatch.setattr(runner, "maybe_crash", fail)
    sessions = owned_counts(built, SUBJECT)["working_sessions"]
    with pytest.raises(RuntimeError, match="injected"):
        run_cascade(REQUEST, built, batch_size=1)
    assert _suppressed(built) == []
    assert owned_counts(built, SUBJECT)["working_sessions"] == sessions > 0  # the delete rolled back too


def test_an_erase_killed_inside_its_transaction_leaves_no_suppression_row(built: Home) -> None:
    env = {
        **os.environ,
        "ERASURE_HOME": str(built.root),
        "ERASURE_EVIDENCE": str(built.evidence_root),
        "ERASURE_CRASH_AT": "mid:working:0",
    }
    code = (
        "from erasure.config import Home; from tasks.runner import run_cascade; "
        f"run_cascade({REQUEST!r}, Home.resolve(), batch_size=1)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert _suppressed(built) == []
    assert owned_counts(built, SUBJECT)["working_sessions"] > 0
