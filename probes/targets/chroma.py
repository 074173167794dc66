"""Probing kind `chroma`: a Chroma `PersistentClient` directory, read with the probes' own code.

Nothing here goes through chromadb nor shares code with the erasing side: chroma.sqlite3 is opened
read-only (`file:...?mode=ro`), the HNSW files and the id map are parsed here, and so is the FTS5
full-text index. Methods, after the erasure (each one's residue counts the subject's things):

- episodic `sqlite:records`: records whose `subject_key` metadata names the subject (NFKC + case
  folding), or whose record id the fingerprint saw as theirs; bystanders: every other record.
- episodic `sqlite:log`: rows of the log (`embeddings_queue`) of those ids, or whose metadata names the
  subject.
- vectors `hnsw:ids`: live HNSW elements whose label the id map gives to one of the subject's ids, and
  ids of the subject anywhere in an id map; bystanders: other live elements.
- vectors `hnsw:vectors`: elements of any data_level0.bin under the directory (live, tombstoned, in
  orphaned or half-swapped folders) whose vector has the direction of one of the subject's vectors
  (cosine similarity above 1 - 1e-5: a cosine space stores vectors normalised, so bytes alone would
  miss them); bystander twins (the same vector for someone else) are left out of the fingerprint.
- vectors `log:vectors`: log rows whose float32 vector has such a direction.
- vectors `hnsw:orphan-folders`: folders holding index files that no vector segment row names (a
  dropped collection's folder, the leftovers of an interrupted rewrite): their ids are gone or stale,
  and nobody can show their vectors are not the subject's.
- derivatives `fts:rows`: full-text rows of the subject's records; bystanders: the other rows.
- derivatives `fts:postings`: the subject's record rowids in any doclist of any leaf page of the
  FTS5 index (decoded here: the trigrams of a deleted document stay in older segments until a full
  merge), unless the rowid now belongs to someone else's live record.

The byte scan (probes.targets.run) gets: every spelling of every identifier (caseless), windows of
the subject's documents that no bystander's document contains, and 128-byte pieces of the subject's
vectors as the store holds them (the HNSW element's bytes: normalised for cosine; the log's raw
float32), without pieces any bystander vector has.
"""

from __future__ import annotations

import base64
import json
import pickle
import re
import struct
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import apsw
import numpy as np

from erasure.errors import ConfigError, StoreError
from erasure.sqlite import connect
from erasure.subject import Subject
from erasure.targets import Target
from erasure.tiers import Tier
from probes.identity import spellings
from probes.model import Measurement
from probes.needles import (
    MIN_IDENTIFIER_BYTES,
    VECTOR_PIECE_BYTES,
    NeedleKind,
    NeedleSet,
    plain_windows,
    vector_pieces,
)
from probes.targets.base import TargetFingerprint

KIND = "chroma"
DB = "chroma.sqlite3"
DOC_KEY = "chroma:document"
MAX_CONTENT_GROUPS = 256
MAX_VECTOR_GROUPS = 64
MAX_STATE_VECTORS = 2048
"""Vectors of the subject kept (per dimension) for the direction probes, sampled evenly."""
SAME_DIRECTION = 1.0 - 1e-5
_HEADER = struct.Struct("<iQQQQQQiiQQQdQ")
_FTS_DATA = "embedding_fulltext_search_data"
_FTS_CONTENT = "embedding_fulltext_search_content"
NO_POPULATION = "none"


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _settings(target: Target) -> tuple[Path, str]:
    root = target.path("path", required=True)
    key = target.text("subject_key", required=True)
    if root is None or not key:
        raise ConfigError(f"targets: target {target.name!r} ({KIND}): keys 'path' and 'subject_key' are required")
    return root, key


def _open(root: Path) -> apsw.Connection:
    db = root / DB
    if not db.is_file():
        raise StoreError(f"no Chroma store at {root}")
    return connect(db, readonly=True)


def _has_table(conn: apsw.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_schema WHERE name = ?", (name,)).fetchone() is not None


# --- the store as the probe reads it ----------------------------------------------------------------


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
    legacy = {str(c): str(v) for c, v in conn.execute(
        "SELECT collection_id, str_value FROM collection_metadata WHERE key = 'hnsw:space'")}
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
    return [Rec(int(rid), layout.metadata_segment.get(str(seg), "?"), str(eid), owners.get(int(rid)),
                docs.get(int(rid)), texts.get(int(rid), []))
            for rid, seg, eid in conn.execute("SELECT id, segment_id, embedding_id FROM embeddings")]


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
            "SELECT seq_id, topic, id, vector, encoding, metadata FROM embeddings_queue"):
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


# --- HNSW files (hnswlib's persisted format, as Chroma 1.x writes it) -----------------------------


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError("index_metadata.pickle holds an object")


@dataclass
class Index:
    folder: Path
    dim: int
    flags: np.ndarray
    labels: np.ndarray
    vectors: np.ndarray
    label_to_id: dict[int, str]
    id_names: set[str]
    """Every id the id map names (id_to_label, label_to_id, id_to_seq_id)."""


def _index(folder: Path) -> Index | None:
    """The index in `folder` (None when it has none or it cannot be read)."""
    try:
        head = (folder / "header.bin").read_bytes()
        data = (folder / "data_level0.bin").read_bytes()
    except OSError:
        return None
    if len(head) < _HEADER.size:
        return None
    h = _HEADER.unpack_from(head)
    count, stride, label_off, data_off = int(h[3]), int(h[4]), int(h[5]), int(h[6])
    dim = (label_off - data_off) // 4
    if stride <= 0 or dim <= 0 or label_off + 8 != stride:
        return None
    count = min(count, len(data) // stride)
    raw = np.frombuffer(data[:count * stride], dtype=np.uint8).reshape(count, stride)
    flags = np.ascontiguousarray(raw[:, 0:4]).view("<u4").reshape(-1)
    labels = np.ascontiguousarray(raw[:, label_off:label_off + 8]).view("<u8").reshape(-1)
    vectors = np.ascontiguousarray(raw[:, data_off:data_off + 4 * dim]).view("<f4")
    label_to_id: dict[int, str] = {}
    names: set[str] = set()
    try:
        with open(folder / "index_metadata.pickle", "rb") as f:
            idmap = _DataOnly(f).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError):
        idmap = None
    if isinstance(idmap, dict):
        for k, v in (idmap.get("label_to_id") or {}).items():
            label_to_id[int(k)] = str(v)
        names = {str(k) for k in (idmap.get("id_to_label") or {})} | set(label_to_id.values()) | {
            str(k) for k in (idmap.get("id_to_seq_id") or {})}
    return Index(folder, dim, flags, labels, vectors, label_to_id, names)


def _index_folders(root: Path) -> Iterator[Path]:
    """Every folder under the directory that holds an HNSW header (segment, orphan, half-swapped)."""
    for p in sorted(root.rglob("header.bin")):
        yield p.parent


# --- FTS5 index: the rowids in its doclists ----------------------------------------------------------


def _varint(b: bytes, i: int) -> tuple[int, int]:
    v = 0
    for _ in range(8):
        c = b[i]
        i += 1
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, i
    return (v << 8) | b[i], i + 1


def _leaf_rowids(b: bytes) -> set[int]:
    """The rowids of every doclist entry on one FTS5 leaf page (delete markers included)."""
    out: set[int] = set()
    if len(b) < 4:
        return out
    first_rowid, footer = struct.unpack_from(">HH", b)
    footer = min(footer, len(b))
    terms: list[int] = []
    i, off = footer, 0
    while i < len(b):
        d, i = _varint(b, i)
        off += d
        terms.append(off)
    starts: list[tuple[int, int]] = []
    if first_rowid:
        starts.append((first_rowid, terms[0] if terms else footer))
    for k, t in enumerate(terms):
        if k == 0:
            n, j = _varint(b, t)
        else:
            _prefix, j = _varint(b, t)
            n, j = _varint(b, j)
        starts.append((j + n, terms[k + 1] if k + 1 < len(terms) else footer))
    for j, end in starts:
        if j >= end:
            continue
        rowid, j = _varint(b, j)
        out.add(rowid)
        while j < end:
            size, j = _varint(b, j)
            j += size >> 1
            if j >= end:
                break
            delta, j = _varint(b, j)
            rowid += delta
            out.add(rowid)
    return out


def fts_rowids(conn: apsw.Connection) -> set[int]:
    """Every rowid any leaf page of the full-text index holds a posting or a delete marker for."""
    out: set[int] = set()
    if not _has_table(conn, _FTS_DATA):
        return out
    for rowid, block in conn.execute(f"SELECT id, block FROM {_FTS_DATA} WHERE id > 10"):
        r = int(rowid)
        segid, dlidx, height = r >> 37, (r >> 36) & 1, (r >> 31) & 0x1F
        if 0 < segid < (1 << 16) and dlidx == 0 and height == 0 and block is not None:
            try:
                out |= _leaf_rowids(bytes(block))
            except IndexError:
                continue
    return out


# --- vectors by direction -----------------------------------------------------------------------------


def _unit(m: np.ndarray) -> np.ndarray:
    m = np.nan_to_num(m.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    n = np.linalg.norm(m, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return np.asarray(m / n)


def _same_direction(candidates: np.ndarray, subject: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """For each candidate row, whether a subject row has its direction."""
    out = np.zeros(len(candidates), dtype=bool)
    if len(candidates) == 0 or len(subject) == 0:
        return out
    s = _unit(subject)
    for start in range(0, len(candidates), chunk):
        c = _unit(candidates[start:start + chunk])
        out[start:start + chunk] = (c @ s.T).max(axis=1) >= SAME_DIRECTION
    return out


def _enc(vectors: list[bytes]) -> list[str]:
    return [base64.b64encode(v).decode() for v in vectors]


def _dec(items: list[str], dim: int) -> np.ndarray:
    rows = [np.frombuffer(base64.b64decode(s), dtype="<f4") for s in items]
    rows = [r for r in rows if r.size == dim]
    return np.vstack(rows) if rows else np.zeros((0, dim), dtype=np.float32)


def _even(items: list[Any], n: int) -> list[Any]:
    if len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


# --- the probe ---------------------------------------------------------------------------------------


@dataclass
class Seen:
    """The subject and the bystanders as one read of the store finds them."""

    layout: Layout
    records: list[Rec]
    mine: list[Rec]
    log: list[LogRow]
    log_mine: list[LogRow]
    ids: dict[str, set[str]]


def _see(conn: apsw.Connection, key: str, subject: Subject, known: dict[str, list[str]] | None = None) -> Seen:
    layout = _layout(conn)
    want = _fold(subject.id)
    records = _records(conn, layout, key)
    ids: dict[str, set[str]] = {c: set(v) for c, v in (known or {}).items()}
    mine = [r for r in records if (r.owner is not None and _fold(r.owner) == want) or r.id in ids.get(r.collection, ())]
    for r in mine:
        ids.setdefault(r.collection, set()).add(r.id)
    log = _log(conn)
    for row in log:
        owner = row.meta.get(key) if row.meta else None
        if owner is not None and not isinstance(owner, bool | float) and _fold(str(owner)) == want:
            ids.setdefault(row.collection, set()).add(row.id)
    log_mine = [row for row in log if row.id in ids.get(row.collection, ())]
    return Seen(layout, records, mine, log, log_mine, ids)


def _mentions(seen: Seen, words: list[str]) -> list[str]:
    """The strings (lower-cased) of other people's records that name the subject, one per record."""
    mine = {r.rowid for r in seen.mine}
    out = []
    for r in seen.records:
        if r.rowid in mine or not r.texts:
            continue
        low = "\n".join(r.texts).lower()
        digits = re.sub(r"\D", "", low)
        if any(w in low or (w.lstrip("+").isdigit() and w.lstrip("+") in digits) for w in words):
            out.append(low)
    return out


class ChromaProbe:
    """The probing side of kind `chroma` (see the module docstring)."""

    kind: ClassVar[str] = KIND

    def files(self, target: Target) -> list[Path]:
        root, _key = _settings(target)
        return [root]

    def fingerprint(self, target: Target, subject: Subject) -> TargetFingerprint:
        root, key = _settings(target)
        conn = _open(root)
        try:
            seen = _see(conn, key, subject)
            return self._fingerprint(target, subject, root, conn, seen)
        finally:
            conn.close()

    def _fingerprint(self, target: Target, subject: Subject, root: Path, conn: apsw.Connection,
                     seen: Seen) -> TargetFingerprint:
        want = _fold(subject.id)
        needles = NeedleSet()
        store_ids = sorted({subject.id, *(r.owner for r in seen.mine if r.owner is not None)})
        others = {(r.owner or "").lower() for r in seen.records if r.owner is not None and _fold(r.owner) != want}
        words: list[str] = []
        for kind, spelling in spellings(subject, store_ids):
            data = spelling.encode()
            if len(data) < MIN_IDENTIFIER_BYTES:
                needles.bump(f"identifier_withheld_short:{kind}")
                continue
            words.append(spelling.lower())
            if any(spelling.lower() in o for o in others):
                needles.add_group(NeedleKind.shared_identifier, [data], caseless=True)
            else:
                needles.add_group(NeedleKind.identifier, [data], caseless=True)
        mine_rows = {r.rowid for r in seen.mine}
        bystander_docs = [r.document for r in seen.records if r.rowid not in mine_rows and r.document]
        self._content(conn, [r.document for r in seen.mine if r.document], bystander_docs, needles)
        vectors, live_byst, byst_pieces, byst_vectors = self._vectors(root, seen)
        mine_seqs = {row.seq for row in seen.log_mine}
        log_byst = [row.vector for row in seen.log if row.vector and row.seq not in mine_seqs]
        for v in log_byst:
            byst_pieces |= _pieces_at(v)
        raw = [row.vector for row in seen.log_mine if row.vector]
        stored: list[bytes] = vectors
        state_vectors: dict[int, list[bytes]] = {}
        twins = 0
        for v in [*stored, *raw]:
            dim = len(v) // 4
            arr = np.frombuffer(v, dtype="<f4").reshape(1, dim)
            pool = byst_vectors.get(dim)
            if pool is not None and bool(_same_direction(pool, arr).any()):
                twins += 1
                continue
            state_vectors.setdefault(dim, []).append(v)
        needles.bump("vector_withheld_twin", twins)
        kept = 0
        for v in _even(sorted({*stored, *raw}), MAX_VECTOR_GROUPS * 2):
            if kept >= MAX_VECTOR_GROUPS * 2:
                break
            pieces = [p for p in vector_pieces(v) if p not in byst_pieces]
            if pieces and needles.add_group(NeedleKind.vector, pieces):
                kept += 1
        fts_rows = 0
        if _has_table(conn, _FTS_CONTENT):
            row = conn.execute(f"SELECT count(*) FROM {_FTS_CONTENT}").fetchone()
            fts_rows = int(row[0]) if row else 0
        subject_fts = self._subject_fts_rows(conn, mine_rows)
        ids = {c: sorted(v) for c, v in seen.ids.items()}
        state = {"rows": sorted(mine_rows), "ids": ids,
                 "vectors": {str(d): _enc(_even(vs, MAX_STATE_VECTORS)) for d, vs in state_vectors.items()},
                 "words": words}
        before = self._measure(root, conn, subject, key_of(target), state)
        mentions = _mentions(seen, words)
        mentioned = [n.group for n in needles.needles if n.kind is NeedleKind.identifier
                     and any(n.data.decode().lower() in text for text in mentions)]
        return TargetFingerprint(
            target=target.name, needles=needles.needles,
            bystanders={"records": len(seen.records) - len(seen.mine), "hnsw-live": live_byst,
                        "fts-rows": fts_rows - subject_fts, "collections": len(seen.layout.space)},
            subject_before={m.method: m.residue for _t, m in before},
            mentions=len(mentions), mentioned_groups=mentioned, state=state)

    @staticmethod
    def _content(conn: apsw.Connection, docs: list[str], bystander_docs: list[str], out: NeedleSet) -> None:
        haystack = "\0".join(d.lower() for d in bystander_docs)
        kept = 0
        for doc in docs:
            for window in plain_windows(doc):
                if kept >= MAX_CONTENT_GROUPS:
                    out.bump("content_not_sampled")
                elif window.lower() in haystack:
                    out.bump("content_withheld_shared")
                elif out.add_group(NeedleKind.content, [window.encode()]):
                    kept += 1

    @staticmethod
    def _vectors(root: Path, seen: Seen) -> tuple[list[bytes], int, set[bytes], dict[int, np.ndarray]]:
        """The subject's vectors as the HNSW files hold them; live bystander elements; the pieces and
        vectors of every bystander element."""
        mine: list[bytes] = []
        live_byst = 0
        pieces: set[bytes] = set()
        byst: dict[int, list[np.ndarray]] = {}
        for folder in _index_folders(root):
            idx = _index(folder)
            if idx is None:
                continue
            cid = seen.layout.vector_segment.get(folder.name)
            subject_ids = seen.ids.get(cid, set()) if cid else set()
            for i in range(len(idx.labels)):
                rid = idx.label_to_id.get(int(idx.labels[i]))
                live = not (int(idx.flags[i]) & 0x10000)
                vec = idx.vectors[i].tobytes()
                if rid is not None and rid in subject_ids:
                    mine.append(vec)
                elif live and rid is not None and cid is not None:
                    live_byst += 1
                    pieces |= _pieces_at(vec)
                    byst.setdefault(idx.dim, []).append(idx.vectors[i])
        return mine, live_byst, pieces, {d: np.vstack(v) for d, v in byst.items()}

    @staticmethod
    def _subject_fts_rows(conn: apsw.Connection, rows: set[int]) -> int:
        if not rows or not _has_table(conn, _FTS_CONTENT):
            return 0
        row = conn.execute(f"SELECT count(*) FROM {_FTS_CONTENT} WHERE id IN (SELECT value FROM json_each(?))",
                           (json.dumps(sorted(rows)),)).fetchone()
        return int(row[0]) if row else 0

    def measure(self, target: Target, subject: Subject, fp: TargetFingerprint) -> list[tuple[str, Measurement]]:
        root, key = _settings(target)
        conn = _open(root)
        try:
            return self._measure(root, conn, subject, key, fp.state)
        finally:
            conn.close()

    def _measure(self, root: Path, conn: apsw.Connection, subject: Subject, key: str,
                 state: dict[str, Any]) -> list[tuple[str, Measurement]]:
        known: dict[str, list[str]] = state.get("ids") or {}
        seen = _see(conn, key, subject, known)
        mine_rows = {r.rowid for r in seen.mine}
        live_rows = {r.rowid for r in seen.records}
        others_rows = live_rows - mine_rows
        out: list[tuple[str, Measurement]] = []
        out.append((Tier.episodic, Measurement("sqlite:records", len(seen.mine), "records",
                                               len(seen.records) - len(seen.mine))))
        out.append((Tier.episodic, Measurement("sqlite:log", len(seen.log_mine), NO_POPULATION, 0)))
        # vectors
        subject_vectors = {int(d): _dec(v, int(d)) for d, v in (state.get("vectors") or {}).items()}
        id_hits = live_byst = direction_hits = orphans = 0
        all_ids: set[str] = set().union(*seen.ids.values()) if seen.ids else set()
        for folder in _index_folders(root):
            idx = _index(folder)
            if idx is None:
                continue
            cid = seen.layout.vector_segment.get(folder.name)
            if cid is None:
                orphans += 1
            id_hits += len(idx.id_names & all_ids)
            for i in range(len(idx.labels)):
                rid = idx.label_to_id.get(int(idx.labels[i]))
                if rid is not None and not (int(idx.flags[i]) & 0x10000) and cid is not None and \
                        rid not in seen.ids.get(cid, ()):
                    live_byst += 1
            sv = subject_vectors.get(idx.dim)
            if sv is not None and len(idx.vectors):
                direction_hits += int(_same_direction(idx.vectors, sv).sum())
        out.append((Tier.vectors, Measurement("hnsw:ids", id_hits, "hnsw-live", live_byst)))
        out.append((Tier.vectors, Measurement("hnsw:vectors", direction_hits, NO_POPULATION, 0)))
        log_hits = 0
        for dim, sv in subject_vectors.items():
            rows = [np.frombuffer(r.vector, dtype="<f4") for r in seen.log if r.vector and len(r.vector) == 4 * dim]
            if rows:
                log_hits += int(_same_direction(np.vstack(rows), sv).sum())
        out.append((Tier.vectors, Measurement("log:vectors", log_hits, NO_POPULATION, 0)))
        out.append((Tier.vectors, Measurement("hnsw:orphan-folders", orphans, NO_POPULATION, 0)))
        # derivatives
        subject_rows: set[int] = {int(x) for x in state.get("rows") or []} | mine_rows
        fts_total = 0
        fts_mine = 0
        if _has_table(conn, _FTS_CONTENT):
            row = conn.execute(f"SELECT count(*) FROM {_FTS_CONTENT}").fetchone()
            fts_total = int(row[0]) if row else 0
            fts_mine = self._subject_fts_rows(conn, subject_rows - others_rows)
        out.append((Tier.derivatives, Measurement("fts:rows", fts_mine, "fts-rows", fts_total - fts_mine)))
        postings = len((fts_rowids(conn) & subject_rows) - others_rows)
        out.append((Tier.derivatives, Measurement("fts:postings", postings, NO_POPULATION, 0)))
        return out


def key_of(target: Target) -> str:
    return _settings(target)[1]


def _pieces_at(vec: bytes) -> set[bytes]:
    return {vec[s:s + VECTOR_PIECE_BYTES] for s in range(0, len(vec) - VECTOR_PIECE_BYTES + 1, VECTOR_PIECE_BYTES)}


PROBE = ChromaProbe()
