"""Kind `chroma`, collections with fewer than 1,000 writes (red team, case 10): one erasure run leaves
no byte of the subject in any file of the store's folder, every time.

Below Chroma's `sync_threshold` (1,000 records) a collection's HNSW files are the ones Chroma wrote
when it created the segment: room for 100 elements, none of them used, written from memory hnswlib
allocated and never cleared (we found the subject's name, email and phone in that unused capacity
after runs of the framework's own delete in the erasing process). An eraser that rewrites a segment
only when it has an element to drop leaves those bytes. And where the subject appears only in other
people's documents that the agent has redacted (`collection.update`), the log (`embeddings_queue`)
keeps the unredacted text until the vector segment applies it, which below the threshold it never does.

The stores are built with the real chromadb (tests/chroma_fixtures.py: its local embedding function);
the erasure is `ERASER.erase`, run once. Where chromadb's uninitialised bytes are a matter of luck, the
tests put the subject's bytes where hnswlib leaves memory it never reads (the segment files' unused
capacity; the unused link slots of a live element), so the class is drawn every time. The oracle is a
plain byte search written here, apart from the eraser and the probes: every spelling of every
identifier (ASCII case-insensitively) and the subject's vectors (raw float32 bytes; the normalised
float32 a cosine index keeps, within a tolerance) in every file of the folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from erasure.config import PROJECT_ROOT
from erasure.subject import Subject
from probes.targets import run
from tasks.targets.chroma import ERASER
from tests import budget
from tests.chroma_fixtures import SUBJECT_KEY, embed, hash_embedding, opened, target_for

pytest.importorskip("chromadb")

PEOPLE = (
    Subject(id="user-ada-0001", email="ada.lovelace@example.org", name="Ada Lovelace", phone="+44 20 7946 0123"),
    Subject(id="user-bob-0002", email="bob.babbage@example.net", name="Bob Babbage", phone="+44 20 7946 0456"),
    Subject(id="user-cyd-0003", email="cyd.somerville@example.com", name="Cyd Somerville", phone="+44 161 496 0789"),
    Subject(id="user-dee-0004", email="dee.hopper@example.org", name="Dee Hopper", phone="+44 113 496 0321"),
    Subject(id="user-eve-0005", email="eve.noether@example.net", name="Eve Noether", phone="+44 117 496 0654"),
)
MODES = ("own", "mentions", "both")
"""own: the subject's records among others; mentions: the subject only in other people's documents,
which the agent redacts before the erasure; both."""
PLANTS = ("none", "tail", "slack")
"""Where the test puts the subject's bytes besides what chromadb wrote: nowhere; the unused capacity at
the end of data_level0.bin and length.bin; the unused link slots of a live element (the tail when the
segment has none)."""


def spellings(p: Subject) -> list[str]:
    """The plain spellings the oracle looks for: id, email, name, the phone as written, its digits with
    and without `+`, and its national form (trunk 0)."""
    assert p.email and p.name and p.phone
    digits = "".join(c for c in p.phone if c.isdigit())
    return [p.id, p.email, p.name, p.phone, digits, "+" + digits, "0" + digits[2:]]


@dataclass
class Store:
    """A store as the agent left it before the erasure, and what the test expects of it after."""

    path: Path
    subject: Subject
    space: str
    subject_docs: list[str] = field(default_factory=list)
    bystanders: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """record id -> (document, metadata) as the agent left them (mentions redacted)."""

    def subject_vectors(self) -> list[np.ndarray]:
        return [embed(d) for d in self.subject_docs]


def build(path: Path, n: int, people: int, who: int, mode: str, space: str, sync: int | None) -> Store:
    """A collection of `n` records of `people` persons round robin (the subject: person `who`), built
    with chromadb; in the mention modes every fifth bystander record names the subject and the agent
    then redacts it with `collection.update`."""
    cast = PEOPLE[:people]
    subject = cast[who]
    store = Store(path=path, subject=subject, space=space)
    hnsw: dict[str, Any] = {"space": space}
    if sync is not None:
        hnsw |= {"sync_threshold": sync, "batch_size": min(sync, 100)}
    ids, docs, metas, redact = [], [], [], []
    for i in range(n):
        owner = cast[i % people]
        if owner == subject and mode == "mentions":
            owner = cast[(i + 1) % people]
        if owner == subject:
            doc = (
                f"{subject.name} wrote entry {i}: zebra{i} lighthouse at dawn, reach her at {subject.email}"
                f" or {subject.phone}"
            )
            meta: dict[str, Any] = {SUBJECT_KEY: subject.id, "n": i}
            if i % 2:
                meta["email"] = subject.email
            store.subject_docs.append(doc)
        else:
            doc = f"{owner.id} logged item {i} walrus{i} harbour at noon"
            meta = {SUBJECT_KEY: owner.id, "n": i}
            if mode != "own" and i % 5 == 0:
                redact.append((f"r{i}", doc + " met [redacted]"))
                doc += f" met {subject.name} ({subject.email}, {subject.phone})"
            store.bystanders[f"r{i}"] = (doc, meta)
        ids.append(f"r{i}")
        docs.append(doc)
        metas.append(meta)
    with opened(path) as client:
        col = client.get_or_create_collection(
            "notes", embedding_function=hash_embedding(), configuration={"hnsw": hnsw}
        )
        for s in range(0, n, 300):
            col.add(ids=ids[s : s + 300], documents=docs[s : s + 300], metadatas=metas[s : s + 300])
    if redact:
        with opened(path) as client:
            col = client.get_collection("notes", embedding_function=hash_embedding())
            col.update(ids=[r for r, _ in redact], documents=[d for _, d in redact])
        for rid, doc in redact:
            store.bystanders[rid] = (doc, store.bystanders[rid][1])
    return store


# --- the oracle -----------------------------------------------------------------------------------------


def _near(data: bytes, v: np.ndarray, atol: float = 1e-5) -> bool:
    """Whether `data` read as float32 at any alignment holds `v` within `atol`."""
    for align in range(4):
        count = (len(data) - align) // 4
        if count < v.size:
            continue
        arr = np.frombuffer(data, dtype="<f4", count=count, offset=align)
        with np.errstate(invalid="ignore", over="ignore"):
            starts = np.nonzero(np.abs(arr[: count - v.size + 1] - v[0]) <= atol)[0]
        for start in starts:
            if np.allclose(arr[start : start + v.size], v, atol=atol, rtol=0):
                return True
    return False


def leftovers(store: Store) -> dict[str, list[str]]:
    """file -> what of the subject it holds: spellings found, and `vector` for any of their vectors."""
    needles = [s.lower().encode() for s in spellings(store.subject)]
    vectors = store.subject_vectors()
    out: dict[str, list[str]] = {}
    for f in sorted(p for p in store.path.rglob("*") if p.is_file()):
        data = f.read_bytes()
        low = data.lower()
        found = [n.decode() for n in needles if n in low]
        for v in vectors:
            unit = (v / np.linalg.norm(v)).astype(np.float32)
            if v.astype("<f4").tobytes() in data or _near(data, unit):
                found.append("vector")
                break
        if found:
            out[str(f.relative_to(store.path))] = found
    return out


# --- planting what hnswlib leaves in memory it never reads -------------------------------------------------


def _segment(path: Path) -> Path:
    (folder,) = [p for p in path.iterdir() if p.is_dir()]
    return folder


def _patch(file: Path, offset: int, blob: bytes) -> None:
    data = bytearray(file.read_bytes())
    if len(data) < offset + len(blob):
        data.extend(bytes(offset + len(blob) - len(data)))
    data[offset : offset + len(blob)] = blob
    file.write_bytes(bytes(data))


def plant(store: Store, where: str, at: int) -> None:
    """Put the subject's identifiers (and a vector of theirs, where it fits) where the index never reads."""
    if where == "none":
        return
    folder = _segment(store.path)
    header = (folder / "header.bin").read_bytes()
    count = int.from_bytes(header[20:28], "little")
    stride = int.from_bytes(header[28:36], "little")
    max_m0 = int.from_bytes(header[68:76], "little")
    words = "\0".join(spellings(store.subject)).encode()
    vectors = store.subject_vectors()
    if where == "slack" and count:
        data = (folder / "data_level0.bin").read_bytes()
        blob = store.subject.email.encode() if store.subject.email else b""
        for i in range(count):
            used = int.from_bytes(data[i * stride : i * stride + 2], "little")
            if 4 * (max_m0 - used) >= len(blob):
                _patch(folder / "data_level0.bin", i * stride + 4 + 4 * used, blob)
                return
    blob = words + b"".join(v.astype("<f4").tobytes() for v in vectors[:1])
    _patch(folder / "data_level0.bin", count * stride + at % max(1, stride), blob)
    _patch(folder / "length.bin", count * 4 + at % 64, words)


# --- checks -------------------------------------------------------------------------------------------------


def neighbours(store: Store, k: int, exclude: set[str]) -> tuple[dict[str, list[str]], dict[str, bytes]]:
    """For up to 12 bystander records: the ids of its `k` nearest records that are not in `exclude`;
    and every bystander's vector as Chroma returns it (float32 bytes).

    Each query asks for every record, ranked: HNSW's answers for a few neighbours move from one build
    of the graph to the next (Chroma builds it again from the log when it opens a collection below the
    threshold), a full ranking does not. For inner product (no metric) not even that holds: between two
    opens of the same untouched store 4 of 12 answers moved, and a full ranking leaves records out."""
    out: dict[str, list[str]] = {}
    with opened(store.path) as client:
        col = client.get_collection("notes", embedding_function=hash_embedding())
        total = col.count()
        for rid in sorted(store.bystanders)[:12]:
            got = col.query(query_embeddings=[embed(store.bystanders[rid][0])], n_results=total)["ids"][0]
            # HNSW is approximate: a full ranking can leave out a record or two (seen: 998 of 999).
            assert store.space == "ip" or len(got) >= total - max(2, total // 100)
            out[rid] = [x for x in got if x not in exclude][:k]
        got = col.get(ids=sorted(store.bystanders), include=["embeddings"])
        vectors = {
            rid: np.asarray(v, dtype="<f4").tobytes() for rid, v in zip(got["ids"], got["embeddings"], strict=True)
        }
    return out, vectors


def erase_once_and_check(store: Store, where: str = "none", at: int = 0, *, use_api: bool = True) -> None:
    """The bystanders' nearest neighbours, the subject's bytes planted (`where`, after the last client
    of the store closed: a client writes the segment again when it closes), one erasure, the checks."""
    subject_ids = {f"r{i}" for i in range(len(store.subject_docs) + len(store.bystanders))} - set(store.bystanders)
    near, vectors = neighbours(store, 3, subject_ids) if store.bystanders else ({}, {})
    target = target_for(store.path, use_api=use_api)
    fp = run.take(target, store.subject)
    plant(store, where, at)
    if where != "none":
        assert any(f.endswith(("data_level0.bin", "length.bin")) for f in leftovers(store))

    out = ERASER.erase(target, store.subject)

    assert all(o.after == 0 for o in out.values()), {t.value: o.after for t, o in out.items()}
    assert leftovers(store) == {}
    # The independent probes agree: all clear.
    assert [(r.method, r.residue) for r in run.probe(target, store.subject, fp) if r.failing()] == []
    with opened(store.path) as client:
        col = client.get_collection("notes", embedding_function=hash_embedding())
        assert col.count() == len(store.bystanders)
        got = col.get(include=["documents", "metadatas"])
        assert {
            rid: (doc, meta) for rid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        } == store.bystanders
    if store.bystanders:
        near_after, vectors_after = neighbours(store, 3, set())
        assert vectors_after == vectors
        if store.space == "ip":
            assert all(len(v) == min(3, len(store.bystanders)) for v in near_after.values()), near_after
        else:
            # Measured against the exact ranking of the bystanders' own vectors, not against the answer
            # before the erasure: HNSW may leave a record out of either answer (seen in CI: the third
            # neighbour missing from the ranking taken before the run).
            exact = exact_neighbours(vectors, store.space, 3, set(near_after))
            assert recall(near_after, exact) >= 0.9, (near_after, exact)
            assert recall(near, exact) >= 0.9, (near, exact)


def exact_neighbours(vectors: dict[str, bytes], space: str, k: int, queries: set[str]) -> dict[str, list[str]]:
    """The oracle: each query's `k` nearest bystanders by brute force over the vectors, in Chroma's
    distances (squared L2, or one minus the cosine)."""
    ids = sorted(vectors)
    matrix = np.stack([np.frombuffer(vectors[i], dtype="<f4").astype(np.float64) for i in ids])
    out: dict[str, list[str]] = {}
    for rid in queries:
        q = matrix[ids.index(rid)]
        if space == "l2":
            dist = ((matrix - q) ** 2).sum(axis=1)
        else:
            norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(q)
            dist = 1.0 - (matrix @ q) / np.where(norms == 0, 1.0, norms)
        out[rid] = [ids[j] for j in np.argsort(dist, kind="stable")[:k]]
    return out


def recall(answers: dict[str, list[str]], exact: dict[str, list[str]]) -> float:
    """The share of the exact neighbours that the index's answers hold."""
    wanted = sum(len(v) for v in exact.values())
    return sum(len(set(answers[rid]) & set(v)) for rid, v in exact.items()) / max(wanted, 1)


# --- the tests ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("use_api", [True, False], ids=["framework-api", "sql-only"])
@pytest.mark.parametrize("space", ["cosine", "l2", "ip"])
def test_unused_capacity_of_a_segment_with_nothing_to_drop_is_cleared(
    tmp_path: Path, space: str, use_api: bool
) -> None:
    """Five writes: the segment on disk has no element, only the capacity chromadb wrote; the subject's
    bytes there (as we found them) go in one run. (The framework's delete may write the segment again
    from its own memory, with or without them: without it, they are there for certain.)"""
    store = build(tmp_path / "chroma", 5, 3, 0, "own", space, None)

    erase_once_and_check(store, "tail", 17, use_api=use_api)


def test_redacted_mentions_leave_no_unredacted_copy_in_the_log(tmp_path: Path) -> None:
    """Fifty writes: the subject only in other people's documents, which the agent redacted; the log
    still held the text as first written."""
    store = build(tmp_path / "chroma", 50, 2, 1, "mentions", "l2", None)
    assert "chroma.sqlite3" in leftovers(store)

    erase_once_and_check(store)

    # The log rows that lost their metadata still give the HNSW segment what it reads: past the
    # threshold it applies them and persists, and every record answers for itself. The agent writes in
    # a process of its own: hnswlib persists buffers it never initialised (length.bin), so a process whose
    # heap held the subject can write them to disk (seen in a full run, where the worker's earlier tests
    # had the same subject in memory); what this test checks is that nothing on disk brings them back.
    later = (
        "from tests.chroma_fixtures import SUBJECT_KEY, hash_embedding, opened\n"
        f"with opened({str(store.path)!r}) as client:\n"
        "    col = client.get_collection('notes', embedding_function=hash_embedding())\n"
        "    col.add(ids=[f'later-{i}' for i in range(1100)],\n"
        "            documents=[f'later note {i} otter{i}' for i in range(1100)],\n"
        "            metadatas=[{SUBJECT_KEY: 'user-zed-0009'}] * 1100)\n"
    )
    subprocess.run([sys.executable, "-c", later], cwd=PROJECT_ROOT, check=True, timeout=300)
    with opened(store.path) as client:
        col = client.get_collection("notes", embedding_function=hash_embedding())
        assert col.count() == len(store.bystanders) + 1100
        for rid, (doc, meta) in store.bystanders.items():
            got = col.query(query_embeddings=[embed(doc)], n_results=1, include=["documents", "metadatas"])
            assert (got["ids"][0], got["documents"][0], got["metadatas"][0]) == ([rid], [doc], [meta])
    assert list(_segment(store.path).glob("index_metadata.pickle"))
    assert leftovers(store) == {}


def test_unused_link_slots_of_a_live_element_are_cleared(tmp_path: Path) -> None:
    """A collection persisted below 1,000 writes (sync threshold 100): live elements, with the subject's
    email in unused level-0 link slots of one of them."""
    store = build(tmp_path / "chroma", 260, 3, 2, "both", "cosine", 100)

    erase_once_and_check(store, "slack", 0)


@settings(
    max_examples=budget.examples(14),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    n=st.one_of(st.sampled_from([1, 5, 50, 300, 999]), st.integers(1, 999)),
    people=st.integers(2, len(PEOPLE)),
    who=st.integers(0, len(PEOPLE) - 1),
    mode=st.sampled_from(MODES),
    space=st.sampled_from(["cosine", "l2", "ip"]),
    sync=st.sampled_from([None, 100]),
    where=st.sampled_from(PLANTS),
    at=st.integers(0, 10_000),
)
@example(n=1, people=2, who=0, mode="own", space="cosine", sync=None, where="tail", at=3)
@example(n=5, people=3, who=1, mode="both", space="l2", sync=None, where="none", at=0)
@example(n=50, people=4, who=3, mode="mentions", space="ip", sync=None, where="tail", at=999)
@example(n=300, people=5, who=2, mode="own", space="l2", sync=100, where="slack", at=0)
@example(n=999, people=3, who=0, mode="both", space="cosine", sync=None, where="tail", at=40)
def test_one_run_leaves_nothing_of_the_subject_whatever_the_size(
    tmp_path_factory: pytest.TempPathFactory,
    n: int,
    people: int,
    who: int,
    mode: str,
    space: str,
    sync: int | None,
    where: str,
    at: int,
) -> None:
    path = tmp_path_factory.mktemp("small") / "chroma"
    try:
        store = build(path, n, people, who % people, mode, space, sync)
        erase_once_and_check(store, where, at)
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
