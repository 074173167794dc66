"""Paths that come from a Chroma store's rows (issue 23, item 4): a `segments` row whose id is
`../teamB/<uuid>` must not make the eraser read or rewrite another team's index beside the store.

Two real chromadb `PersistentClient` stores side by side (`agents/teamA`, `agents/teamB`), each one
collection whose HNSW index is on disk (a small `sync_threshold`). Team A's vector segment row is
tampered to name team B's segment folder through `..`, and an unknown `migrations` row makes the eraser
skip chromadb's own delete (its migrations no longer match the installed chromadb's), as in the issue.
The erasure is the real `erasure request run` (in this process, on the session's Prefect test server)
with team A as the one target: team B's files must keep every byte, and the run must not end all
clear: it fails with one error line naming the row's kind, never its value."""

from __future__ import annotations

import gc
import hashlib
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from erasure.config import Home
from erasure.subject import Subject
from tests.chroma_fixtures import SUBJECT_KEY, hash_embedding, opened
from tests.cli_fixtures import erasure

pytest.importorskip("chromadb")

SUBJECT = Subject(id="user-ada-0001", email="ada.lovelace@example.org", name="Ada Lovelace")
TEAM_B = [f"user-teamb-{i:04d}" for i in range(6)]
RECORDS = 60


def _build(path: Path, owners: list[str]) -> None:
    """One collection `notes` of RECORDS records round robin over `owners`, persisted to its HNSW
    files (sync threshold 20)."""
    with opened(path) as client:
        col = client.get_or_create_collection(
            "notes",
            embedding_function=hash_embedding(),
            configuration={"hnsw": {"space": "l2", "sync_threshold": 20, "batch_size": 20}},
        )
        for s in range(0, RECORDS, 20):
            part = range(s, s + 20)
            col.add(
                ids=[f"r{i}" for i in part],
                documents=[f"{owners[i % len(owners)]} wrote note {i} about kilns" for i in part],
                metadatas=[{SUBJECT_KEY: owners[i % len(owners)], "n": i} for i in part],
            )


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _vector_segment(root: Path) -> str:
    db = sqlite3.connect(root / "chroma.sqlite3")
    try:
        (sid,) = db.execute("SELECT id FROM segments WHERE scope = 'VECTOR'").fetchone()
    finally:
        db.close()
    return str(sid)


def segment_id_climbing_into_team_b(team_a: Path, team_b: Path) -> None:
    """Team A's vector segment row names team B's segment folder through `..`; an unknown migration
    row keeps chromadb's own delete out of the way."""
    target = f"../{team_b.name}/{_vector_segment(team_b)}"
    db = sqlite3.connect(team_a / "chroma.sqlite3")
    try:
        with db:
            db.execute("UPDATE segments SET id = ? WHERE scope = 'VECTOR'", (target,))
            cols = [r[1] for r in db.execute("PRAGMA table_info(migrations)")]
            row = {
                "dir": "sysdb",
                "version": 999,
                "filename": "00999-unknown.sqlite.sql",
                "sql": "SELECT 1",
                "hash": "0" * 32,
            }
            db.execute(
                f"INSERT INTO migrations({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [row.get(c, "x") for c in cols],
            )
    finally:
        db.close()


@pytest.fixture
def two_teams(home: Home, tmp_path: Path, prefect_harness: None) -> tuple[Path, Path]:
    from chromadb.api.shared_system_client import SharedSystemClient

    from proof.keys import generate_keypair

    agents = tmp_path / "agents"
    team_a, team_b = agents / "teamA", agents / "teamB"
    _build(team_a, [SUBJECT.id, "user-bob-0002", "user-cyd-0003"])
    _build(team_b, TEAM_B)
    SharedSystemClient.clear_system_cache()  # the builder (the agent) is done with both stores
    gc.collect()
    assert (team_b / _vector_segment(team_b) / "data_level0.bin").stat().st_size > 0
    (home.root / "targets.toml").write_text(
        f'[[targets]]\nname = "team-a-vectors"\nkind = "chroma"\npath = "{team_a}"\nsubject_key = "{SUBJECT_KEY}"\n'
    )
    generate_keypair("engine", home.keys_dir)
    envelope = {
        "request_id": "req-chroma-0001",
        "tenant_id": "default",
        "subject": SUBJECT.model_dump(exclude_none=True),
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/chroma",
        "reason": "Art.17 request",
    }
    req = tmp_path / "request.json"
    req.write_text(json.dumps(envelope))
    assert erasure("request", "submit", str(req), "--home", str(home.root)).code == 0
    return team_a, team_b


def test_a_crafted_chroma_store_leaves_another_teams_index_alone(home: Home, two_teams: tuple[Path, Path]) -> None:
    team_a, team_b = two_teams
    segment_id_climbing_into_team_b(team_a, team_b)
    before = _files(team_b)

    res = erasure("request", "run", "req-chroma-0001", "--home", str(home.root), "--json")

    assert _files(team_b) == before, "another team's index was changed"
    with opened(team_b) as client:
        assert client.get_collection("notes", embedding_function=hash_embedding()).count() == RECORDS
    assert res.code != 0, "the run ended all clear: " + res.out[-2000:]
    last = res.err.strip().splitlines()[-1]
    assert last.startswith("error: ") and "chroma segment id" in last and "outside" in last, res.err[-3000:]
    assert "teamB" not in res.err + res.out
    ver = home.evidence_dir("req-chroma-0001") / "verification.json"
    assert not ver.exists() or json.loads(ver.read_text())["all_clear"] is not True
