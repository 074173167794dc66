"""Kind `chroma`: a real Chroma PersistentClient memory (chromadb 1.5, tests/chroma_fixtures.py), erased
with `ERASER.erase` (no Prefect), checked three ways: our own walk over every file of the target
(identifiers case-insensitively, distinctive content, the subject's vectors as raw float32 and as the
normalised float32 a cosine index stores, with a tolerance), the bystanders read back through the
framework (records, documents, metadata, embeddings, query answers, full-text filters), and the
independent probe (`probes.targets.run`)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from erasure.errors import ConfigError
from erasure.sqlite import connect
from erasure.tiers import Tier
from probes.targets import run
from probes.targets.chroma.indexes import fts_rowids
from tasks.targets.chroma import ERASER
from tests.chroma_fixtures import (
    COLLECTIONS,
    DIM,
    MENTION_ID,
    SUBJECT,
    SUBJECT_KEY,
    Memory,
    build_memory,
    embed,
    framework_delete,
    hash_embedding,
    opened,
    target_for,
)

pytest.importorskip("chromadb")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    """One memory built with the framework (about 4,000 records: ~13 s here), copied by each test."""
    return build_memory(tmp_path_factory.mktemp("chroma-pristine") / "chroma")


@pytest.fixture
def memory(pristine: Memory, tmp_path: Path) -> Memory:
    path = tmp_path / "agent" / "chroma"
    shutil.copytree(pristine.path, path)
    return Memory(path=path, records=pristine.records)


# --- our own look at every byte -----------------------------------------------------------------------


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _string_hits(mem: Memory) -> dict[str, list[str]]:
    """file -> the subject's strings found in it (ASCII case-insensitively)."""
    needles = [s.lower().encode() for s in mem.subject_strings()]
    out: dict[str, list[str]] = {}
    for f in _files(mem.path):
        data = f.read_bytes().lower()
        found = [n.decode() for n in needles if n in data]
        if found:
            out[str(f.relative_to(mem.path))] = found
    return out


def _subject_vectors(mem: Memory) -> list[np.ndarray]:
    """Each subject vector as the store may hold it: the raw float32, and normalised (cosine)."""
    out = []
    for r in mem.of_subject():
        v = r.embedding.astype(np.float32)
        out += [v, (v / np.linalg.norm(v)).astype(np.float32)]
    return out


def _float_hits(data: bytes, vectors: list[np.ndarray], atol: float = 1e-5) -> int:
    """How many windows of `data`, read as float32 at any of the four alignments, equal one of
    `vectors` within `atol` (anchored on each vector's largest component, then checked whole)."""
    hits = 0
    for align in range(4):
        n = (len(data) - align) // 4
        if n < DIM:
            continue
        arr = np.frombuffer(data, dtype="<f4", count=n, offset=align)
        order = np.argsort(arr, kind="stable")
        values = arr[order]
        for v in vectors:
            a = int(np.argmax(np.abs(v)))
            lo = np.searchsorted(values, v[a] - atol, "left")
            hi = np.searchsorted(values, v[a] + atol, "right")
            for k in order[lo:hi]:
                start = int(k) - a
                if start >= 0 and start + DIM <= n and np.allclose(arr[start : start + DIM], v, atol=atol, rtol=0):
                    hits += 1
    return hits


def _vector_hits(mem: Memory) -> dict[str, int]:
    vectors = _subject_vectors(mem)
    out = {}
    for f in _files(mem.path):
        n = _float_hits(f.read_bytes(), vectors)
        if n:
            out[str(f.relative_to(mem.path))] = n
    return out


# --- the bystanders, through the framework --------------------------------------------------------------


def _bystanders(mem: Memory) -> dict[str, dict[str, Any]]:
    expected: dict[str, dict[str, Any]] = {}
    for r in mem.of_bystanders():
        if r.collection in COLLECTIONS:
            expected.setdefault(r.collection, {})[r.id] = r
    return expected


def _query_answers(client: Any, mem: Memory) -> dict[str, tuple[int, int, int]]:
    """collection -> (bystanders found among their own text's first three answers, first answers that agree
    with brute force, queries asked), every bystander asked once. HNSW is approximate and Chroma builds it
    on several threads, so the graph, and which query misses, differs from build to build."""
    out = {}
    ef = hash_embedding()
    for name, space in COLLECTIONS.items():
        col = client.get_collection(name, embedding_function=ef)
        want = _bystanders(mem)[name]
        ids = sorted(want)
        matrix = np.vstack([want[i].embedding for i in ids]).astype(np.float64)
        tops = col.query(query_texts=[want[rid].document for rid in ids], n_results=3)["ids"]
        found = agree = 0
        for rid, top in zip(ids, tops, strict=True):
            best = rid if space != "ip" else ids[int(np.argmax(matrix @ want[rid].embedding))]
            found += rid in top
            agree += top[0] == best
        out[name] = (found, agree, len(ids))
    return out


def _slack(hits: int, asked: int) -> int:
    """How many fewer hits a second build of the same graph may have by chance: three standard deviations
    of the difference of two binomial counts with the first build's rate (at least 2)."""
    p = hits / asked
    return max(2, math.ceil(3 * math.sqrt(2 * asked * p * (1 - p))))


@pytest.fixture(scope="module")
def answers_as_built(pristine: Memory, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, int, int]]:
    """The query answers of the store as the framework built it (the subject still in it), on a copy."""
    path = tmp_path_factory.mktemp("chroma-as-built") / "chroma"
    shutil.copytree(pristine.path, path)
    with opened(path) as client:
        return _query_answers(client, pristine)


def _bystanders_read_back(mem: Memory, as_built: dict[str, tuple[int, int, int]]) -> None:
    expected = _bystanders(mem)
    with opened(mem.path) as client:
        names = sorted(c.name for c in client.list_collections())
        assert names == sorted(COLLECTIONS)
        ef = hash_embedding()
        for name in COLLECTIONS:
            col = client.get_collection(name, embedding_function=ef)
            want = expected[name]
            assert col.count() == len(want)
            got = col.get(include=["documents", "metadatas", "embeddings"])
            assert sorted(got["ids"]) == sorted(want)
            for rid, doc, meta, emb in zip(
                got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
            ):
                assert doc == want[rid].document
                assert meta == want[rid].metadata
                assert np.allclose(np.asarray(emb), want[rid].embedding, rtol=1e-4, atol=1e-4)
            assert col.get(where={SUBJECT_KEY: SUBJECT.id})["ids"] == []
            assert col.get(where_document={"$contains": "lighthouse"})["ids"] == []
            assert len(col.get(where_document={"$contains": "walrus"})["ids"]) == len(
                [r for r in want.values() if "walrus" in r.document]
            )
            res = col.query(query_texts=[f"{SUBJECT.name} lighthouse at dawn"], n_results=5, include=["metadatas"])
            assert all(str(m[SUBJECT_KEY]).lower() != SUBJECT.id.lower() for m in res["metadatas"][0])
        # The rewritten graph answers bystanders' queries as well as the one the framework built: a query
        # missed in one and not the other is the approximate search, a loss of several is the rewrite.
        after = _query_answers(client, mem)
    for name, space in COLLECTIONS.items():
        found, agree, asked = after[name]
        found0, agree0, asked0 = as_built[name]
        assert asked == asked0
        # On ip a record's own text need not be its nearest (a longer vector has a larger product), so
        # only the comparison with the graph as built counts there.
        floor = 0.9 if space != "ip" else 0.75
        assert found >= min(found0, asked - 1) - _slack(found0, asked), (name, after[name], as_built[name])
        assert agree >= agree0 - _slack(agree0, asked), (name, after[name], as_built[name])
        assert agree >= floor * asked, (name, after[name], as_built[name])
        assert space == "ip" or found >= floor * asked, (name, after[name], as_built[name])


def _fts_matches_content(root: Path) -> bool:
    conn = connect(root / "chroma.sqlite3", readonly=True)
    try:
        live = {int(r[0]) for r in conn.execute("SELECT id FROM embedding_fulltext_search_content")}
        return fts_rowids(conn) == live
    finally:
        conn.close()


def _hnsw_elements(root: Path) -> int:
    total = 0
    for header in root.glob("*/header.bin"):
        total += int.from_bytes(header.read_bytes()[20:28], "little")
    return total


# --- the tests ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("use_api", [True, False], ids=["framework-api", "sql-only"])
def test_erase_leaves_no_byte_of_the_subject_and_bystanders_read_back(
    memory: Memory, use_api: bool, answers_as_built: dict[str, tuple[int, int, int]]
) -> None:
    target = target_for(memory.path, use_api=use_api)
    assert _hnsw_elements(memory.path) >= 3000, "the index files must hold vectors"
    assert _string_hits(memory) and _vector_hits(memory), "the memory must hold the subject before"
    fp = run.take(target, SUBJECT)
    assert ERASER.mentions(target, SUBJECT) == 1 and fp.mentions == 1

    out = ERASER.erase(target, SUBJECT)

    assert set(out) == {Tier.episodic, Tier.vectors, Tier.derivatives}
    assert all(o.before > 0 and o.after == 0 for o in out.values())
    assert out[Tier.episodic].detail.get("framework_api", 0) == int(use_api)
    assert ERASER.count(target, SUBJECT) == {Tier.episodic: 0, Tier.vectors: 0, Tier.derivatives: 0}
    # Our own walk: the only identifier left is the name inside the bystander's record that mentions
    # the subject (reported as a mention, not erased); no content and no vector of the subject anywhere.
    hits = _string_hits(memory)
    assert SUBJECT.name is not None
    assert hits == {"chroma.sqlite3": [SUBJECT.name.lower()]}, hits
    assert _vector_hits(memory) == {}
    assert not [p for p in memory.path.iterdir() if p.is_dir() and p.name.endswith((".erasure-new", ".erasure-old"))]
    assert _fts_matches_content(memory.path)
    _bystanders_read_back(memory, answers_as_built)
    with opened(memory.path) as client:
        mention = client.get_collection("facts", embedding_function=hash_embedding()).get(ids=[MENTION_ID])
        assert mention["ids"] == [MENTION_ID]
    results = run.probe(target, SUBJECT, fp)
    assert {r.method for r in results} >= {
        "sqlite:records",
        "sqlite:log",
        "hnsw:ids",
        "hnsw:vectors",
        "log:vectors",
        "hnsw:orphan-folders",
        "fts:rows",
        "fts:postings",
    }
    assert [r for r in results if r.failing()] == []
    assert fp.bystanders["records"] == len(memory.of_bystanders())


def test_framework_delete_leaves_the_subject_on_disk_and_the_probe_catches_it(
    memory: Memory, answers_as_built: dict[str, tuple[int, int, int]]
) -> None:
    target = target_for(memory.path)
    fp = run.take(target, SUBJECT)

    removed = framework_delete(memory.path)

    assert removed == len(memory.of_subject()) - 1  # `where` is exact: the case variant of the id stays
    # What the framework left, seen by our own walk: text in chroma.sqlite3 (log, freed pages), vectors
    # in the HNSW files (data_level0.bin keeps them) and the dropped collection's folder.
    hits = _string_hits(memory)
    assert SUBJECT.name is not None
    assert any(s != SUBJECT.name.lower() for s in hits.get("chroma.sqlite3", [])), hits
    vectors = _vector_hits(memory)
    assert any(f.endswith("data_level0.bin") for f in vectors), vectors
    assert any(f == "chroma.sqlite3" for f in vectors), vectors
    assert not _fts_matches_content(memory.path)
    results = {r.method: r for r in run.probe(target, SUBJECT, fp)}
    for method in (
        "scan:identifier",
        "scan:content",
        "scan:vector",
        "sqlite:log",
        "hnsw:ids",
        "hnsw:vectors",
        "log:vectors",
        "hnsw:orphan-folders",
        "fts:postings",
        "sqlite:records",
    ):
        assert results[method].residue > 0, method
    counts = ERASER.count(target, SUBJECT)
    assert all(counts[t] > 0 for t in (Tier.episodic, Tier.vectors))

    # Our eraser finishes what the framework's delete left.
    ERASER.erase(target, SUBJECT)
    assert _vector_hits(memory) == {}
    assert _string_hits(memory) == {"chroma.sqlite3": [SUBJECT.name.lower()]}
    assert [r for r in run.probe(target, SUBJECT, fp) if r.failing()] == []
    _bystanders_read_back(memory, answers_as_built)


def test_erase_is_idempotent(memory: Memory) -> None:
    target = target_for(memory.path)
    ERASER.erase(target, SUBJECT)
    segments = {
        str(p.relative_to(memory.path)): p.read_bytes() for p in _files(memory.path) if p.name != "chroma.sqlite3"
    }
    with opened(memory.path) as client:
        snap = {
            c.name: client.get_collection(c.name, embedding_function=hash_embedding()).get(
                include=["documents", "metadatas", "embeddings"]
            )
            for c in client.list_collections()
        }

    again = ERASER.erase(target, SUBJECT)

    assert all(o.before == 0 and o.after == 0 for o in again.values())
    assert "hnsw_segments_rewritten" not in again[Tier.vectors].detail
    assert ERASER.count(target, SUBJECT) == {Tier.episodic: 0, Tier.vectors: 0, Tier.derivatives: 0}
    assert {
        str(p.relative_to(memory.path)): p.read_bytes() for p in _files(memory.path) if p.name != "chroma.sqlite3"
    } == segments
    with opened(memory.path) as client:
        for name, before in snap.items():
            now = client.get_collection(name, embedding_function=hash_embedding()).get(
                include=["documents", "metadatas", "embeddings"]
            )
            assert now["ids"] == before["ids"] and now["documents"] == before["documents"]
            assert now["metadatas"] == before["metadatas"]
            assert np.array_equal(np.asarray(now["embeddings"]), np.asarray(before["embeddings"]))


AGENT = r"""
import json, sqlite3, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.chroma_fixtures import SUBJECT, SUBJECT_KEY, client, hash_embedding, reopen, embed
path, work = Path(sys.argv[2]), Path(sys.argv[3])
out = {}
agent = client(path)
facts = agent.get_collection("facts", embedding_function=hash_embedding())
subject_text = [d for d in facts.get(where={SUBJECT_KEY: SUBJECT.id}, limit=1)["documents"]][0]
out["before"] = facts.query(query_texts=[subject_text], n_results=1, include=["documents"])["documents"][0][0]
db = sqlite3.connect(path / "chroma.sqlite3", timeout=60, isolation_level=None)
db.execute("BEGIN IMMEDIATE")              # the agent writes: the store's write lock is ours for a moment
(work / "locked").write_text(str(time.time()))
time.sleep(float(sys.argv[4]))
db.execute("COMMIT")
out["released"] = time.time()
db.close()
while not (work / "erased").exists():
    time.sleep(0.05)
# Still holding the old client: chromadb kept the HNSW index of before the erasure in memory.
stale = facts.query(query_texts=[subject_text], n_results=1, include=["documents", "metadatas"])
out["stale_documents"] = stale["documents"][0]
# What the agent must do after an erasure (Chroma is not process-safe): drop the cached system, reopen.
agent = reopen(path)
facts = agent.get_collection("facts", embedding_function=hash_embedding())
fresh = facts.query(query_texts=[subject_text], n_results=1, include=["metadatas"])
out["fresh_owner"] = fresh["metadatas"][0][0][SUBJECT_KEY]
hits = 0
got = facts.get(where={SUBJECT_KEY: "user-bob-0002"}, limit=20, include=["documents"])
for rid, doc in zip(got["ids"], got["documents"]):
    hits += facts.query(query_texts=[doc], n_results=1)["ids"][0][0] == rid
out["bystander_self_hits"] = [hits, len(got["ids"])]
facts.add(ids=[f"after-{i}" for i in range(1200)],
          documents=[f"user-bob-0002 after erasure {i} otter{i}" for i in range(1200)],
          metadatas=[{SUBJECT_KEY: "user-bob-0002", "n": i} for i in range(1200)])
out["count_after_add"] = facts.count()
agent.close()
(work / "result.json").write_text(json.dumps(out))
"""


def test_agent_keeps_its_client_open_and_holds_the_write_lock_during_the_erasure(
    memory: Memory, tmp_path: Path
) -> None:
    target = target_for(memory.path)
    fp = run.take(target, SUBJECT)
    work = tmp_path / "agent-work"
    work.mkdir()
    hold = 3.0
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(ROOT), str(memory.path), str(work), str(hold)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while not (work / "locked").exists():
            assert agent.poll() is None, agent.communicate()[0]
            assert time.time() < deadline
            time.sleep(0.05)
        started = time.time()
        out = ERASER.erase(target, SUBJECT)
        ended = time.time()
        (work / "erased").write_text("1")
        log = agent.communicate(timeout=300)[0]
        assert agent.returncode == 0, log
    finally:
        if agent.poll() is None:
            agent.kill()
    result = json.loads((work / "result.json").read_text())
    # The erasure waited for the agent's write lock, then completed.
    assert started < result["released"] < ended
    assert all(o.after == 0 for o in out.values())
    # The agent's old client still answers from its in-memory index (ids of the erased records, but no
    # documents: those come from SQLite); after reopening it answers for bystanders and writes.
    assert result["before"] is not None
    assert result["stale_documents"] == [None]
    assert result["fresh_owner"] != SUBJECT.id
    assert result["bystander_self_hits"][0] == result["bystander_self_hits"][1] > 0
    bystanders_in_facts = len([r for r in memory.of_bystanders() if r.collection == "facts"])
    assert result["count_after_add"] == bystanders_in_facts + 1200
    # A fresh client sees the agent's writes and the bystanders; the probe finds nothing of the subject.
    with opened(memory.path) as client:
        facts = client.get_collection("facts", embedding_function=hash_embedding())
        assert facts.count() == bystanders_in_facts + 1200
        assert facts.query(query_texts=["user-bob-0002 after erasure 7 otter7"], n_results=1)["ids"][0] == ["after-7"]
    assert [r for r in run.probe(target, SUBJECT, fp) if r.residue > 0] == []
    assert _vector_hits(memory) == {}


def test_a_swap_interrupted_by_a_crash_is_finished_by_the_next_run(
    memory: Memory, answers_as_built: dict[str, tuple[int, int, int]]
) -> None:
    target = target_for(memory.path)
    ERASER.erase(target, SUBJECT)
    segment = sorted(p for p in memory.path.iterdir() if p.is_dir())[0]
    # Crashed after the first rename: the old folder retired, the new one not yet in place.
    shutil.copytree(segment, segment.with_name(segment.name + ".erasure-new"))
    segment.rename(segment.with_name(segment.name + ".erasure-old"))
    # And a half-written staging folder of another segment.
    other = sorted(p for p in memory.path.iterdir() if p.is_dir() and "." not in p.name)[0]
    (other.with_name(other.name + ".erasure-new")).mkdir()

    ERASER.erase(target, SUBJECT)

    assert segment.is_dir()
    assert not [p for p in memory.path.iterdir() if p.name.endswith((".erasure-new", ".erasure-old"))]
    _bystanders_read_back(memory, answers_as_built)


def test_configuration_errors_name_the_key(tmp_path: Path) -> None:
    from erasure.targets import Target

    def make(**keys: Any) -> Any:
        return Target.model_validate({"name": "kb", "kind": "chroma", "base_dir": tmp_path, **keys})

    with pytest.raises(ConfigError, match="'path'"):
        ERASER.check(make(subject_key="user_id"))
    with pytest.raises(ConfigError, match="'subject_key'"):
        ERASER.check(make(path="chroma"))
    with pytest.raises(ConfigError, match="'use_api'"):
        ERASER.check(make(path="chroma", subject_key="user_id", use_api="yes"))
    with pytest.raises(ConfigError, match="'subject_key'"):
        ERASER.check(make(path="chroma", subject_key="chroma:document"))
    assert ERASER.files(make(path="chroma", subject_key="user_id")) == [
        tmp_path / "chroma" / "chroma.sqlite3",
        tmp_path / "chroma",
    ]


def test_embed_is_deterministic_and_dense() -> None:
    a, b = embed("Ada Lovelace lighthouse"), embed("Ada Lovelace lighthouse")
    assert np.array_equal(a, b) and np.count_nonzero(a) == DIM


def test_a_collection_that_held_only_the_subject_is_left_empty_and_usable(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    with opened(path) as client:
        for space in ("cosine", "l2"):
            col = client.get_or_create_collection(
                f"only-{space}", embedding_function=hash_embedding(), configuration={"hnsw": {"space": space}}
            )
            docs = [f"{SUBJECT.name} private note {i} zebra{i}" for i in range(1000)]
            col.add(ids=[f"n{i}" for i in range(1000)], documents=docs, metadatas=[{SUBJECT_KEY: SUBJECT.id}] * 1000)
    target = target_for(path)

    out = ERASER.erase(target, SUBJECT)

    assert all(o.before > 0 and o.after == 0 for o in out.values())
    assert _hnsw_elements(path) == 0
    with opened(path) as client:
        for space in ("cosine", "l2"):
            col = client.get_collection(f"only-{space}", embedding_function=hash_embedding())
            assert col.count() == 0 and col.query(query_texts=["zebra5"], n_results=1)["ids"] == [[]]
            col.add(
                ids=[f"b{i}" for i in range(1100)],
                documents=[f"bob note {i} walrus{i}" for i in range(1100)],
                metadatas=[{SUBJECT_KEY: "user-bob-0002"}] * 1100,
            )
    with opened(path) as client:
        for space in ("cosine", "l2"):
            col = client.get_collection(f"only-{space}", embedding_function=hash_embedding())
            assert col.count() == 1100
            assert col.query(query_texts=["bob note 1050 walrus1050"], n_results=1)["ids"] == [["b1050"]]
    assert ERASER.count(target, SUBJECT) == {Tier.episodic: 0, Tier.vectors: 0, Tier.derivatives: 0}
