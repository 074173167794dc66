"""Issue 26, `mode = "rewrite"`: backups of a LangGraph store (SQLite's online backup API and `VACUUM INTO`)
and a tar of a Chroma folder, taken before two erasures, are erased inside by `erasure backups rewrite`:
each is restored beside itself, the erasures it predates are re-applied with the same cascade and probes,
and the erased copy replaces it atomically with its original backup time. The oracle finds nothing of the
subjects in the rewritten backups' files, bystanders stay, the held-in-backup exceptions end as
`rewritten`, and the signed follow-up statement verifies with the pack."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import time
from pathlib import Path

import pytest

from erasure.config import Home
from tests import chroma_fixtures, langgraph_sqlite_fixtures, oracle
from tests.backup_fixtures import request_file, sqlite_online_backup, tar_folder, vacuum_into, verify_offline
from tests.cli_fixtures import erasure

LG, CH = langgraph_sqlite_fixtures, chroma_fixtures
REQUESTS = ("req-rw-lg", "req-rw-ch")


@pytest.fixture
def rewritable(home: Home, tmp_path: Path, prefect_harness: None) -> dict[str, Path]:
    """A LangGraph and a Chroma memory with rewrite-mode backups taken two days ago; two subjects erased."""
    import gc

    shutil.rmtree(home.store_dir)
    agents, b = tmp_path / "agents", tmp_path / "backups"
    lg = LG.build_memory(agents / "langgraph", copies=3, threads_per_person=1, mentions=False, case_variants=False)
    CH.build_memory(agents / "chroma", per_collection=200)
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    gc.collect()
    sqlite_online_backup(lg.store_path, b / "lg" / "store-online.sqlite")
    vacuum_into(lg.store_path, b / "lg" / "store-vacuum.sqlite")
    tar_folder(agents / "chroma", b / "chroma" / "chroma.tar")
    taken = time.time() - 2 * 86400
    for p in (*(b / "lg").iterdir(), b / "chroma" / "chroma.tar"):
        os.utime(p, (taken, taken))
    (home.root / "targets.toml").write_text(f'''
[[targets]]
name = "support-agent"
kind = "langgraph-sqlite"
store = "{lg.store_path}"
checkpoints = "{lg.checkpoints_path}"
namespace = ["users", "{{subject_id}}"]
thread_key = "user_id"

[[targets.backups]]
folder = "{b}/lg"
pattern = "*.sqlite"
mode = "rewrite"
option = "store"
retention_days = 30

[[targets]]
name = "kb-vectors"
kind = "chroma"
path = "{agents}/chroma"
subject_key = "user_id"

[[targets.backups]]
folder = "{b}/chroma"
pattern = "*.tar"
mode = "rewrite"
retention_days = 30
''')
    h = str(home.root)
    assert erasure("keys", "generate", "--role", "engine", "--home", h).code == 0
    for rid, who in zip(REQUESTS, (LG.SUBJECT, CH.SUBJECT), strict=True):
        file = request_file(tmp_path / f"{rid}.json", rid, who)
        assert erasure("request", "submit", str(file), "--home", h).code == 0
        run = erasure("request", "run", rid, "--home", h, "--json")
        assert run.code == 0, run.out[-2000:] + run.err[-2000:]
    return {"agents": agents, "backups": b}


def _untar(archive: Path, into: Path) -> Path:
    shutil.rmtree(into, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def test_rewrite_erases_inside_the_backups(home: Home, tmp_path: Path, rewritable: dict[str, Path]) -> None:
    h, b, agents = str(home.root), rewritable["backups"], rewritable["agents"]
    people = (LG.SUBJECT, CH.SUBJECT)
    left = {(x.kind, x.who) for x in oracle.scan_tree(agents / "chroma", *people).hits}  # the reported mention
    held = json.loads(erasure("backups", "list", "--home", h, "--json").out)["open"]
    assert {(x["request_id"], x["ended"]) for x in held} == {(r, None) for r in REQUESTS} and len(held) == 6
    assert oracle.scan_tree(b / "lg", LG.SUBJECT).hits
    assert oracle.scan_tree(_untar(b / "chroma" / "chroma.tar", tmp_path / "before"), CH.SUBJECT).hits
    mtimes = {p: p.stat().st_mtime for p in (*(b / "lg").iterdir(), b / "chroma" / "chroma.tar")}

    for target in ("support-agent", "kb-vectors"):
        res = erasure("backups", "rewrite", "--target", target, "--home", h, "--json")
        assert res.code == 0, target + res.out[-3000:] + res.err[-3000:]
        rows = json.loads(res.out)["backups"]
        assert rows and all(r["applied"] == list(REQUESTS) and r["epoch"] == 2 for r in rows), rows
        assert {x["outcome"] for r in rows for x in r["replays"]} <= {"all_clear", "nothing_found"}

    # The rewritten backups' files: nothing of the subjects (but Chroma's reported bystander mention).
    assert sorted(p.name for p in (b / "lg").iterdir()) == [
        ".erasure-rewritten.json",
        "store-online.sqlite",
        "store-vacuum.sqlite",
    ]
    assert oracle.scan_tree(b / "lg", *people).hits == []
    after = _untar(b / "chroma" / "chroma.tar", tmp_path / "after")
    assert {(x.kind, x.who) for x in oracle.scan_tree(after, *people).hits} <= left
    assert oracle.scan_tree(b / "lg", LG.BYSTANDERS[1]).hits  # bystanders kept
    assert CH.BYSTANDERS[1].encode() in (after / "chroma" / "chroma.sqlite3").read_bytes()
    assert {p: p.stat().st_mtime for p in mtimes} == mtimes  # the original backup time is kept
    side = json.loads((b / "lg" / ".erasure-rewritten.json").read_text())
    assert {v["name"] for v in side.values()} == {"store-online.sqlite", "store-vacuum.sqlite"}
    assert all(v["applied"] == sorted(REQUESTS) for v in side.values())
    assert oracle.scan_home(home.root, home.evidence_root, *people).hits == []

    # Held no longer: the follow-up statements are signed and verify with the packs.
    listed = json.loads(erasure("backups", "list", "--home", h, "--json").out)
    assert listed["open"] == [] and sorted(listed["followups_written"]) == sorted(REQUESTS)
    for rid in REQUESTS:
        verified = verify_offline(str(home.evidence_dir(rid) / "proof.tar.gz"), home)
        assert verified.returncode == 0 and "follow-up" in verified.stdout, verified.stdout + verified.stderr

    again = erasure("backups", "rewrite", "--target", "support-agent", "--home", h, "--json")
    assert again.code == 0 and all(r["applied"] == [] for r in json.loads(again.out)["backups"])  # idempotent
