"""Bytes, not only rows (invariant 4): after the cascade the subject's identifiers and content are in
none of the database file, its -wal or its -journal, in WAL and in rollback-journal (DELETE) mode;
before it they were there. Also when the agent left its own recent writes in the WAL, and when a
killed erase left a hot journal behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from erasure.config import Home
from erasure.sqlite import connect, journal_mode
from memory.ingest import ingest
from memory.schema import db_path
from tasks.runner import run_cascade
from tests.cascade_fixtures import (
    BYSTANDER,
    SUBJECT,
    SUBJECT_PHRASE,
    build_store,
    memory_items,
    set_journal_mode,
    store_bytes,
    submit,
)

REQUEST = "req-ann-1"
SUBJECT_TEXT = "Change my delivery address for the subscription"  # the subject's own words (email item)
NEEDLES = [*SUBJECT.identifiers(), SUBJECT_PHRASE, SUBJECT_TEXT]
ROOT = Path(__file__).resolve().parents[2]


def db_files(home: Home) -> dict[str, bytes]:
    """The database file and whichever of its -wal / -journal exist, by suffix."""
    db = db_path(home.store_dir)
    out = {}
    for suffix in ("", "-wal", "-journal"):
        path = db.with_name(db.name + suffix)
        if path.exists():
            out[suffix or "db"] = path.read_bytes()
    return out


def holding(data: bytes) -> list[str]:
    return [n for n in NEEDLES if n.encode() in data]


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_no_byte_of_the_subject_is_left_in_the_database_files(journal: str, home: Home, tmp_path: Path) -> None:
    build_store(home, tmp_path, journal=journal)
    set_journal_mode(home, journal)
    submit(home)
    conn = connect(db_path(home.store_dir))
    assert journal_mode(conn) == journal
    conn.close()
    before = db_files(home)
    assert holding(before["db"]) == NEEDLES
    run_cascade(REQUEST, home)
    after = db_files(home)
    assert "-journal" not in after  # a committed rollback journal is deleted; a WAL store has none
    for name, data in after.items():
        assert holding(data) == [], name
    assert holding(store_bytes(home)) == []  # nor any other file of the store (blobs, corpora, sessions)
    assert BYSTANDER.email is not None and BYSTANDER.email.encode() in after["db"]


def test_the_agents_own_uncheckpointed_writes_leave_the_wal(home: Home, tmp_path: Path) -> None:
    """The agent is running: its connection is open and its last writes (the subject's newest item)
    sit in the -wal, not yet checkpointed into the database file."""
    items = memory_items(tmp_path)
    build_store(home, tmp_path)
    submit(home)
    agent = connect(db_path(home.store_dir))
    agent.execute("PRAGMA wal_autocheckpoint=0")
    # a new item of the subject, written by the agent after the store was built
    newer = items[1].model_copy(update={"source_ref": "msg-2003"})
    ingest(agent, home.store_dir, [newer])
    wal = db_files(home)["-wal"]
    assert SUBJECT_TEXT.encode() in wal and SUBJECT.id.encode() in wal
    try:
        run_cascade(REQUEST, home)
        files = db_files(home)
        assert len(files.get("-wal", b"")) == 0  # truncated
        for name, data in files.items():
            assert holding(data) == [], name
    finally:
        agent.close()


def test_a_hot_journal_left_by_a_killed_erase_is_rolled_back_and_cleared(home: Home, tmp_path: Path) -> None:
    """Rollback-journal mode, kill -9 inside a batch transaction: the -journal keeps the original pages
    (the subject's data) until the next connection rolls it back; the rerun leaves nothing."""
    build_store(home, tmp_path, journal="delete")
    set_journal_mode(home, "delete")
    submit(home)
    env = {
        **os.environ,
        "ERASURE_HOME": str(home.root),
        "ERASURE_EVIDENCE": str(home.evidence_root),
        "ERASURE_CRASH_AT": "mid:episodic:0",
    }
    code = (
        "from erasure.config import Home; from tasks.runner import run_cascade; "
        f"run_cascade({REQUEST!r}, Home.resolve(), batch_size=4)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    hot = db_files(home)
    assert "-journal" in hot and holding(hot["-journal"]) != []
    run_cascade(REQUEST, home, batch_size=4)
    after = db_files(home)
    assert set(after) == {"db"}
    assert holding(after["db"]) == []
