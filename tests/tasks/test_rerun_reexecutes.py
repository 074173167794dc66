"""A rerun re-executes every step (no Prefect cache can turn it into a no-op), and every error ends
in a recorded request state (hardening issue, items 11 and 12)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.states import RequestState
from erasure.subject import Subject
from memory.schema import create
from tests.cascade_fixtures import SUBJECT, build_store, submit


def _ready(home: Home, tmp_path: Path) -> None:
    from proof.keys import generate_keypair

    build_store(home, tmp_path)
    generate_keypair("engine", home.keys_dir)


def test_a_rerun_after_residue_erases_again(home: Home, tmp_path: Path, prefect_harness: None) -> None:
    from flows.erasure_request import erasure_request

    _ready(home, tmp_path)
    submit(home, "req-rerun-1")
    assert erasure_request("req-rerun-1", return_state=True).is_completed()
    # Something the cascade missed (a resolver bug, fixed since): a session row of the subject.
    conn = create(home.store_dir)
    conn.execute(
        "INSERT INTO working_sessions(session_id, subject_id, state, updated_at) VALUES (?, ?, ?, ?)",
        ("late-session", SUBJECT.id, "{}", datetime.now(UTC).isoformat()),
    )
    conn.close()
    engine = open_engine(home.engine_db)
    request_records.set_state(engine, "req-rerun-1", RequestState.exception, "residue found by a later check")
    engine.close()
    state = erasure_request("req-rerun-1", return_state=True)
    assert state.is_completed(), state.message
    conn = create(home.store_dir)
    left = cast(
        tuple[Any, ...],
        conn.execute("SELECT count(*) FROM working_sessions WHERE subject_id = ?", (SUBJECT.id,)).fetchone(),
    )[0]
    conn.close()
    assert left == 0


def test_a_short_numeric_subject_id_is_erased_and_the_request_never_sticks(
    home: Home, tmp_path: Path, prefect_harness: None
) -> None:
    from flows.erasure_request import erasure_request
    from memory.ingest import ingest
    from memory.items import MemoryItem

    _ready(home, tmp_path)
    short = Subject(id="48213")
    conn = create(home.store_dir)
    ingest(
        conn,
        home.store_dir,
        [
            MemoryItem.model_validate(
                {
                    "source": "chat",
                    "source_ref": "conv-9009",
                    "subject": short.model_dump(exclude_none=True),
                    "content": "Please cancel my parking permit renewal.",
                }
            )
        ],
    )
    conn.close()
    submit(home, "req-short-1", subject=short)
    state = erasure_request("req-short-1", return_state=True)
    engine = open_engine(home.engine_db)
    row = request_records.get(engine, "req-short-1")
    engine.close()
    assert row.state is not RequestState.running
    assert state.is_completed(), state.message
    ver = json.loads((home.evidence_dir("req-short-1") / "verification.json").read_text())
    assert ver["all_clear"] is True
    assert (home.evidence_dir("req-short-1") / "proof.tar.gz").exists()
