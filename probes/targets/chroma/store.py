"""Probing kind `chroma`: chroma.sqlite3 as the probe reads it, read-only (`file:...?mode=ro`), with its
own queries: collections and segments, live records, the log, and whose each one is."""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from erasure.errors import StoreError
from erasure.sqlite import connect
from erasure.subject import Subject
from probes.others_text import naming

DB = "chroma.sqlite3"
DOC_KEY = "chroma:document"


def fold_id(text: str) -> str:
    """An id as the probe compares it: NFKC, case folded, white space collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def open_store(root: Path) -> apsw.Connection:
    """A read-only connection to the store's chroma.sqlite3 (`StoreError` when there is none)."""
    db = root / DB
    if not db.is_file():
        raise StoreError(f"no Chroma store at {root}")
    return connect(db, readonly=True)


def has_table(conn: apsw.Connection, name: str) -> bool:
    """Whether the database has a table (or view) of that name."""
    return conn.execute("SELECT 1 FROM sqlite_schema WHERE name = ?", (name,)).fetchone() is not None


@dataclass
class Layout:
    """Collections and segments: collection id -> distance space; segment id -> collection id."""

    space: dict[str, str] = field(default_factory=dict)
    metadata_segment: dict[str, str] = field(default_factory=dict)
    vector_segment: dict[str, str] = field(default_factory=dict)


def _space_of(texts: list[str | None]) -> str:
    for text in texts:
        if not text:
            continue
        hit = re.search(r'"space"\s*:\s*"(cosine|l2|ip)"', text)
        if hit:
            return hit.group(1)
    return "l2"


def _layout(conn: apsw.Connection) -> Layout:
    out = Layout()
    cols = {str(r[1]) for r in conn.execute("PRAGMA table_info(collections)")}
    extra = ", ".join(c for c in ("schema_str", "config_json_str") if c in cols) or "NULL"
    legacy = {
        str(c): str(v)
        for c, v in conn.execute("SELECT collection_id, str_value FROM collection_metadata WHERE key = 'hnsw:space'")
    }
    for row in conn.execute(f"SELECT id, {extra} FROM collections"):
        cid = str(row[0])
        out.space[cid] = _space_of([*(None if v is None else str(v) for v in row[1:]), legacy.get(cid)])
    for sid, scope, cid in conn.execute("SELECT id, scope, collection FROM segments"):
        (out.vector_segment if str(scope) == "VECTOR" else out.metadata_segment)[str(sid)] = str(cid)
    return out


@dataclass
class Rec:
    rowid: int
    collection: str
    id: str
    owner: str | None
    document: str | None
    texts: list[str] = field(default_factory=list)
    """Every string of the record but its owner: the document and the other metadata values."""


def _records(conn: apsw.Connection, layout: Layout, key: str) -> list[Rec]:
    """Every live record: its rowid, collection, id, owner (`key` metadata), document and strings."""
    owners: dict[int, str] = {}
    docs: dict[int, str] = {}
    texts: dict[int, list[str]] = {}
    for rid, k, sv, iv in conn.execute("SELECT id, key, string_value, int_value FROM embedding_metadata"):
        r = int(rid)
        if k == key:
            v = sv if sv is not None else iv
            if v is not None:
                owners[r] = str(v)
            continue
        if sv is None:
            continue
        if k == DOC_KEY:
            docs[r] = str(sv)
        texts.setdefault(r, []).append(str(sv))
    return [
        Rec(
            int(rid),
            layout.metadata_segment.get(str(seg), "?"),
            str(eid),
            owners.get(int(rid)),
            docs.get(int(rid)),
            texts.get(int(rid), []),
        )
        for rid, seg, eid in conn.execute("SELECT id, segment_id, embedding_id FROM embeddings")
    ]


@dataclass
class LogRow:
    seq: int
    collection: str
    id: str
    vector: bytes | None
    meta: dict[str, Any] | None


def _log(conn: apsw.Connection) -> list[LogRow]:
    out = []
    for seq, topic, rid, vec, enc, meta in conn.execute(
        "SELECT seq_id, topic, id, vector, encoding, metadata FROM embeddings_queue"
    ):
        doc: dict[str, Any] | None = None
        if meta:
            try:
                parsed = json.loads(str(meta))
                doc = parsed if isinstance(parsed, dict) else None
            except ValueError:
                doc = None
        vector = bytes(vec) if vec is not None and (enc is None or str(enc).upper() == "FLOAT32") else None
        out.append(LogRow(int(seq), str(topic).rsplit("/", 1)[-1], str(rid), vector, doc))
    return out


@dataclass
class Seen:
    """The subject and the bystanders as one read of the store finds them."""

    layout: Layout
    records: list[Rec]
    mine: list[Rec]
    log: list[LogRow]
    log_mine: list[LogRow]
    ids: dict[str, set[str]]


def see(conn: apsw.Connection, key: str, subject: Subject, known: dict[str, list[str]] | None = None) -> Seen:
    layout = _layout(conn)
    want = fold_id(subject.id)
    records = _records(conn, layout, key)
    ids: dict[str, set[str]] = {c: set(v) for c, v in (known or {}).items()}
    mine = [
        r for r in records if (r.owner is not None and fold_id(r.owner) == want) or r.id in ids.get(r.collection, ())
    ]
    for r in mine:
        ids.setdefault(r.collection, set()).add(r.id)
    log = _log(conn)
    for row in log:
        owner = row.meta.get(key) if row.meta else None
        if owner is not None and not isinstance(owner, bool | float) and fold_id(str(owner)) == want:
            ids.setdefault(row.collection, set()).add(row.id)
    log_mine = [row for row in log if row.id in ids.get(row.collection, ())]
    return Seen(layout, records, mine, log, log_mine, ids)


def mentioned_texts(seen: Seen, words: list[str]) -> list[tuple[str, set[str]]]:
    """The strings (lower-cased) of other people's records that name the subject, one per record, each with
    the `words` (the subject's spellings) the decoded views read in it by the rule (`probes.others_text`:
    as the eraser reads a record, and as the views will read the files)."""
    mine = {r.rowid for r in seen.mine}
    others = [r for r in seen.records if r.rowid not in mine and r.texts]
    named = naming(["\n".join(r.texts) for r in others], [("identifier", w) for w in words])
    out = []
    for r, found in zip(others, named, strict=True):
        low = "\n".join(r.texts).lower()
        digits = re.sub(r"\D", "", low)
        if found or any(w in low or (w.lstrip("+").isdigit() and w.lstrip("+") in digits) for w in words):
            out.append((low, {words[i] for i in found}))
    return out
