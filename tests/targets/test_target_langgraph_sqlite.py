"""Target kind `langgraph-sqlite`: a LangGraph memory built with the real framework (SqliteStore with
its vector index, SqliteSaver under a compiled graph), erased by `tasks.targets.langgraph_sqlite`,
checked byte by byte by the test's own walk of every file, read back through the framework, and
probed by `probes.targets.langgraph_sqlite` (through `probes.targets.run`)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from erasure.errors import ConfigError, InputError, StoreError
from erasure.subject import Subject
from erasure.tiers import Tier
from probes.model import BYTES, ProbeResult
from probes.needles import NeedleKind
from probes.targets import run
from tasks.targets.langgraph_sqlite import ERASER
from tests.langgraph_sqlite_fixtures import (
    _TOPICS,
    BYSTANDERS,
    DIMS,
    MENTION_TEXT,
    SUBJECT,
    HashEmbeddings,
    Memory,
    build_memory,
    check_bystanders,
    make_target,
    open_store,
)

REPO = Path(__file__).resolve().parents[2]
TIERS = (Tier.working, Tier.episodic, Tier.semantic, Tier.vectors)


# --- memories -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    """No mentions: afterwards not one byte of the subject may remain anywhere."""
    return build_memory(tmp_path_factory.mktemp("lg") / "base", mentions=False)


@pytest.fixture(scope="module")
def base_mentions(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    """With a bystander's item and a bystander's thread that name the subject."""
    return build_memory(tmp_path_factory.mktemp("lg") / "mentions", mentions=True)


@pytest.fixture(scope="module")
def base_wal(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    """The store in WAL mode too (an agent that set it), for the concurrent test."""
    return build_memory(tmp_path_factory.mktemp("lg") / "wal", mentions=False, store_wal=True)


def copy_of(mem: Memory, dest: Path) -> Memory:
    shutil.copytree(mem.root, dest)
    return dataclasses.replace(
        mem,
        root=dest,
        store_path=dest / mem.store_path.name,
        checkpoints_path=dest / mem.checkpoints_path.name,
        items={k: list(v) for k, v in mem.items.items()},
        threads={k: list(v) for k, v in mem.threads.items()},
    )


# --- the test's own view of the bytes ------------------------------------------------------------------


def subject_identifiers() -> list[bytes]:
    """Every identifier of the subject, in the spellings an app writes (searched case-insensitively)."""
    assert SUBJECT.email and SUBJECT.name and SUBJECT.phone
    return [
        s.encode()
        for s in (
            SUBJECT.id,
            SUBJECT.email,
            SUBJECT.name,
            SUBJECT.phone,
            SUBJECT.phone.replace(" ", ""),
            "912 345 678",
            "Ortiz",
        )
    ]


def subject_content() -> list[bytes]:
    """Distinctive content of the subject's: the head of every topic of theirs (items and turns)."""
    return [t[:32].encode() for t in _TOPICS[SUBJECT.id]] + [b"orange gate behind the bakery", b"maestro Quaresma"]


def subject_vectors(mem: Memory) -> list[bytes]:
    """The subject's vectors as the store keeps them (float32, little-endian), read with the standard
    library before the erasure, and each checked against the test's own embedding of the item's text."""
    conn = sqlite3.connect(f"file:{mem.store_path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT prefix, key, embedding FROM store_vectors").fetchall()
    finally:
        conn.close()
    texts = {(".".join(ns), key): value["text"] for ns, key, value in mem.items[SUBJECT.id]}
    emb = HashEmbeddings()
    out = []
    for prefix, key, blob in rows:
        if prefix.split(".")[1].lower() != SUBJECT.id.lower():
            continue
        own = struct.pack(f"<{DIMS}f", *emb.embed(texts[(prefix, key)]))
        assert bytes(blob) == own
        out.append(own)
    assert len(out) == len(mem.items[SUBJECT.id])
    return out


def walk(root: Path, needles: list[bytes], *, caseless: bool) -> dict[str, list[str]]:
    """needle -> the files (every regular file under `root`, sidecars included) holding it."""
    found: dict[str, list[str]] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            data = (Path(dirpath) / name).read_bytes()
            hay = data.lower() if caseless else data
            for n in needles:
                if (n.lower() if caseless else n) in hay:
                    found.setdefault(n.hex() if not caseless else n.decode(), []).append(name)
    return found


def vector_needles(vectors: list[bytes]) -> list[bytes]:
    """Each vector whole and in quarters (a copy cut by a page boundary still shows)."""
    q = len(vectors[0]) // 4 if vectors else 0
    return [p for v in vectors for p in (v, v[:q], v[q : 2 * q], v[2 * q : 3 * q], v[3 * q :])]


def assert_no_byte_of_the_subject(mem: Memory, vectors: list[bytes]) -> None:
    assert walk(mem.root, subject_identifiers(), caseless=True) == {}
    assert walk(mem.root, subject_content(), caseless=False) == {}
    assert walk(mem.root, vector_needles(vectors), caseless=False) == {}


# --- the agent, running in its own process --------------------------------------------------------------


class Agent:
    """`tests.langgraph_sqlite_agent` in a subprocess: the framework holds the store open meanwhile."""

    def __init__(self, mem: Memory, work: Path) -> None:
        spec = work / "memory.json"  # outside the target's folder: it names the subject
        mem.dump(spec)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.langgraph_sqlite_agent", str(spec)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.read() == "ok ready"

    def read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line.startswith("ok"), line or f"agent exited {self.proc.poll()}"
        return line

    def send(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            if exc[0] is None:
                self.send("quit")
            else:
                self.proc.kill()
        self.proc.wait(timeout=60)


def clean(results: list[ProbeResult]) -> None:
    bad = [r for r in results if r.failing()]
    assert not bad, bad


def residue(results: list[ProbeResult], tier: str, method: str) -> int:
    return next(r.residue for r in results if r.tier == tier and r.method == method)


def bystander_rows(mem: Memory) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of both databases that is not the subject's (read with the stdlib)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for path in (mem.store_path, mem.checkpoints_path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for t in tables:
                rows = conn.execute(f'SELECT * FROM "{t}"').fetchall()
                if t.startswith("sqlite_stat"):
                    continue
                out[f"{path.name}/{t}"] = sorted(rows, key=repr)
        finally:
            conn.close()
    return out


# --- tests ------------------------------------------------------------------------------------------------


def test_erase_leaves_no_byte_of_the_subject_and_every_bystander_reads_back(base: Memory, tmp_path: Path) -> None:
    mem = copy_of(base, tmp_path / "m")
    target = mem.target
    vectors = subject_vectors(mem)
    assert walk(mem.root, subject_identifiers(), caseless=True)  # the walk sees them before
    fp = run.take(target, SUBJECT)
    kinds = {n.kind for n in fp.needles}
    assert {NeedleKind.identifier, NeedleKind.content, NeedleKind.vector} <= kinds
    assert fp.mentions == 0 and ERASER.mentions(target, SUBJECT) == 0
    before = ERASER.count(target, SUBJECT)
    assert before == {Tier.working: 3, Tier.episodic: 3, Tier.semantic: 62, Tier.vectors: 65}

    out = ERASER.erase(target, SUBJECT)

    assert {t: (o.before, o.after) for t, o in out.items()} == {t: (before[t], 0) for t in TIERS}
    assert out[Tier.working].detail["deleted_checkpoints_rows"] > 0
    assert ERASER.count(target, SUBJECT) == dict.fromkeys(TIERS, 0)
    assert_no_byte_of_the_subject(mem, vectors)
    assert not mem.store_path.with_name(mem.store_path.name + "-journal").exists()
    check_bystanders(mem)
    results = run.probe(target, SUBJECT, fp)
    clean(results)
    assert {r.tier for r in results} >= {BYTES, "working", "episodic", "semantic", "vectors"}
    assert all(r.bystanders_before > 0 for r in results if r.tier in ("working", "semantic", "vectors"))


def test_the_frameworks_delete_leaves_the_subject_on_disk_and_the_probe_catches_it(
    base: Memory, tmp_path: Path
) -> None:
    """`store.delete` + `delete_thread`, called by the running agent: the subject's vectors, namespace
    and content stay in the store file, and the WAL keeps their thread turns. The probe reports it;
    our erase then closes what the framework left, with the agent still connected."""
    mem = copy_of(base, tmp_path / "m")
    target = mem.target
    vectors = subject_vectors(mem)
    fp = run.take(target, SUBJECT)
    with Agent(mem, tmp_path) as agent:
        agent.send("turn")  # the subject talks to the running agent, then the team deletes them
        agent.send("framework-delete")

        ids = walk(mem.root, subject_identifiers(), caseless=True)
        assert SUBJECT.name is not None
        assert "store.sqlite" in ids[SUBJECT.id]  # store_vectors rows, sqlite_stat4 samples
        assert "checkpoints.sqlite-wal" in ids[SUBJECT.name]  # the thread's turns, until a TRUNCATE checkpoint
        assert walk(mem.root, subject_content(), caseless=False)
        assert len(walk(mem.root, vectors, caseless=False)) == len(vectors)  # every vector, byte for byte
        found = run.probe(target, SUBJECT, fp)
        assert residue(found, BYTES, "scan:vector") == len(vectors)
        assert residue(found, BYTES, "scan:content") > 0
        assert residue(found, "vectors", "vectors-under-namespace") == len(vectors)
        assert residue(found, "vectors", "vectors-by-bytes") == len(vectors)
        assert residue(found, "vectors", "vectors-nearest-neighbour") > 0
        assert residue(found, BYTES, "scan:identifier") > 0
        assert not any(r.lost_bystanders() for r in found)

        out = ERASER.erase(target, SUBJECT)  # the agent keeps its connections open

        assert out[Tier.vectors].before == len(vectors) and out[Tier.vectors].after == 0
        assert out[Tier.vectors].detail["orphaned_by_earlier_deletes"] == len(vectors) - 1
        assert_no_byte_of_the_subject(mem, vectors)
        agent.send("check")
    clean(run.probe(target, SUBJECT, fp))


def test_erase_waits_for_the_agents_write_transactions_and_leaves_the_agent_working(
    base_wal: Memory, tmp_path: Path
) -> None:
    mem = copy_of(base_wal, tmp_path / "m")
    target = mem.target
    vectors = subject_vectors(mem)
    fp = run.take(target, SUBJECT)
    hold = 2.0
    with Agent(mem, tmp_path) as agent:
        agent.send(f"hold {hold}")  # both databases write-locked by the agent's own connections
        started = time.monotonic()
        out = ERASER.erase(target, SUBJECT)
        waited = time.monotonic() - started
        assert waited >= hold * 0.8
        assert all(o.after == 0 for o in out.values()) and out[Tier.semantic].before > 0
        agent.send("check")  # its open store and checkpointer still read, search, write and run a turn
    assert_no_byte_of_the_subject(mem, vectors)
    for path in (mem.store_path, mem.checkpoints_path):
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    clean(run.probe(target, SUBJECT, fp))


def test_a_second_erase_finds_nothing_and_changes_no_bystander(base: Memory, tmp_path: Path) -> None:
    mem = copy_of(base, tmp_path / "m")
    target = mem.target
    fp = run.take(target, SUBJECT)
    ERASER.erase(target, SUBJECT)
    rows = bystander_rows(mem)
    again = ERASER.erase(target, SUBJECT)
    assert {t: (o.before, o.after) for t, o in again.items()} == {t: (0, 0) for t in TIERS}
    assert ERASER.count(target, SUBJECT) == dict.fromkeys(TIERS, 0)
    assert bystander_rows(mem) == rows
    clean(run.probe(target, SUBJECT, fp))


def test_mentions_are_counted_and_left_as_they_were(base_mentions: Memory, tmp_path: Path) -> None:
    """A bystander's memory and a bystander's thread that name the subject: reported on both sides,
    never erased; the subject's own id, phone and content are gone all the same."""
    mem = copy_of(base_mentions, tmp_path / "m")
    target = mem.target
    vectors = subject_vectors(mem)
    fp = run.take(target, SUBJECT)
    assert ERASER.mentions(target, SUBJECT) == 2 and fp.mentions == 2
    ERASER.erase(target, SUBJECT)
    assert ERASER.mentions(target, SUBJECT) == 2
    check_bystanders(mem)
    with open_store(mem.store_path) as store:
        assert store.get(("users", BYSTANDERS[0].id, "memories"), "referral").value["text"] == MENTION_TEXT
    assert SUBJECT.phone
    assert walk(mem.root, [SUBJECT.id.encode(), SUBJECT.phone.encode()], caseless=True) == {}
    assert walk(mem.root, subject_content(), caseless=False) == {}
    assert walk(mem.root, vector_needles(vectors), caseless=False) == {}
    results = run.probe(target, SUBJECT, fp)
    clean(results)
    assert residue(results, BYTES, "scan:identifier") == 0
    assert any(r.method == "mentions-reported" and r.bystanders_after == 2 for r in results)


def test_erase_needs_no_langgraph(base: Memory, tmp_path: Path) -> None:
    """The team's agent has its own environment: our side erases with LangGraph not importable."""
    mem = copy_of(base, tmp_path / "m")
    code = (
        "import json, sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('langgraph', 'langchain_core', 'pysqlite3'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from erasure.subject import Subject\n"
        "from tests.langgraph_sqlite_fixtures import make_target\n"
        "from tasks.targets.langgraph_sqlite import ERASER\n"
        "t = make_target(__import__('pathlib').Path(sys.argv[1]))\n"
        "s = Subject.model_validate_json(sys.argv[2])\n"
        "out = ERASER.erase(t, s)\n"
        "print(json.dumps({k.value: [o.before, o.after] for k, o in out.items()}))\n"
        "assert 'langgraph' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(mem.root), SUBJECT.model_dump_json()],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert all(after == 0 for _before, after in counts.values()) and counts["semantic"][0] > 0
    check_bystanders(mem)


def test_configuration_errors_name_the_key(tmp_path: Path) -> None:
    (tmp_path / "store.sqlite").touch()
    with pytest.raises(ConfigError, match="'store' or 'checkpoints'"):
        ERASER.check(make_target(tmp_path, store=None, checkpoints=None))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'namespace'"):
        ERASER.check(make_target(tmp_path, namespace=["users", "everyone"]))
    with pytest.raises(ConfigError, match="'namespace'"):
        ERASER.check(make_target(tmp_path, namespace=["users.all", "{subject_id}"]))
    with pytest.raises(ConfigError, match="'thread_key'"):
        ERASER.check(make_target(tmp_path, thread_key="user id; DROP"))
    with pytest.raises(StoreError, match="checkpoints"):
        ERASER.count(make_target(tmp_path, checkpoints="missing.sqlite"), SUBJECT)


def test_a_subject_id_with_a_dot_is_refused_not_matched_elsewhere(base: Memory, tmp_path: Path) -> None:
    """`users.usr-7f3a9c.memories` must never be read as the namespace of a subject `usr-7f3a9c.memories`."""
    mem = copy_of(base, tmp_path / "m")
    with pytest.raises(InputError, match=r"'\.'"):
        ERASER.erase(mem.target, Subject(id=f"{SUBJECT.id}.memories"))
    assert ERASER.count(mem.target, SUBJECT)[Tier.semantic] > 0


def test_a_persistent_rollback_journal_of_the_agent_is_not_left_holding_the_subject(
    base: Memory, tmp_path: Path
) -> None:
    """An agent in `journal_mode=PERSIST` leaves `-journal` behind with the pre-images of its last
    transaction's pages: the subject's items, after the agent rewrote one of theirs."""
    mem = copy_of(base, tmp_path / "m")
    vectors = subject_vectors(mem)
    with open_store(mem.store_path) as store:
        assert store.conn.execute("PRAGMA journal_mode=PERSIST").fetchone() == ("persist",)
        ns, key, value = mem.items[SUBJECT.id][5]
        store.put(ns, key, {**value, "seen": True})
    journal = mem.store_path.with_name(mem.store_path.name + "-journal")
    assert SUBJECT.id.encode() in journal.read_bytes()
    ERASER.erase(mem.target, SUBJECT)
    assert_no_byte_of_the_subject(mem, vectors)
    check_bystanders(mem)


def test_a_target_with_only_a_store_erases_items_and_leaves_the_threads_alone(base: Memory, tmp_path: Path) -> None:
    mem = copy_of(base, tmp_path / "m")
    target = make_target(mem.root, checkpoints=None, thread_key=None)  # type: ignore[arg-type]
    threads_before = mem.checkpoints_path.read_bytes()
    out = ERASER.erase(target, SUBJECT)
    assert out[Tier.working].before == 0 and out[Tier.semantic].before > 0
    assert ERASER.count(target, SUBJECT) == dict.fromkeys(TIERS, 0)
    assert mem.checkpoints_path.read_bytes() == threads_before
    assert ERASER.files(target) == [mem.store_path]
