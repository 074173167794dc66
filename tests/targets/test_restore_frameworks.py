"""Issue 26 on the framework kinds, through the real CLI: a LangGraph memory (store backed up with SQLite's
online backup API, checkpoints with `VACUUM INTO`), a Chroma folder (a tar) and a mem0 memory (a copy of
its files), each built with the real framework, are backed up before three erasures and restored after
them. Each restored target is noticed (its epoch, kept inside its own SQLite database, is behind the
ledger's) and refused; `erasure restore replay --target NAME` re-applies the three erasures and ends all
clear, with nothing of the three subjects in any decoded view of any file (oracle), bystanders kept, and
replay packs that verify offline."""

from __future__ import annotations

import gc
import json
import shutil
from pathlib import Path

import pytest

from erasure.config import Home
from tests import chroma_fixtures, langgraph_sqlite_fixtures, mem0_fixtures, oracle
from tests.backup_fixtures import (
    folder_backup,
    request_file,
    restore_folder,
    sqlite_online_backup,
    tar_folder,
    untar_folder,
    vacuum_into,
    verify_offline,
)
from tests.cli_fixtures import erasure

LG, CH, M0 = langgraph_sqlite_fixtures, chroma_fixtures, mem0_fixtures
SUBJECTS = (LG.SUBJECT, CH.SUBJECT, M0.SUBJECT)
REQUESTS = ("req-fw-lg", "req-fw-ch", "req-fw-m0")
TARGETS = ("support-agent", "kb-vectors", "assistant-memory")


@pytest.fixture
def erased(home: Home, tmp_path: Path, prefect_harness: None) -> dict[str, Path]:
    """Three framework stores (no reference store), backed up, then three subjects erased all clear."""
    shutil.rmtree(home.store_dir)
    agents = tmp_path / "agents"
    lg = LG.build_memory(agents / "langgraph", copies=3, threads_per_person=1, mentions=False, case_variants=False)
    CH.build_memory(agents / "chroma", per_collection=200)
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    gc.collect()
    M0.build_memory(agents / "mem0")
    (home.root / "targets.toml").write_text(f'''
[[targets]]
name = "support-agent"
kind = "langgraph-sqlite"
store = "{lg.store_path}"
checkpoints = "{lg.checkpoints_path}"
namespace = ["users", "{{subject_id}}"]
thread_key = "user_id"

[[targets]]
name = "kb-vectors"
kind = "chroma"
path = "{agents}/chroma"
subject_key = "user_id"

[[targets]]
name = "assistant-memory"
kind = "mem0"
history_db = "{agents}/mem0/{M0.HISTORY_DB}"
qdrant_path = "{agents}/mem0/{M0.QDRANT_PATH}"
collection = "{M0.COLLECTION}"
''')
    b = tmp_path / "backups"
    sqlite_online_backup(lg.store_path, b / "lg" / "store.sqlite")
    vacuum_into(lg.checkpoints_path, b / "lg" / "checkpoints.sqlite")
    tar_folder(agents / "chroma", b / "chroma.tar")
    folder_backup(agents / "mem0", b / "mem0", databases=(M0.HISTORY_DB,))
    h = str(home.root)
    assert erasure("keys", "generate", "--role", "engine", "--home", h).code == 0
    for rid, who in zip(REQUESTS, SUBJECTS, strict=True):
        file = request_file(tmp_path / f"{rid}.json", rid, who)
        assert erasure("request", "submit", str(file), "--home", h).code == 0
        run = erasure("request", "run", rid, "--home", h, "--json")
        assert run.code == 0, run.out[-2000:] + run.err[-2000:]
    return {"agents": agents, "backups": b}


def _restore(agents: Path, b: Path) -> None:
    for name in ("store.sqlite", "checkpoints.sqlite"):
        for side in ("-wal", "-shm", "-journal"):
            (agents / "langgraph" / (name + side)).unlink(missing_ok=True)
        shutil.copyfile(b / "lg" / name, agents / "langgraph" / name)
    untar_folder(b / "chroma.tar", agents / "chroma")
    restore_folder(b / "mem0", agents / "mem0")


def test_framework_restores_are_refused_then_replayed_all_clear(
    home: Home, tmp_path: Path, erased: dict[str, Path]
) -> None:
    h, agents = str(home.root), erased["agents"]
    status = json.loads(erasure("restore", "status", "--home", h, "--json").out)["targets"]
    assert [(t["store_epoch"], t["ledger_epoch"], t["restored"]) for t in status] == [(3, 3, False)] * 3
    # What the erasures left: only Chroma's bystander item that names Ada (a mention, reported, not erased).
    left = {(x.file, x.kind, x.who) for x in oracle.scan_tree(agents, *SUBJECTS).hits}
    assert {(f.split("/")[0], k, w) for f, k, w in left} <= {("chroma", "name", CH.SUBJECT.id)}, left
    _restore(agents, erased["backups"])
    assert {(x.file, x.kind, x.who) for x in oracle.scan_tree(agents, *SUBJECTS).hits} - left  # brought back

    status = json.loads(erasure("restore", "status", "--home", h, "--json").out)["targets"]
    assert [(t["store_epoch"], t["restored"], t["pending"]) for t in status] == [(0, True, list(REQUESTS))] * 3
    assert (
        erasure(
            "request", "submit", str(request_file(tmp_path / "n.json", "req-fw-new", LG.BYSTANDERS[1])), "--home", h
        ).code
        == 0
    )
    refused = erasure("request", "run", "req-fw-new", "--home", h)
    assert refused.code == 6 and refused.err.count("\n") == 1 and "restored from a backup" in refused.err

    for target in TARGETS:
        replay = erasure("restore", "replay", "--target", target, "--home", h, "--json")
        assert replay.code == 0, target + replay.out[-3000:] + replay.err[-3000:]
        out = json.loads(replay.out)
        assert [r["original"] for r in out["replayed"]] == list(REQUESTS)
        assert {r["outcome"] for r in out["replayed"]} == {"all_clear"}
        assert out["restored"] is False
        for r in out["replayed"]:
            verified = verify_offline(r["pack"], home)
            assert verified.returncode == 0, verified.stdout + verified.stderr

    scan = oracle.scan_home(home.root, home.evidence_root, *SUBJECTS)
    assert scan.hits == [], scan.hits[:5]
    assert {(x.file, x.kind, x.who) for x in oracle.scan_tree(agents, *SUBJECTS).hits} <= left
    bystanders = [LG.BYSTANDERS[1], M0.BYSTANDERS[1]]
    assert all(oracle.scan_tree(agents, b).hits for b in bystanders)  # kept
    assert erasure("request", "run", "req-fw-new", "--home", h, "--json").code == 0  # no longer refused


def test_framework_replay_needs_only_the_ledger(home: Home, erased: dict[str, Path]) -> None:
    """The requests' vault rows are gone (their retention ended): replay finds each subject in the restored
    LangGraph, Chroma and mem0 stores by the ledger's keyed hashes of every item's identifiers (namespace
    labels, metadata values, payloads) and erases them with the same erasers, all clear; the oracle agrees."""
    from erasure.engine import open_engine

    h, agents = str(home.root), erased["agents"]
    left = {(x.file, x.kind, x.who) for x in oracle.scan_tree(agents, *SUBJECTS).hits}
    engine = open_engine(home.engine_db)
    try:
        for table in ("vault_store_ids", "vault"):
            engine.execute(f"DELETE FROM {table} WHERE request_id IN (?, ?, ?)", REQUESTS)
    finally:
        engine.close()
    _restore(agents, erased["backups"])
    assert {(x.file, x.kind, x.who) for x in oracle.scan_tree(agents, *SUBJECTS).hits} - left  # brought back
    for target in TARGETS:
        replay = erasure("restore", "replay", "--target", target, "--home", h, "--json")
        assert replay.code == 0, target + replay.out[-3000:] + replay.err[-3000:]
        out = json.loads(replay.out)
        assert [r["original"] for r in out["replayed"]] == list(REQUESTS)
        # Each store holds the subject of its own fixture only: found there by keyed hashes, erased all clear;
        # the other two subjects have no item in it (nothing found, nothing to erase).
        mine = REQUESTS[TARGETS.index(target)]
        assert {(r["original"], r["found_by"], r["outcome"]) for r in out["replayed"]} == {
            (rid, "store", "all_clear") if rid == mine else (rid, None, "nothing_found") for rid in REQUESTS
        }
        assert out["restored"] is False
    assert oracle.scan_home(home.root, home.evidence_root, *SUBJECTS).hits == []
    assert {(x.file, x.kind, x.who) for x in oracle.scan_tree(agents, *SUBJECTS).hits} <= left
    assert all(oracle.scan_tree(agents, b).hits for b in (LG.BYSTANDERS[1], M0.BYSTANDERS[1]))  # kept
