"""Kind `chroma`: a Chroma `PersistentClient` directory (chromadb 1.x, Rust core), every collection in it.

Configuration (targets.toml):

    path = "chroma"             # the PersistentClient directory (chroma.sqlite3 + one folder per HNSW segment)
    subject_key = "user_id"     # the metadata field naming the subject (compared after NFKC + case folding)
    use_api = true              # optional: delete through the installed chromadb first (see below)

Tiers: episodic = the subject's records (documents and metadata in chroma.sqlite3, and their copies in
the log, `embeddings_queue`), vectors = their vectors (HNSW files of each collection's vector segment,
and the log), derivatives = the full-text index (`embedding_fulltext_search`, FTS5 trigram).

What the framework's delete (`collection.delete(where={"user_id": ...})`) leaves, measured with
chromadb 1.5.9 on stores built by it (tests/test_target_chroma.py shows each with the probe):

- the log: every write is first a row of `embeddings_queue` (id, float32 vector, metadata JSON with the
  document). Chroma purges rows only once every segment of the collection has applied them, and the
  HNSW segment applies them to disk only every `sync_threshold` (1000) records: the last up to 999
  writes of each collection, the subject's among them, stay in the log with text and vector, and the
  delete adds rows naming their record ids. Freed pages of chroma.sqlite3 keep purged rows (Chroma
  does not set secure_delete).
- the HNSW files: a delete only sets a flag on the element in `data_level0.bin` (the float32 vector,
  normalised for cosine, stays, and the element stays linked in the graph); when fewer than
  `sync_threshold` operations followed, not even that: the element and its id in
  `index_metadata.pickle` stay live on disk. For l2 and ip spaces `length.bin` is written from
  uninitialised memory (hnswlib's `malloc`): we found a vector of the subject in it. Below the
  threshold a collection's segment files are the ones Chroma wrote when it created them: room for 100
  elements, none used, from uninitialised memory too: we found the subject's id, name, email and phone
  there, written by the agent's process or by the framework's delete in ours.
- a document the agent edits (`collection.update`, e.g. to redact a person it names) stays in the log
  as first written until the HNSW segment applies the row: below the threshold, for good.
- the full-text index: FTS5 records a delete as a marker in a new segment; the trigram postings of the
  deleted documents stay in the older segments until a full merge, and in freed pages after it.
- `delete_collection()` drops the rows but leaves the segment folder with all its vectors.

What this module does, every run (so a rerun after a crash anywhere finishes the job):

1. (`use_api`, default true) deletes the subject's records through the installed chromadb, when it is
   importable and would open this store without migrating it (its migrations equal the store's); else
   it does what that delete does to chroma.sqlite3 itself (step 2 always runs, as a sweep).
2. in one transaction on chroma.sqlite3 (`secure_delete=ON`): deletes the subject's remaining rows
   (embeddings, embedding_metadata, embedding_metadata_array, full-text rows), every log row of the
   subject (their ids, or metadata naming them), log rows every segment has applied (what Chroma's own
   purge does, which it only does per collection on the next write), log rows of dropped collections,
   and log rows the metadata segment applied whose record no longer exists (the deletes the framework
   logged carry the erased ids; step 3 drops those ids from the index, so replaying none of their
   rows is what replaying all of them would do). The log's newest row is kept (Chroma numbers the
   next write after it) and blanked to a delete of no record (id '') when it was one of those. A log
   row the metadata segment applied whose metadata names the subject (someone else's document, as it
   was before the agent redacted it) keeps its id, operation and vector, all the HNSW segment reads,
   and loses its metadata.
3. rewrites each collection's HNSW segment without the subject's elements, without tombstones (deleted
   elements, whoever's) and without elements whose id no longer exists: the survivors keep their
   labels, vectors and links; a survivor that lost a neighbour is relinked to the nearest survivors
   among the lost neighbour's neighbours (graph repair); `length.bin` keeps the survivors' norms for
   cosine and is zeroed for l2/ip (it is never read there). The new folder is written beside the old
   one and swapped in by two renames (a crash in between is finished by the next run), while a write
   lock on chroma.sqlite3 keeps Chroma writers out. A segment is written whole (no capacity past the
   survivors, unused link slots and level padding zero) whenever its files differ by a byte from that,
   even with nothing to drop, so no byte of it is one the index does not read; one already so written
   is left alone (a rerun rewrites nothing).
4. removes orphaned segment folders (no segment row names them: dropped collections).
5. rebuilds the full-text index (`'rebuild'`: from the remaining documents only), re-runs `ANALYZE`
   where `sqlite_stat4` keeps sampled index keys, then `VACUUM` (freed pages and b-tree gaps) and, for
   a WAL store, a TRUNCATE checkpoint.

The agent: Chroma is not process-safe (its docs; chroma-core/chroma#3792). A process that keeps a
PersistentClient open holds each collection's HNSW index in memory (chromadb caches it per path even
across `PersistentClient(...)` calls): after an erasure it still answers queries with the erased ids
(without documents: those come from SQLite), and a write would persist its stale index over ours. We
wait on its SQLite locks, never fail on them, and leave the files loadable; the agent must then drop
its client: `chromadb.api.client.SharedSystemClient.clear_system_cache()` and a new `PersistentClient`
(or a restart), before it writes again. The same holds for this process: step 1 closes its client.

`count` reports the subject's items and, beside them, deleted data still on disk whoever it was
(HNSW elements and log rows of records that no longer exist, orphaned folders): once a record id is
gone nothing shows whose it was, so the framework's delete leaves a non-zero count and an erasure
leaves zero. What `count` cannot attribute is the full-text postings of deleted rows (the index would
have to be decoded): step 5 rebuilds the index on every run instead, and the probe decodes it.

Other people's records that name the subject (document or metadata) are counted (`mentions`), never
changed (their copies in the log lose their metadata once applied: step 2). Counts only in what is
returned.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import struct
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import apsw
import numpy as np

if TYPE_CHECKING:
    from chromadb.api.client import Client

from erasure.errors import ConfigError, StoreError
from erasure.files import inside_folder
from erasure.identity import Identity, fold
from erasure.sqlite import connect, transaction
from erasure.subject import Subject
from erasure.targets import Target
from erasure.tiers import Tier
from tasks.targets.base import WAIT_SECONDS, TierOutcome, rebuild_pages, retry_busy

KIND = "chroma"
DB_FILE = "chroma.sqlite3"
PICKLE_FILE = "index_metadata.pickle"
HEADER_FILE = "header.bin"
DATA_FILE = "data_level0.bin"
LENGTH_FILE = "length.bin"
LINKS_FILE = "link_lists.bin"
HNSW_FILES = (HEADER_FILE, DATA_FILE, LENGTH_FILE, LINKS_FILE)
NEW_SUFFIX = ".erasure-new"
OLD_SUFFIX = ".erasure-old"
VECTOR_SCOPE = "VECTOR"
DOCUMENT_KEY = "chroma:document"
OP_DELETE = 3
DELETE_BATCH = 500
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_DELETED = 0x10000
_HEADER = struct.Struct("<iQQQQQQiiQQQdQ")
"""hnswlib's persisted header as Chroma writes it: version, offsetLevel0, max_elements,
cur_element_count, size_data_per_element, label_offset, offsetData, maxlevel, enterpoint_node, maxM,
maxM0, M, mult, ef_construction (100 bytes)."""

T = TypeVar("T")


@dataclass(frozen=True)
class Config:
    """A chroma target's keys, checked."""

    root: Path
    subject_key: str
    use_api: bool

    @property
    def db(self) -> Path:
        return self.root / DB_FILE


def config(target: Target) -> Config:
    """The target's keys (`ConfigError` naming the key that is wrong)."""
    where = f"targets: target {target.name!r} ({target.kind})"
    root = target.path("path", required=True)
    assert root is not None
    key = target.text("subject_key", required=True) or ""
    if not key or key.startswith(("#", "chroma:")) or "\x00" in key:
        raise ConfigError(f"{where}: key 'subject_key' must be a Chroma metadata key"
                          " (not empty, not starting with # or chroma:)")
    use_api = target.value("use_api", True)
    if not isinstance(use_api, bool):
        raise ConfigError(f"{where}: key 'use_api' must be true or false")
    return Config(root=root, subject_key=key, use_api=use_api)


def _open(cfg: Config) -> apsw.Connection:
    if not cfg.db.is_file():
        raise StoreError(f"no Chroma store at {cfg.root} ({DB_FILE} is missing)")
    return connect(cfg.db)


# --- the store's layout ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collection:
    id: str
    name: str
    space: str
    metadata_segments: tuple[str, ...]
    vector_segments: tuple[str, ...]


def _space(config_json: str | None, schema_json: str | None, legacy: str | None) -> str:
    """The collection's distance space: schema (chromadb >= 1.1), then configuration, then the legacy
    `hnsw:space` metadata, then Chroma's default (l2)."""
    def find(node: Any) -> str | None:
        if isinstance(node, dict):
            vi = node.get("vector_index")
            if isinstance(vi, dict) and isinstance(vi.get("config"), dict):
                sp = vi["config"].get("space")
                if isinstance(sp, str):
                    return sp
            for v in node.values():
                found = find(v)
                if found:
                    return found
        return None

    for text in (schema_json, config_json):
        if text:
            try:
                doc = json.loads(text)
            except ValueError:
                continue
            sp = find(doc)
            if sp is None and isinstance(doc, dict):
                hnsw = doc.get("hnsw") or doc.get("hnsw_configuration")
                if isinstance(hnsw, dict) and isinstance(hnsw.get("space"), str):
                    sp = hnsw["space"]
            if sp:
                return sp
    return legacy or "l2"


def _collections(conn: apsw.Connection) -> list[Collection]:
    cols = {str(r[1]) for r in conn.execute("PRAGMA table_info(collections)")}
    schema = "schema_str" if "schema_str" in cols else "NULL"
    conf = "config_json_str" if "config_json_str" in cols else "NULL"
    legacy = {str(cid): str(v) for cid, v in conn.execute(
        "SELECT collection_id, str_value FROM collection_metadata WHERE key = 'hnsw:space'")}
    segs: dict[str, list[tuple[str, str]]] = {}
    for sid, scope, cid in conn.execute("SELECT id, scope, collection FROM segments"):
        segs.setdefault(str(cid), []).append((str(sid), str(scope)))
    out = []
    for cid, name, cj, sj in conn.execute(f"SELECT id, name, {conf}, {schema} FROM collections ORDER BY name"):
        mine = segs.get(str(cid), [])
        out.append(Collection(
            id=str(cid), name=str(name), space=_space(cj, sj, legacy.get(str(cid))),
            metadata_segments=tuple(s for s, scope in mine if scope != VECTOR_SCOPE),
            vector_segments=tuple(s for s, scope in mine if scope == VECTOR_SCOPE)))
    return out


def _segment_folder(root: Path, segment: str) -> Path:
    """The folder of a vector segment: its id comes from the `segments` rows, so it must name a folder
    inside the store's (`erasure.files.inside_folder`; `StoreError` naming "chroma segment id")."""
    return inside_folder(root, segment, "chroma segment id")


def _check_segments(root: Path, collections: list[Collection]) -> None:
    """Every vector segment's folder lies inside the store's: checked before anything is deleted."""
    for col in collections:
        for seg in col.vector_segments:
            _segment_folder(root, seg)


def _topic_collection(topic: str) -> str:
    """`persistent://<tenant>/<database>/<collection id>` -> the collection id."""
    return topic.rsplit("/", 1)[-1]


# --- who is the subject in this store ---------------------------------------------------------------


@dataclass
class Found:
    """The subject's footprint in chroma.sqlite3 (internal ids only)."""

    rows: list[int] = field(default_factory=list)
    """embeddings.id (= full-text rowid) of the subject's live records."""
    ids: dict[str, set[str]] = field(default_factory=dict)
    """collection id -> the subject's record ids (live, or in the log)."""
    queue: list[int] = field(default_factory=list)
    """seq_id of the log rows of the subject."""
    queue_vectors: int = 0


def _is_subject(value: Any, want: str) -> bool:
    if value is None or isinstance(value, bool | float):
        return False
    return fold(str(value)) == want


def _resolve(conn: apsw.Connection, cfg: Config, subject: Subject, collections: list[Collection],
             known: dict[str, set[str]] | None = None) -> Found:
    """The subject's live records (metadata `subject_key` equal to their id after NFKC and case
    folding), their record ids, and every log row of those ids or whose metadata names them; `known`
    adds record ids found earlier (before a delete removed their rows). A log row of a record that no
    longer exists whose id names the subject (ids such as `<user_id>/note-1`) counts as theirs."""
    want = fold(subject.id)
    found = Found()
    for cid, ids in (known or {}).items():
        found.ids.setdefault(cid, set()).update(ids)
    seg_to_col = {s: c.id for c in collections for s in c.metadata_segments}
    values = [v for (v,) in conn.execute(
        "SELECT DISTINCT string_value FROM embedding_metadata WHERE key = ? AND string_value IS NOT NULL",
        (cfg.subject_key,)) if _is_subject(v, want)]
    ints = [v for (v,) in conn.execute(
        "SELECT DISTINCT int_value FROM embedding_metadata WHERE key = ? AND int_value IS NOT NULL",
        (cfg.subject_key,)) if _is_subject(v, want)]
    for column, vals in (("string_value", values), ("int_value", ints)):
        for v in vals:
            for rowid, seg, eid in conn.execute(
                    f"SELECT e.id, e.segment_id, e.embedding_id FROM embedding_metadata m JOIN embeddings e"
                    f" ON e.id = m.id WHERE m.key = ? AND m.{column} = ?", (cfg.subject_key, v)):
                found.rows.append(int(rowid))
                found.ids.setdefault(seg_to_col.get(str(seg), "?"), set()).add(str(eid))
    found.rows = sorted(set(found.rows))
    rows = list(conn.execute("SELECT seq_id, topic, id, metadata, vector IS NOT NULL FROM embeddings_queue"))
    for _seq, topic, rid, meta, _v in rows:
        if meta and cfg.subject_key in str(meta):
            try:
                doc = json.loads(str(meta))
            except ValueError:
                continue
            if isinstance(doc, dict) and _is_subject(doc.get(cfg.subject_key), want):
                found.ids.setdefault(_topic_collection(str(topic)), set()).add(str(rid))
    ident = Identity.of(subject)
    live: dict[str, set[str]] | None = None
    for seq, topic, rid, _meta, has_vector in rows:
        cid = _topic_collection(str(topic))
        if str(rid) not in found.ids.get(cid, ()) and ident.found_in(str(rid)):
            if live is None:
                live = _live_record_ids(conn, collections)
            if str(rid) not in live.get(cid, ()):
                found.ids.setdefault(cid, set()).add(str(rid))
        if str(rid) in found.ids.get(cid, ()):
            found.queue.append(int(seq))
            found.queue_vectors += int(bool(has_vector))
    return found


def _live_record_ids(conn: apsw.Connection, collections: list[Collection]) -> dict[str, set[str]]:
    seg_to_col = {s: c.id for c in collections for s in c.metadata_segments}
    out: dict[str, set[str]] = {}
    for seg, eid in conn.execute("SELECT segment_id, embedding_id FROM embeddings"):
        out.setdefault(seg_to_col.get(str(seg), "?"), set()).add(str(eid))
    return out


# --- the HNSW files ---------------------------------------------------------------------------------


class _NoGlobals(pickle.Unpickler):
    """Chroma's id map holds dicts, strings and ints only: refuse anything else (no code from a file)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError("unexpected object in index_metadata.pickle")


def _read_pickle(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            doc = _NoGlobals(f).load()
    except FileNotFoundError:
        return None
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise StoreError(f"unreadable HNSW id map {path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise StoreError(f"unreadable HNSW id map {path}")
    return doc


@dataclass
class Hnsw:
    """One persisted hnswlib index as Chroma 1.x writes it (header.bin, data_level0.bin, length.bin,
    link_lists.bin) and its id map."""

    header: list[Any]
    data: np.ndarray
    """(elements, stride) uint8."""
    lengths: bytes
    upper: list[bytes]
    """Per element: its upper-level link lists (levels x (4 + maxM*4) bytes)."""
    idmap: dict[str, Any] | None

    @property
    def count(self) -> int:
        return int(self.header[3])

    @property
    def stride(self) -> int:
        return int(self.header[4])

    @property
    def label_offset(self) -> int:
        return int(self.header[5])

    @property
    def data_offset(self) -> int:
        return int(self.header[6])

    @property
    def max_m(self) -> int:
        return int(self.header[9])

    @property
    def max_m0(self) -> int:
        return int(self.header[10])

    @property
    def dim(self) -> int:
        return (self.label_offset - self.data_offset) // 4

    @property
    def upper_size(self) -> int:
        return 4 + 4 * self.max_m

    def flags(self) -> np.ndarray:
        return np.ascontiguousarray(self.data[:, 0:4]).view("<u4").reshape(-1)

    def labels(self) -> np.ndarray:
        lo = self.label_offset
        return np.ascontiguousarray(self.data[:, lo:lo + 8]).view("<u8").reshape(-1)

    def vectors(self) -> np.ndarray:
        do = self.data_offset
        return np.ascontiguousarray(self.data[:, do:do + 4 * self.dim]).view("<f4")

    def links0(self) -> np.ndarray:
        return np.ascontiguousarray(self.data[:, 4:4 + 4 * self.max_m0]).view("<u4")

    def level(self, i: int) -> int:
        return len(self.upper[i]) // self.upper_size

    def upper_links(self, i: int, lvl: int) -> list[int]:
        start = (lvl - 1) * self.upper_size
        block = self.upper[i][start:start + self.upper_size]
        (n,) = struct.unpack_from("<I", block)
        return list(struct.unpack_from(f"<{n}I", block, 4))


def _read_hnsw(folder: Path) -> Hnsw | None:
    """The index in `folder`, or None when it has none yet (a collection below its sync threshold)."""
    if not (folder / HEADER_FILE).is_file():
        return None
    raw = (folder / HEADER_FILE).read_bytes()
    if len(raw) < _HEADER.size:
        raise StoreError(f"unreadable HNSW header in {folder}")
    header = list(_HEADER.unpack_from(raw))
    if header[0] != 1 or header[1] != 0 or header[5] + 8 != header[4]:
        raise StoreError(f"HNSW index in {folder} has a layout this version does not know")
    n, stride = int(header[3]), int(header[4])
    data = np.frombuffer((folder / DATA_FILE).read_bytes()[:n * stride], dtype=np.uint8)
    lengths = (folder / LENGTH_FILE).read_bytes()[:n * 4]
    links = (folder / LINKS_FILE).read_bytes()
    if data.size != n * stride or len(lengths) != n * 4:
        raise StoreError(f"truncated HNSW index in {folder}")
    upper: list[bytes] = []
    pos = 0
    for _ in range(n):
        (size,) = struct.unpack_from("<I", links, pos)
        upper.append(links[pos + 4:pos + 4 + size])
        pos += 4 + size
    return Hnsw(header=header, data=data.reshape(n, stride), lengths=lengths, upper=upper,
                idmap=_read_pickle(folder / PICKLE_FILE))


def _label_to_id(h: Hnsw) -> dict[int, str]:
    if h.idmap is None:
        return {}
    raw = h.idmap.get("label_to_id") or {}
    return {int(k): str(v) for k, v in raw.items()}


@dataclass(frozen=True)
class HnswCount:
    subject: int = 0
    tombstones: int = 0
    unmapped: int = 0
    """Live elements whose label maps to no record that exists."""


def _classify(h: Hnsw, subject_ids: set[str], live_ids: set[str] | None) -> tuple[np.ndarray, HnswCount]:
    """A keep-mask over the elements, and what is dropped."""
    flags = h.flags()
    labels = h.labels()
    names = _label_to_id(h)
    deleted = (flags & _DELETED) != 0
    keep = ~deleted
    subj = unmapped = 0
    if h.idmap is not None:
        for i in np.nonzero(keep)[0]:
            rid = names.get(int(labels[i]))
            if rid is not None and rid in subject_ids:
                keep[i] = False
                subj += 1
            elif rid is None or (live_ids is not None and rid not in live_ids):
                keep[i] = False
                unmapped += 1
    return keep, HnswCount(subject=subj, tombstones=int(deleted.sum()), unmapped=unmapped)


def _distances(space: str, vecs: np.ndarray, u: int, cand: list[int]) -> np.ndarray:
    a = vecs[u].astype(np.float64)
    b = vecs[cand].astype(np.float64)
    if space == "l2":
        return np.asarray(((b - a) ** 2).sum(axis=1))
    return np.asarray(-(b @ a))


def _compact(h: Hnsw, keep: np.ndarray, space: str) -> tuple[Hnsw, int]:
    """The index without the dropped elements: survivors renumbered in order, their labels, vectors and
    links kept, a link to a dropped element replaced by the nearest survivors among that element's own
    neighbours (two hops). Returns the new index and how many link lists were repaired."""
    n = h.count
    new_id = np.full(n, -1, dtype=np.int64)
    kept = np.nonzero(keep)[0]
    new_id[kept] = np.arange(kept.size)
    vecs = h.vectors()
    links0 = h.links0()
    flags = h.flags()
    counts0 = flags & 0xFFFF
    repaired = 0

    def relink(u: int, old: list[int], lvl: int, cap: int) -> list[int]:
        nonlocal repaired
        good = [int(new_id[x]) for x in old if x < n and new_id[x] >= 0]
        lost = [x for x in old if x < n and new_id[x] < 0]
        if not lost:
            return good
        repaired += 1
        present = {x for x in old}
        cand: set[int] = set()
        frontier = lost
        for _hop in range(2):
            nxt: list[int] = []
            for x in frontier:
                nb = (links0[x, :counts0[x]].tolist() if lvl == 0
                      else h.upper_links(x, lvl) if h.level(x) >= lvl else [])
                for y in nb:
                    if y >= n or y == u or y in present:
                        continue
                    if new_id[y] >= 0:
                        cand.add(int(y))
                    else:
                        nxt.append(int(y))
            frontier = nxt
            if len(cand) >= cap - len(good):
                break
        picked: list[int] = []
        if cand:
            order = sorted(cand)
            dist = _distances(space, vecs, u, order)
            picked = [order[i] for i in np.argsort(dist, kind="stable")[:max(0, cap - len(good))]]
        if not good and not picked and kept.size > 1 and lvl == 0:
            others = [int(x) for x in kept if x != u]
            dist = _distances(space, vecs, u, others)
            picked = [others[i] for i in np.argsort(dist, kind="stable")[:cap]]
        return good + [int(new_id[x]) for x in picked]

    data = np.ascontiguousarray(h.data[kept])
    # Level 0, vectorised for the elements that lost no neighbour; the others are relinked one by one.
    width = h.max_m0
    slots = np.arange(width)[None, :] < counts0[kept][:, None]
    mapped = np.where(slots, new_id[np.minimum(links0[kept], max(n - 1, 0))], 0)
    lost = (slots & ((mapped < 0) | (links0[kept] >= n))).any(axis=1)
    rows = np.zeros((kept.size, 1 + width), dtype="<u4")
    rows[:, 0] = counts0[kept]
    rows[:, 1:] = np.where(slots, mapped, 0)
    for new in np.nonzero(lost)[0].tolist():
        old = int(kept[new])
        l0 = relink(old, links0[old, :counts0[old]].tolist(), 0, width)
        rows[new] = 0
        rows[new, 0] = len(l0)
        rows[new, 1:1 + len(l0)] = l0
    data[:, 0:4 * (1 + width)] = rows.view(np.uint8).reshape(kept.size, 4 * (1 + width))
    upper: list[bytes] = []
    for old in kept.tolist():
        levels = []
        for lvl in range(1, h.level(old) + 1):
            ll = relink(old, h.upper_links(old, lvl), lvl, h.max_m)
            levels.append(struct.pack(f"<I{len(ll)}I", len(ll), *ll).ljust(h.upper_size, b"\0"))
        upper.append(b"".join(levels))
    header = list(h.header)
    header[3] = int(kept.size)
    if kept.size == 0:
        header[7], header[8] = -1, -1
    else:
        ep_old = int(header[8]) if 0 <= int(header[8]) < n else -1
        if ep_old < 0 or new_id[ep_old] < 0:
            ep_old = max(kept.tolist(), key=lambda i: (h.level(i), -i))
        header[8] = int(new_id[ep_old])
        header[7] = h.level(ep_old)
    # Cosine: the survivors' norms (get() multiplies them back in). l2/ip: never read, and written by
    # hnswlib from uninitialised memory: zeros.
    lengths = np.frombuffer(h.lengths, dtype="<f4")[kept].tobytes() if space == "cosine" else bytes(4 * kept.size)
    out = Hnsw(header=header, data=data, lengths=lengths, upper=upper, idmap=None)
    return out, repaired


def _write_folder(folder: Path, files: dict[str, bytes], extra: Iterable[Path]) -> None:
    folder.mkdir()
    for name, blob in files.items():
        with open(folder / name, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
    for p in extra:
        shutil.copy2(p, folder / p.name)
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _finish_swaps(root: Path) -> int:
    """Complete or undo a swap a crash interrupted; returns how many folders it touched."""
    touched = 0
    for p in sorted(root.iterdir()):
        if not p.is_dir():
            continue
        if p.name.endswith(NEW_SUFFIX):
            base = root / p.name[:-len(NEW_SUFFIX)]
            if base.exists():
                shutil.rmtree(p)          # written but never swapped in: the next run writes it again
            elif (root / (base.name + OLD_SUFFIX)).exists():
                os.rename(p, base)        # crashed between the two renames: finish
            else:
                shutil.rmtree(p)
            touched += 1
        elif p.name.endswith(OLD_SUFFIX):
            base = root / p.name[:-len(OLD_SUFFIX)]
            if base.exists():
                shutil.rmtree(p)
            else:
                os.rename(p, base)
            touched += 1
    if touched:
        _fsync_dir(root)
    return touched


def _encode(h: Hnsw, idmap: dict[str, Any] | None) -> dict[str, bytes]:
    """The segment's files as this module writes them: every byte is the live elements' (no capacity
    past them, unused link slots and level padding zero), so equal indexes are equal bytes."""
    files = {
        HEADER_FILE: _HEADER.pack(*h.header),
        DATA_FILE: h.data.tobytes(),
        LENGTH_FILE: h.lengths,
        LINKS_FILE: b"".join(struct.pack("<I", len(u)) + u for u in h.upper),
    }
    if idmap is not None:
        files[PICKLE_FILE] = pickle.dumps(idmap, protocol=3)
    return files


def _same_files(folder: Path, files: dict[str, bytes]) -> bool:
    known = {*HNSW_FILES, PICKLE_FILE}
    present = {p.name for p in folder.iterdir() if p.is_file() and p.name in known}
    return present == set(files) and all(
        (folder / name).stat().st_size == len(blob) and (folder / name).read_bytes() == blob
        for name, blob in files.items())


def _rewrite_segment(root: Path, segment: str, space: str, subject_ids: set[str],
                     live_ids: set[str] | None) -> dict[str, int]:
    """One vector segment without the subject's elements, tombstones and unmapped elements, written
    whole whenever its files differ from that: hnswlib writes capacity it never initialised (chromadb
    creates every segment with room for 100 elements, from memory that held whatever the process had
    freed: we found the subject's identifiers there in stores below the sync threshold), so a segment
    with nothing to drop is rewritten too, unless it already is byte for byte what we would write."""
    folder = _segment_folder(root, segment)
    h = _read_hnsw(folder)
    if h is None:
        return {}
    keep, c = _classify(h, subject_ids, live_ids)
    new, repaired = _compact(h, keep, space)
    idmap = h.idmap
    if idmap is not None:
        live = {int(x) for x in new.labels().tolist()}
        idmap = dict(idmap)
        idmap["id_to_label"] = {str(k): int(v) for k, v in (idmap.get("id_to_label") or {}).items() if int(v) in live}
        idmap["label_to_id"] = {int(k): str(v) for k, v in (idmap.get("label_to_id") or {}).items() if int(k) in live}
        ids = set(idmap["id_to_label"])
        idmap["id_to_seq_id"] = {str(k): int(v) for k, v in (idmap.get("id_to_seq_id") or {}).items() if str(k) in ids}
    files = _encode(new, idmap)
    if _same_files(folder, files):
        return {"hnsw_elements_kept": int(new.count)}
    staging = root / (segment + NEW_SUFFIX)
    retired = root / (segment + OLD_SUFFIX)
    known = {*HNSW_FILES, PICKLE_FILE}
    extra = [p for p in folder.iterdir() if p.is_file() and p.name not in known and not p.name.startswith(".tmp")]
    _write_folder(staging, files, extra)
    os.rename(folder, retired)
    os.rename(staging, folder)
    _fsync_dir(root)
    shutil.rmtree(retired)
    return {"hnsw_elements_kept": int(new.count), "hnsw_subject_dropped": c.subject,
            "hnsw_tombstones_dropped": c.tombstones, "hnsw_unmapped_dropped": c.unmapped,
            "hnsw_links_repaired": repaired, "hnsw_segments_rewritten": 1}


def _orphan_folders(root: Path, segments: set[str]) -> list[Path]:
    return [p for p in sorted(root.iterdir()) if p.is_dir() and _UUID.fullmatch(p.name) and p.name not in segments]


# --- the framework's API ----------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _installed_migrations() -> frozenset[tuple[str, int, str]] | None:
    """The migrations the installed chromadb applies to a new store (None: chromadb not installed)."""
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError:
        return None
    with tempfile.TemporaryDirectory(prefix="erasure-chroma-") as tmp:
        client = _persistent_client(chromadb, tmp, Settings(anonymized_telemetry=False))
        client.close()
        conn = connect(Path(tmp) / DB_FILE, readonly=True)
        try:
            return _migrations(conn)
        finally:
            conn.close()


def _migrations(conn: apsw.Connection) -> frozenset[tuple[str, int, str]]:
    return frozenset((str(d), int(v), str(h)) for d, v, h in conn.execute("SELECT dir, version, hash FROM migrations"))


def _retry_locked(fn: Callable[[], T], *, seconds: float = WAIT_SECONDS) -> T:
    """Run a chromadb call, retrying while its SQLite reports the agent's lock."""
    deadline = time.monotonic() + seconds
    pause = 0.05
    while True:
        try:
            return fn()
        except Exception as exc:
            if "database is locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 1.0)


def _api_delete(cfg: Config, found: Found, collections: list[Collection]) -> int:
    """Delete the subject's records through chromadb (only when it is installed and would not migrate
    the store). Returns the records deleted, or -1 when the API was not used."""
    if not cfg.use_api or not any(found.ids.values()):
        return -1
    installed = _installed_migrations()
    if installed is None:
        return -1
    conn = connect(cfg.db, readonly=True)
    try:
        if _migrations(conn) != installed:
            return -1
    finally:
        conn.close()
    names = {c.id: c.name for c in collections}
    return _retry_locked(lambda: _api_session(cfg.root, names, found.ids))


def _api_session(root: Path, names: dict[str, str], ids: dict[str, set[str]]) -> int:
    """One client session: open, delete by id in batches, close (a rerun after "database is locked"
    anywhere, even while the client starts, deletes what is left: deletes by id are idempotent)."""
    import chromadb
    from chromadb.config import Settings

    client = _persistent_client(chromadb, str(root), Settings(anonymized_telemetry=False))
    deleted = 0
    try:
        for cid, wanted in sorted(ids.items()):
            if cid not in names or not wanted:
                continue
            # No embedding function is needed to delete by id; None keeps chromadb from building the
            # agent's own (its configuration stays in the store as it was).
            col = client.get_collection(names[cid], embedding_function=None)
            batch = sorted(wanted)
            before = col.count()
            for s in range(0, len(batch), DELETE_BATCH):
                col.delete(ids=batch[s:s + DELETE_BATCH])
            deleted += before - col.count()
    finally:
        client.close()
    return deleted


# --- the eraser -------------------------------------------------------------------------------------


def _in(ids: Iterable[int]) -> str:
    return json.dumps(sorted(set(ids)))


def _names(ident: Identity, text: str) -> bool:
    """Whether a log row's metadata (JSON) names the subject, as written or with its escapes decoded."""
    if ident.names_in(text):
        return True
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return isinstance(doc, dict) and any(ident.names_in(str(v)) for v in (*doc, *doc.values()))


def _sql_delete(conn: apsw.Connection, found: Found, collections: list[Collection],
                ident: Identity) -> dict[str, int]:
    """What Chroma's Delete does to the metadata segment, then the log: one transaction.

    Log rows go when they are the subject's, when every segment of their collection applied them
    (Chroma's own purge), when their collection was dropped, and when the metadata segment applied
    them and their record no longer exists (the deletes the framework logged name the erased ids; the
    vector segment is rewritten without those ids next, so replaying none of their rows is what
    replaying all of them would do).

    A log row the metadata segment applied whose metadata (document included) names the subject keeps
    its id, operation and vector (all the vector segment reads) and loses its metadata: another
    person's document as it was before the agent redacted the subject from it stays in the log until
    the vector segment applies it, which below `sync_threshold` writes never happens."""
    out = {"records_deleted": 0, "queue_rows_deleted": 0, "queue_rows_purged": 0, "queue_rows_of_gone_records": 0,
           "queue_row_blanked": 0, "queue_metadata_blanked": 0}
    with transaction(conn):
        rows = _in(found.rows)
        conn.execute("DELETE FROM embedding_fulltext_search WHERE rowid IN (SELECT value FROM json_each(?))", (rows,))
        conn.execute("DELETE FROM embedding_metadata WHERE id IN (SELECT value FROM json_each(?))", (rows,))
        if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'embedding_metadata_array'").fetchone():
            conn.execute("DELETE FROM embedding_metadata_array WHERE id IN (SELECT value FROM json_each(?))", (rows,))
        conn.execute("DELETE FROM embeddings WHERE id IN (SELECT value FROM json_each(?))", (rows,))
        out["records_deleted"] = conn.changes()
        newest = conn.execute("SELECT max(seq_id) FROM embeddings_queue").fetchone()
        top = int(newest[0]) if newest and newest[0] is not None else -1
        conn.execute("DELETE FROM embeddings_queue WHERE seq_id IN (SELECT value FROM json_each(?)) AND seq_id != ?",
                     (_in(found.queue), top))
        out["queue_rows_deleted"] = conn.changes()
        applied = {str(sid): int(seq) for sid, seq in conn.execute("SELECT segment_id, seq_id FROM max_seq_id")}
        by_id = {c.id: c for c in collections}
        blank = top in found.queue
        for (topic,) in list(conn.execute("SELECT DISTINCT topic FROM embeddings_queue")):
            col = by_id.get(_topic_collection(str(topic)))
            if col is None:
                conn.execute("DELETE FROM embeddings_queue WHERE topic = ? AND seq_id != ?", (topic, top))
                out["queue_rows_purged"] += conn.changes()
                blank = blank or bool(conn.execute("SELECT 1 FROM embeddings_queue WHERE seq_id = ? AND topic = ?",
                                                   (top, topic)).fetchone())
                continue
            segs = (*col.metadata_segments, *col.vector_segments)
            if segs and all(s in applied for s in segs):
                conn.execute("DELETE FROM embeddings_queue WHERE topic = ? AND seq_id < ? AND seq_id != ?",
                             (topic, min(applied[s] for s in segs), top))
                out["queue_rows_purged"] += conn.changes()
            if not col.metadata_segments or any(s not in applied for s in col.metadata_segments):
                continue
            upto = min(applied[s] for s in col.metadata_segments)
            gone = ("topic = ? AND seq_id <= ? AND id NOT IN (SELECT embedding_id FROM embeddings"
                    " WHERE segment_id IN (SELECT value FROM json_each(?)))")
            params = (topic, upto, json.dumps(list(col.metadata_segments)))
            blank = blank or bool(conn.execute(f"SELECT 1 FROM embeddings_queue WHERE seq_id = ? AND {gone}",
                                               (top, *params)).fetchone())
            conn.execute(f"DELETE FROM embeddings_queue WHERE seq_id != ? AND {gone}", (top, *params))
            out["queue_rows_of_gone_records"] += conn.changes()
            naming = [int(seq) for seq, meta in conn.execute(
                "SELECT seq_id, metadata FROM embeddings_queue WHERE topic = ? AND seq_id <= ?"
                " AND metadata IS NOT NULL", (topic, upto)) if _names(ident, str(meta))]
            conn.execute("UPDATE embeddings_queue SET metadata = NULL WHERE seq_id IN (SELECT value FROM json_each(?))",
                         (_in(naming),))
            out["queue_metadata_blanked"] += conn.changes()
        if blank:
            # Chroma numbers the next write max(seq_id)+1: the newest row stays, as a delete of no record.
            conn.execute("UPDATE embeddings_queue SET operation = ?, id = '', vector = NULL, encoding = NULL,"
                         " metadata = NULL WHERE seq_id = ? AND NOT (operation = ? AND id = '' AND vector IS NULL"
                         " AND metadata IS NULL)", (OP_DELETE, top, OP_DELETE))
            out["queue_row_blanked"] = conn.changes()
    return out


def _live_ids(conn: apsw.Connection, col: Collection) -> set[str]:
    ids: set[str] = set()
    for seg in col.metadata_segments:
        ids |= {str(r[0]) for r in conn.execute("SELECT embedding_id FROM embeddings WHERE segment_id = ?", (seg,))}
    return ids


def _pending_ids(conn: apsw.Connection, col: Collection) -> set[str]:
    """Ids the log still has to apply to the collection's vector segment (not on disk yet)."""
    applied = [int(r[0]) for s in col.vector_segments
               for r in conn.execute("SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (s,))]
    since = min(applied) if applied else 0
    topic_like = f"%/{col.id}"
    return {str(r[0]) for r in conn.execute(
        "SELECT id FROM embeddings_queue WHERE topic LIKE ? AND seq_id > ? AND operation != ?",
        (topic_like, since, OP_DELETE))}


def _rewrite_indexes(conn: apsw.Connection, cfg: Config, found: Found,
                     collections: list[Collection]) -> dict[str, int]:
    """Steps 3 and 4, under a write lock on chroma.sqlite3 (no Chroma write can start meanwhile)."""
    out: dict[str, int] = {}

    def add(d: dict[str, int]) -> None:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v

    with transaction(conn):
        add({"swaps_finished": _finish_swaps(cfg.root)})
        for col in collections:
            live = (_live_ids(conn, col) | _pending_ids(conn, col)) if col.metadata_segments else None
            for seg in col.vector_segments:
                add(_rewrite_segment(cfg.root, seg, col.space, found.ids.get(col.id, set()), live))
        segments = {str(r[0]) for r in conn.execute("SELECT id FROM segments")}
        orphans = _orphan_folders(cfg.root, segments)
        for p in orphans:
            shutil.rmtree(p)
        out["orphan_folders_removed"] = len(orphans)
    return out


def _hygiene(conn: apsw.Connection) -> dict[str, int]:
    """Step 5: the full-text index rebuilt from what is left, freed pages and b-tree gaps rebuilt."""
    out = {"fts_rebuilt": 0, "analyzed": 0, "vacuumed": 0, "checkpoint_busy": 0}
    if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'embedding_fulltext_search'").fetchone():
        with transaction(conn):
            conn.execute("INSERT INTO embedding_fulltext_search(embedding_fulltext_search) VALUES ('rebuild')")
        out["fts_rebuilt"] = 1
    # Planner samples keep index keys (the subject's metadata values among them): resampled.
    out |= rebuild_pages(conn, "the chroma store")
    out["vacuumed"] = 1
    return out


@dataclass
class _Counts:
    """What `count` reports. Besides the subject's own items, deleted data still on disk counts: HNSW
    elements of records that no longer exist (tombstoned, or still live on disk because the index was
    not persisted since the delete), log rows of records that no longer exist, orphaned segment
    folders. Once its record id is gone nothing shows whose it was, and an erasure removes it all."""

    records: int = 0
    queue_rows: int = 0
    queue_rows_of_deleted: int = 0
    queue_vectors: int = 0
    hnsw_subject: int = 0
    hnsw_deleted: int = 0
    orphan_folders: int = 0
    fts_rows: int = 0

    def tiers(self) -> dict[Tier, int]:
        return {Tier.episodic: self.records + self.queue_rows + self.queue_rows_of_deleted,
                Tier.vectors: self.hnsw_subject + self.hnsw_deleted + self.queue_vectors + self.orphan_folders,
                Tier.derivatives: self.fts_rows}

    def detail(self, tier: Tier) -> dict[str, int]:
        if tier is Tier.episodic:
            return {"records": self.records, "queue_rows": self.queue_rows,
                    "queue_rows_of_deleted_records": self.queue_rows_of_deleted}
        if tier is Tier.vectors:
            return {"hnsw_subject": self.hnsw_subject, "hnsw_deleted_elements": self.hnsw_deleted,
                    "queue_vectors": self.queue_vectors, "orphan_folders": self.orphan_folders}
        return {"fts_rows": self.fts_rows}


def _count(conn: apsw.Connection, cfg: Config, subject: Subject) -> _Counts:
    collections = _collections(conn)
    _check_segments(cfg.root, collections)
    found = _resolve(conn, cfg, subject, collections)
    c = _Counts(records=len(found.rows), queue_rows=len(found.queue), queue_vectors=found.queue_vectors)
    row = conn.execute("SELECT count(*) FROM embedding_fulltext_search_content WHERE id IN"
                       " (SELECT value FROM json_each(?))", (_in(found.rows),)).fetchone()
    c.fts_rows = int(row[0]) if row else 0
    applied = {str(sid): int(seq) for sid, seq in conn.execute("SELECT segment_id, seq_id FROM max_seq_id")}
    mine = _in(found.queue)
    for col in collections:
        live = (_live_ids(conn, col) | _pending_ids(conn, col)) if col.metadata_segments else None
        for seg in col.vector_segments:
            h = _read_hnsw(_segment_folder(cfg.root, seg))
            if h is None:
                continue
            _keep, hc = _classify(h, found.ids.get(col.id, set()), live)
            c.hnsw_subject += hc.subject
            c.hnsw_deleted += hc.tombstones + hc.unmapped
        if col.metadata_segments and all(s in applied for s in col.metadata_segments):
            r = conn.execute(
                "SELECT count(*) FROM embeddings_queue WHERE topic LIKE ? AND seq_id <= ? AND id != ''"
                " AND seq_id NOT IN (SELECT value FROM json_each(?)) AND id NOT IN (SELECT embedding_id"
                " FROM embeddings WHERE segment_id IN (SELECT value FROM json_each(?)))",
                (f"%/{col.id}", min(applied[s] for s in col.metadata_segments), mine,
                 json.dumps(list(col.metadata_segments)))).fetchone()
            c.queue_rows_of_deleted += int(r[0]) if r else 0
    segments = {str(r[0]) for r in conn.execute("SELECT id FROM segments")}
    c.orphan_folders = len(_orphan_folders(cfg.root, segments)) + sum(
        1 for p in cfg.root.iterdir() if p.is_dir() and p.name.endswith((NEW_SUFFIX, OLD_SUFFIX)))
    return c


def _mentions(conn: apsw.Connection, cfg: Config, subject: Subject) -> int:
    """Other people's records (or records of no one) whose document or metadata names the subject."""
    ident = Identity.of(subject)
    mine = set(_resolve(conn, cfg, subject, _collections(conn)).rows)
    hits: set[int] = set()
    for rid, value in conn.execute("SELECT id, string_value FROM embedding_metadata WHERE string_value IS NOT NULL"):
        if int(rid) not in mine and int(rid) not in hits and ident.found_in(str(value)):
            hits.add(int(rid))
    return len(hits)


class ChromaEraser:
    """The erasing side of kind `chroma` (see the module docstring)."""

    kind: ClassVar[str] = KIND
    tiers: ClassVar[tuple[Tier, ...]] = (Tier.episodic, Tier.vectors, Tier.derivatives)

    def check(self, target: Target) -> None:
        cfg = config(target)
        if cfg.root.exists() and not cfg.root.is_dir():
            raise ConfigError(f"targets: target {target.name!r} ({target.kind}): key 'path' must be a folder")

    def files(self, target: Target) -> list[Path]:
        cfg = config(target)
        return [cfg.db, cfg.root]

    def count(self, target: Target, subject: Subject) -> dict[Tier, int]:
        cfg = config(target)
        conn = _open(cfg)
        try:
            return retry_busy(lambda: _count(conn, cfg, subject), "the chroma store").tiers()
        finally:
            conn.close()

    def mentions(self, target: Target, subject: Subject) -> int:
        cfg = config(target)
        conn = _open(cfg)
        try:
            return retry_busy(lambda: _mentions(conn, cfg, subject), "the chroma store")
        finally:
            conn.close()

    def erase(self, target: Target, subject: Subject) -> dict[Tier, TierOutcome]:
        cfg = config(target)
        conn = _open(cfg)
        try:
            before = retry_busy(lambda: _count(conn, cfg, subject), "the chroma store")
            collections = _collections(conn)
            found = retry_busy(lambda: _resolve(conn, cfg, subject, collections), "the chroma store")
        finally:
            conn.close()
        _check_segments(cfg.root, collections)  # before chromadb's delete, our SQL and any file
        api = _api_delete(cfg, found, collections)
        conn = _open(cfg)
        try:
            collections = _collections(conn)
            _check_segments(cfg.root, collections)
            again = retry_busy(lambda: _resolve(conn, cfg, subject, collections, found.ids), "the chroma store")
            detail: dict[str, int] = {"framework_api": int(api >= 0), "framework_api_deleted": max(api, 0)}
            detail |= retry_busy(lambda: _sql_delete(conn, again, collections, Identity.of(subject)),
                                 "the chroma store")
            detail |= retry_busy(lambda: _rewrite_indexes(conn, cfg, again, collections), "the chroma store")
            detail |= _hygiene(conn)
            after = retry_busy(lambda: _count(conn, cfg, subject), "the chroma store")
        finally:
            conn.close()
        shared = {k: v for k, v in detail.items() if v}
        b, a = before.tiers(), after.tiers()
        return {t: TierOutcome(before=b[t], after=a[t], detail={**before.detail(t), **shared}) for t in self.tiers}


ERASER = ChromaEraser()


def _persistent_client(chromadb: Any, path: str, settings: Any) -> Client:
    """`chromadb.PersistentClient`, typed as the client it returns (its declared type, `ClientAPI`,
    lacks the `close` that releases the files)."""
    return cast("Client", chromadb.PersistentClient(path=path, settings=settings))
