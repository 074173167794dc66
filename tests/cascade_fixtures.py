"""Builders for cascade tests: a small real store with a subject, a bystander who shares topics with
them, derived frames that reference and quote the subject, a trained model, and a vaulted request."""

from __future__ import annotations

import fcntl
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.engine_db import Engine
from erasure.models import ErasureRequestEnvelope
from erasure.sqlite import checkpoint_truncate, transaction
from erasure.subject import Subject
from memory import corpora, subprocessors
from memory.embedder import HashingEmbedder, to_blob
from memory.ingest import ingest
from memory.items import MemoryItem
from memory.schema import create

if TYPE_CHECKING:
    from service.outcome import Result

SUBJECT = Subject(id="subj-ann-7731", email="annabel.quist@example.org", name="Annabel Quist", phone="+44 20 7946 0001")
BYSTANDER = Subject(id="user-bob-0042", email="bob.marsh@example.net", name="Bob Marsh", phone="+1 555 0100")
SUBJECT_PHRASE = "zebra-striped umbrella from Valparaiso"


@dataclass
class Built:
    home: Home
    processors: list[Any]


def _items(tmp: Path, processors: list[str]) -> list[MemoryItem]:
    att = tmp / "attachments"
    att.mkdir(parents=True, exist_ok=True)
    (att / "ann-passport.txt").write_text(f"Passport scan of {SUBJECT.name}, {SUBJECT_PHRASE}.\n")
    (att / "bob-receipt.txt").write_text("Receipt for a refund of a laptop, order 55821.\n")
    ann = SUBJECT.model_dump()
    bob = BYSTANDER.model_dump()
    return [
        MemoryItem.model_validate(
            {
                "source": "chat",
                "source_ref": "conv-1001",
                "subject": ann,
                "content": f"I need help with billing. My {SUBJECT_PHRASE} was charged twice. "
                "Please refund the second invoice.",
                "attachments": [str(att / "ann-passport.txt")],
                "training": True,
                "subprocessors": processors,
            }
        ),
        MemoryItem.model_validate(
            {
                "source": "email",
                "source_ref": "msg-2002",
                "subject": ann,
                "content": "Change my delivery address for the subscription. The old one was wrong.",
                "training": False,
            }
        ),
        MemoryItem.model_validate(
            {
                "source": "chat",
                "source_ref": "conv-3003",
                "subject": bob,
                "content": "I have a billing question too. The refund for my laptop never arrived.",
                "attachments": [str(att / "bob-receipt.txt")],
                "training": True,
            }
        ),
        MemoryItem.model_validate(
            {
                "source": "chat",
                "source_ref": "conv-4004",
                "subject": bob,
                "content": "Please send the invoice for my subscription again.",
                "training": True,
            }
        ),
    ]


def add_derived(home: Home, content: str, refs: list[int]) -> int:
    """A derived frame (the agent's summariser): references `refs`, with chunks, vectors, FTS and a
    recall-cache row, as the platform would write it."""
    conn = create(home.store_dir)
    emb = HashingEmbedder()
    now = datetime.now(UTC).isoformat()
    with transaction(conn):
        fid = int(
            cast(tuple[Any, ...], conn.execute("SELECT coalesce(max(frame_id), 0) + 1000 FROM frames").fetchone())[0]
        )
        conn.execute(
            "INSERT INTO frames(frame_id, kind, content, created_at) VALUES (?, 'derived', ?, ?)", (fid, content, now)
        )
        for r in refs:
            conn.execute("INSERT INTO frame_refs(frame_id, ref_frame_id) VALUES (?, ?)", (fid, r))
        cid = int(
            cast(
                tuple[Any, ...], conn.execute("SELECT coalesce(max(chunk_id), 0) + 1000 FROM frame_chunks").fetchone()
            )[0]
        )
        conn.execute(
            "INSERT INTO frame_chunks(chunk_id, frame_id, seq, content) VALUES (?, ?, 0, ?)", (cid, fid, content)
        )
        vec = to_blob(emb.embed([content])[0])
        conn.execute("INSERT INTO frame_vectors(frame_id, embedding) VALUES (?, ?)", (fid, vec))
        conn.execute("INSERT INTO chunk_vectors(chunk_id, embedding) VALUES (?, ?)", (cid, vec))
        conn.execute("INSERT INTO frames_fts(rowid, content) VALUES (?, ?)", (fid, content))
        conn.execute(
            "INSERT INTO recall_cache(frame_id, query, answer, created_at) VALUES (?, ?, ?, ?)",
            (fid, "what happened?", content[:80], now),
        )
    checkpoint_truncate(conn)
    conn.close()
    return fid


def summary_frame(home: Home, subject_id: str) -> int:
    conn = create(home.store_dir)
    try:
        return int(
            cast(
                tuple[Any, ...],
                conn.execute(
                    "SELECT min(frame_id) FROM frames WHERE subject_id = ? AND kind = 'summary'", (subject_id,)
                ).fetchone(),
            )[0]
        )
    finally:
        conn.close()


def build_store(home: Home, tmp: Path, *, journal: str = "wal", processors: list[Any] | None = None) -> Built:
    """Subject + bystander, derived frames (one referencing both, one quoting the subject by name, one
    second-order), a model trained on the corpus, then more training data."""
    conn = create(home.store_dir, journal_mode=journal)  # type: ignore[arg-type]
    names: list[str] = []
    if processors:
        subprocessors.register_demo(conn, processors)
        names = [p.name for p in processors]
    items = _items(tmp, names)
    ingest(conn, home.store_dir, items[:1] + items[2:3])
    corpora.freeze_and_train(conn, home.store_dir, "assistant-sft", "model-2026-01", "base-7b")
    ingest(conn, home.store_dir, items[1:2] + items[3:])
    conn.close()
    ann, bob = summary_frame(home, SUBJECT.id), summary_frame(home, BYSTANDER.id)
    d1 = add_derived(home, f"Weekly digest: billing complaints, including the {SUBJECT_PHRASE}.", [ann, bob])
    add_derived(home, f"Escalations: {SUBJECT.name} asked about a refund.", [])
    add_derived(home, "Quarterly roll-up of weekly digests.", [d1])
    add_derived(home, "Bystander-only digest: laptop refunds are slow.", [bob])
    return Built(home, processors or [])


def submit(
    home: Home,
    request_id: str = "req-ann-1",
    subject: Subject = SUBJECT,
    data_classes: list[str] | None = None,
    tenant: str = "default",
) -> ErasureRequestEnvelope:
    body: dict[str, Any] = {
        "request_id": request_id,
        "tenant_id": tenant,
        "subject": subject.model_dump(exclude_none=True),
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=2)).isoformat(),
        "requester_identity_proof_ref": "idv-case-77",
        "reason": "data subject request via privacy portal",
    }
    if data_classes is not None:
        body["data_classes"] = data_classes
    env = ErasureRequestEnvelope.model_validate(body)
    engine = open_engine(home.engine_db)
    try:
        request_records.submit(engine, env, now=datetime.now(UTC))
    finally:
        engine.close()
    return env


TABLES_BY_SUBJECT = {
    "working_sessions": "subject_id",
    "frames": "subject_id",
    "raw_archive": "subject_id",
    "blobs": "subject_id",
    "ft_examples": "subject_id",
    "subprocessor_records": "subject_id",
    "audit_vault": "subject_id",
}


def owned_counts(home: Home, subject: Subject) -> dict[str, int]:
    """Per table, rows that belong to `subject` (through its own keys), read with a plain query."""
    conn = create(home.store_dir)
    try:
        out = {
            t: int(
                cast(
                    tuple[Any, ...], conn.execute(f"SELECT count(*) FROM {t} WHERE {c} = ?", (subject.id,)).fetchone()
                )[0]
            )
            for t, c in TABLES_BY_SUBJECT.items()
        }
        # Corpora are cumulative versions: count the distinct examples, not their copies per version.
        out["ft_examples"] = int(
            cast(
                tuple[Any, ...],
                conn.execute(
                    "SELECT count(DISTINCT source || '/' || source_ref) FROM ft_examples WHERE subject_id = ?",
                    (subject.id,),
                ).fetchone(),
            )[0]
        )
        out["entities"] = sum(
            int(
                cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM kg_entities WHERE name = ?", (i,)).fetchone())[
                    0
                ]
            )
            for i in subject.identifiers()
        )
        return out
    finally:
        conn.close()


def store_bytes(home: Home) -> bytes:
    """Every byte of every file under the store directory."""
    return b"".join(p.read_bytes() for p in sorted(home.store_dir.rglob("*")) if p.is_file())


def dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


def memory_items(tmp: Path, processors: list[str] | None = None) -> list[MemoryItem]:
    """The four items `build_store` ingests (the subject's two, then the bystander's two, in store
    order), for re-ingest tests."""
    items = _items(tmp, processors or [])
    return [items[0], items[1], items[2], items[3]]


def set_journal_mode(home: Home, mode: str) -> None:
    """Put the built store in `mode` ("wal" or "delete"). `memory.schema.create` on an existing store
    switches it to its default (WAL), and the builders above open the store through it: call this
    after them, and open the store with `erasure.sqlite.connect` (not `create`) afterwards."""
    from erasure.sqlite import connect
    from memory.schema import db_path

    conn = connect(db_path(home.store_dir), journal_mode=mode)  # type: ignore[arg-type]
    conn.close()


def store_lock_free(h: Home) -> bool:
    """Whether another process could take the store's lock now (flock: per open file description)."""
    with open(h.engine_dir / "locks" / "store.lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


def run_direct(h: Home, request_ids: list[str]) -> dict[str, Result]:
    """`service.cascade.run_requests` without Prefect (`service.stages.direct`), as an entry point: on
    a run engine of its own (`Engine.session`), which its stages borrow."""
    from service.cascade import run_requests
    from service.stages import direct

    with Engine.session(h.engine_db) as engine:
        return run_requests(engine, h, request_ids, direct(h, engine))
