"""Test helpers for the `chroma` target kind: a real Chroma `PersistentClient` memory built with the
framework (chromadb 1.5), a deterministic local embedding function (no model download), and the
framework's own delete, for the tests and the bench.

The memory: three collections with the default HNSW settings (`notes` cosine, `facts` l2, `prefs` ip;
`sync_threshold` 1000, so the index files hold the first thousands of vectors and the rest sits in
the log, `embeddings_queue`, as in any agent's store), records of one subject and two bystanders
round robin, the subject's ids in `notes` naming them (`<user_id>/note-<n>`), one record of the
subject under a case variant of their id, one bystander record in `facts` that names the subject (a
mention), and a collection `scratch` (small sync threshold) that held the subject too and was dropped
with `delete_collection()`, which leaves its segment folder on disk.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from erasure.subject import Subject

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

DIM = 64
SUBJECT = Subject(id="user-ada-0001", email="ada.lovelace@example.org", name="Ada Lovelace", phone="+44 20 7946 0123")
BYSTANDERS = ("user-bob-0002", "user-cyd-0003")
SUBJECT_KEY = "user_id"
COLLECTIONS = {"notes": "cosine", "facts": "l2", "prefs": "ip"}
MENTION_ID = "facts-mention"
MENTION_TEXT = "Bob met Ada Lovelace at the analytical engine meetup and liked her notes on loops"


@lru_cache(maxsize=65536)
def _token_vector(token: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


def embed(text: str) -> np.ndarray:
    """A dense, deterministic float32 embedding: the sum of a seeded random vector per token."""
    v = np.zeros(DIM, dtype=np.float32)
    for tok in text.lower().split():
        v += _token_vector(tok)
    return v


def _embedding_function() -> Any:
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    @register_embedding_function
    class HashEmbedding(EmbeddingFunction[Documents]):
        """chromadb's EmbeddingFunction protocol over `embed` (local, deterministic, no download)."""

        def __init__(self, dim: int = DIM) -> None:
            self.dim = dim

        def __call__(self, input: Documents) -> Embeddings:
            return [embed(t) for t in input]

        @staticmethod
        def name() -> str:
            return "erasure-test-hash"

        def get_config(self) -> dict[str, Any]:
            return {"dim": self.dim}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> HashEmbedding:
            return HashEmbedding(int(config.get("dim", DIM)))

    return HashEmbedding


@lru_cache(maxsize=1)
def embedding_function_class() -> Any:
    return _embedding_function()


def hash_embedding() -> Any:
    """An instance of the registered local embedding function."""
    return embedding_function_class()()


def client(path: Path) -> Any:
    """A PersistentClient on `path`, telemetry off."""
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def reopen(path: Path) -> Any:
    """What an agent does to see a store changed by another process: drop chromadb's in-process cache
    of the store (its HNSW indexes live there) and open a new client."""
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    return client(path)


@contextmanager
def opened(path: Path) -> Iterator[Any]:
    c = reopen(path)
    try:
        yield c
    finally:
        c.close()


@dataclass
class Record:
    collection: str
    id: str
    document: str
    metadata: dict[str, Any]

    @property
    def embedding(self) -> np.ndarray:
        return embed(self.document)


@dataclass
class Memory:
    """What was written: every record by owner, and the distinctive strings of the subject."""

    path: Path
    records: list[Record] = field(default_factory=list)

    def of_subject(self) -> list[Record]:
        return [r for r in self.records if str(r.metadata.get(SUBJECT_KEY, "")).lower() == SUBJECT.id.lower()]

    def of_bystanders(self) -> list[Record]:
        mine = {id(r) for r in self.of_subject()}
        return [r for r in self.records if id(r) not in mine]

    def subject_strings(self) -> list[str]:
        """Identifiers in the spellings a byte scan must not find (checked case-insensitively), and
        distinctive content of the subject's records."""
        out = [
            SUBJECT.id,
            SUBJECT.email or "",
            SUBJECT.name or "",
            SUBJECT.phone or "",
            "442079460123",
            "+442079460123",
            "02079460123",
        ]
        out += sorted({w for r in self.of_subject() for w in r.document.split() if w.startswith("zebra")})
        return [s for s in out if s]


def _document(owner: str, i: int, collection: str) -> str:
    if owner == SUBJECT.id:
        return (
            f"{SUBJECT.name} wrote {collection} entry {i}: zebra{collection}{i} lighthouse at dawn, "
            f"reach her at {SUBJECT.email} or {SUBJECT.phone}"
        )
    return f"{owner} logged {collection} item {i} walrus{collection}{i} harbour at noon"


def build_memory(path: Path, per_collection: int = 1300, *, batch: int = 400) -> Memory:
    """Build the memory described in the module docstring with the real framework."""
    mem = Memory(path=path)
    people = (SUBJECT.id, *BYSTANDERS)
    c = reopen(path)
    try:
        ef = hash_embedding()
        for name, space in COLLECTIONS.items():
            col = c.get_or_create_collection(name, embedding_function=ef, configuration={"hnsw": {"space": space}})
            recs: list[Record] = []
            for i in range(per_collection):
                owner = people[i % len(people)]
                rid = f"{owner}/note-{i}" if name == "notes" else f"{name}-{i}"
                meta: dict[str, Any] = {SUBJECT_KEY: owner, "n": i, "kind": name}
                if owner == SUBJECT.id and i % 2:
                    meta["email"] = SUBJECT.email
                recs.append(Record(name, rid, _document(owner, i, name), meta))
            if name == "prefs":
                recs.append(
                    Record(
                        name,
                        "prefs-variant",
                        _document(SUBJECT.id, per_collection, name),
                        {SUBJECT_KEY: SUBJECT.id.upper(), "n": per_collection, "kind": name},
                    )
                )
            if name == "facts":
                recs.append(
                    Record(
                        name, MENTION_ID, MENTION_TEXT, {SUBJECT_KEY: BYSTANDERS[0], "n": per_collection, "kind": name}
                    )
                )
            for s in range(0, len(recs), batch):
                part = recs[s : s + batch]
                col.add(
                    ids=[r.id for r in part], documents=[r.document for r in part], metadatas=[r.metadata for r in part]
                )
            mem.records += recs
        scratch = c.get_or_create_collection(
            "scratch",
            embedding_function=ef,
            configuration={"hnsw": {"space": "l2", "sync_threshold": 50, "batch_size": 50}},
        )
        srecs = [
            Record("scratch", f"scratch-{i}", _document(people[i % 3], i, "scratch"), {SUBJECT_KEY: people[i % 3]})
            for i in range(120)
        ]
        scratch.add(
            ids=[r.id for r in srecs], documents=[r.document for r in srecs], metadatas=[r.metadata for r in srecs]
        )
        c.delete_collection("scratch")
    finally:
        c.close()
    return mem


def framework_delete(path: Path, subject_id: str = SUBJECT.id) -> int:
    """What a team does with the framework alone: `collection.delete(where={"user_id": id})` in every
    collection. Returns how many records it removed."""
    removed = 0
    c = reopen(path)
    try:
        for col in c.list_collections():
            col = c.get_collection(col.name, embedding_function=hash_embedding())
            before = col.count()
            col.delete(where={SUBJECT_KEY: subject_id})
            removed += before - col.count()
    finally:
        c.close()
    return removed


def target_for(path: Path, **extra: Any) -> Any:
    """A `Target` of kind chroma for the store at `path`."""
    from erasure.targets import Target

    return Target.model_validate(
        {
            "name": "kb-vectors",
            "kind": "chroma",
            "base_dir": path.parent,
            "path": str(path),
            "subject_key": SUBJECT_KEY,
            **extra,
        }
    )
