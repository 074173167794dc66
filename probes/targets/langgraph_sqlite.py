"""Probing kind `langgraph-sqlite` (LangGraph `SqliteStore` + `SqliteSaver`): read-only, own code.

It reads the two databases with read-only handles (`file:...?mode=ro`) and its own parsing: namespaces
split on `.`, checkpoint metadata parsed as JSON in Python, checkpoint and write blobs decoded by its
own msgpack reader. Nothing here comes from the erasing side or from LangGraph.

Whose a record is, by the probe's own reading: an item is the subject's when any label of its
namespace, or its key, is their id (case-folded, whole label), whether a configured prefix (`namespace` /
`namespaces`) holds it or not; a thread is the subject's when any of its checkpoints' metadata has a
top-level value that is their id, under any key (`thread_key` / `thread_keys` or another). What is
the subject's is residue until erased, never a mention of them in someone else's record; the layouts
and keys nobody configured are counted apart (`unconfigured-namespace-layouts`,
`items-under-unconfigured-layouts`, `threads-under-unconfigured-metadata-keys`).

Fingerprint (before): the subject's identifier spellings (caseless), distinctive windows of their
items' and threads' text, their thread ids, and their `store_vectors` embeddings cut into 128-byte
float32 pieces (the bytes the store keeps: sqlite-vec's `serialize_float32`). A needle that also
occurs in a bystander's record proves nothing: content windows and vector pieces found there are
dropped; an identifier found inside another person's record without naming the subject (a longer id
that contains it) becomes a shared identifier. Other people's records that name the subject on token
boundaries are counted as mentions. Bystander populations: items, vectors, threads, checkpoint rows,
episodic items, and the content digests of every other person's record: each row of an item (its
`store` row and vectors) and of a thread (its checkpoints and writes), keyed by the record's identity
(hashed). The eraser never rewrites another person's record (mentions are reported, not redacted), so
a record any of whose rows changed or went is lost (`items-content-digests`,
`threads-content-digests`), whatever the counts say; rows added meanwhile (a turn the agent took with
a bystander) change nobody's data.

Measure (after), per tier:
- working: threads whose metadata names the subject; rows of the fingerprinted threads by id;
- episodic / semantic: the subject's items; fingerprinted items by key;
- vectors: the subject's `store_vectors` rows; rows whose bytes equal a fingerprinted vector; and
  the nearest neighbour (sqlite-vec cosine distance) of each fingerprinted vector, for copies whose
  bytes moved (a re-encoded or re-keyed vector).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import apsw
import hyperscan

from erasure.errors import ConfigError, StoreError
from erasure.sqlite import connect
from erasure.subject import Subject
from erasure.targets import Target
from erasure.tiers import Tier
from probes.bytescan import scan_tree
from probes.identity import spellings
from probes.model import Measurement
from probes.needles import MIN_IDENTIFIER_BYTES, NeedleKind, NeedleSet, plain_windows, vector_pieces
from probes.targets.base import TargetFingerprint

KIND = "langgraph-sqlite"
MARK = "{subject_id}"
MAX_CONTENT_GROUPS = 400
MAX_NEAREST = 64
"""Fingerprinted vectors checked by nearest neighbour (brute force: each one is a pass over the table)."""
NEAR = 1e-4
"""Cosine distance under which a vector counts as a copy of the subject's."""
MIN_THREAD_ID = 8
_SIDECARS = ("-wal", "-shm", "-journal")


# --- configuration, read by the probe itself ------------------------------------------------------


@dataclass(frozen=True)
class _Conf:
    store: Path | None
    checkpoints: Path | None
    namespaces: list[list[str]]
    thread_keys: list[str]
    episodic: set[str]


def _conf(target: Target) -> _Conf:
    where = f"targets: target {target.name!r}"
    store, checkpoints = target.path("store"), target.path("checkpoints")
    if store is None and checkpoints is None:
        raise ConfigError(f"{where}: key 'store' or 'checkpoints' is required")
    namespaces = [target.texts("namespace")] if target.value("namespace") is not None else []
    many = target.value("namespaces", [])
    if not isinstance(many, list) or not all(isinstance(n, list) and all(isinstance(x, str) for x in n)
                                             for n in many):
        raise ConfigError(f"{where}: key 'namespaces' must be a list of lists of labels")
    namespaces += many
    if store is not None and (not namespaces or any([label.count(MARK) for label in n].count(1) != 1
                                                    for n in namespaces)):
        raise ConfigError(f"{where}: key 'namespace' must hold {MARK} once")
    one = target.text("thread_key")
    thread_keys = [*([one] if one is not None else []), *target.texts("thread_keys")]
    if checkpoints is not None and not thread_keys:
        raise ConfigError(f"{where}: key 'thread_key' is required")
    return _Conf(store, checkpoints, namespaces, thread_keys, set(target.texts("episodic")))


def _casefold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


# --- reading the files ------------------------------------------------------------------------------


def _unpack_strings(data: bytes) -> list[str]:
    """Every string in a msgpack document, by a recursive reader (ext payloads are msgpack again, as
    LangGraph writes them). ValueError when the bytes are not msgpack."""
    out: list[str] = []

    def take(n: int, pos: int) -> tuple[bytes, int]:
        if pos + n > len(data):
            raise ValueError("truncated")
        return data[pos:pos + n], pos + n

    def uint(width: int, pos: int) -> tuple[int, int]:
        raw, pos = take(width, pos)
        return int.from_bytes(raw, "big"), pos

    def one(pos: int, depth: int) -> int:
        if depth > 64:
            raise ValueError("too deep")
        (tag,), pos = struct.unpack("B", data[pos:pos + 1]), pos + 1
        if tag <= 0x7F or tag >= 0xE0 or tag in (0xC0, 0xC2, 0xC3):
            return pos
        if 0x80 <= tag <= 0x8F:
            for _ in range(2 * (tag & 0x0F)):
                pos = one(pos, depth + 1)
            return pos
        if 0x90 <= tag <= 0x9F:
            for _ in range(tag & 0x0F):
                pos = one(pos, depth + 1)
            return pos
        if 0xA0 <= tag <= 0xBF or tag in (0xD9, 0xDA, 0xDB):
            size, pos = (tag & 0x1F, pos) if tag <= 0xBF else uint({0xD9: 1, 0xDA: 2, 0xDB: 4}[tag], pos)
            raw, pos = take(size, pos)
            out.append(raw.decode("utf-8", "replace"))
            return pos
        if tag in (0xC4, 0xC5, 0xC6):
            size, pos = uint({0xC4: 1, 0xC5: 2, 0xC6: 4}[tag], pos)
            raw, pos = take(size, pos)
            out.append(raw.decode("utf-8", "replace"))
            return pos
        if tag in (0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
            if tag >= 0xD4:
                size = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}[tag]
            else:
                size, pos = uint({0xC7: 1, 0xC8: 2, 0xC9: 4}[tag], pos)
            raw, pos = take(1 + size, pos)
            try:
                out.extend(_unpack_strings(raw[1:]))
            except (ValueError, struct.error):
                out.append(raw[1:].decode("utf-8", "replace"))
            return pos
        widths = {0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
        if tag in widths:
            return take(widths[tag], pos)[1]
        if tag in (0xDC, 0xDD, 0xDE, 0xDF):
            count, pos = uint(2 if tag in (0xDC, 0xDE) else 4, pos)
            for _ in range(count * (2 if tag >= 0xDE else 1)):
                pos = one(pos, depth + 1)
            return pos
        raise ValueError("not msgpack")

    pos = 0
    try:
        while pos < len(data):
            pos = one(pos, 0)
    except struct.error as exc:
        raise ValueError("truncated") from exc
    return out


def _walk_json(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _walk_json(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk_json(v)


def _strings(kind: Any, blob: Any) -> list[str]:
    """The text held by a serialised value (msgpack, JSON; anything else read as UTF-8)."""
    if blob is None:
        return []
    raw = blob if isinstance(blob, bytes) else str(blob).encode("utf-8", "surrogatepass")
    try:
        if kind == "msgpack":
            return _unpack_strings(raw)
        if kind in ("json", None):
            return list(_walk_json(json.loads(raw)))
    except (ValueError, RecursionError):
        pass
    return [raw.decode("utf-8", "replace")]


def _tables(conn: apsw.Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}


def _open_ro(path: Path, key: str) -> apsw.Connection:
    if not path.is_file():
        raise StoreError(f"langgraph-sqlite probe: no database at {path} (key {key!r})")
    return connect(path, readonly=True)


@dataclass
class _Record:
    """One bystander-or-subject record as text (an item, or a whole thread)."""

    text: list[str] = field(default_factory=list)


@dataclass
class _View:
    """What the probe reads of a target: who owns what, and each record's text."""

    subject_items: dict[tuple[str, str], Tier] = field(default_factory=dict)
    other_items: int = 0
    other_episodic: int = 0
    subject_item_text: list[str] = field(default_factory=list)
    subject_vectors: list[bytes] = field(default_factory=list)
    subject_vector_rows: int = 0
    other_vectors: list[bytes] = field(default_factory=list)
    subject_threads: set[str] = field(default_factory=set)
    subject_thread_text: list[str] = field(default_factory=list)
    other_threads: set[str] = field(default_factory=set)
    other_checkpoint_rows: int = 0
    others: dict[str, _Record] = field(default_factory=dict)
    """Bystanders' records (items by namespace/key, threads by id) -> their text."""
    unconfigured_layouts: set[str] = field(default_factory=set)
    """The subject's namespace layouts that no configured prefix holds (counted, never shown)."""
    unconfigured_items: int = 0
    unconfigured_threads: set[str] = field(default_factory=set)
    """The subject's threads that no configured metadata key names."""


class _Namespaces:
    """Whose a namespace is. The subject's: any label that is their id (case-folded, whole label),
    configured or not; someone's: under a configured prefix, or not. The configured prefixes (other
    labels exact) place an item in a tier and tell the subject's layouts nobody configured."""

    def __init__(self, conf: _Conf, subject: Subject) -> None:
        self.templates = conf.namespaces
        self.want = _casefold(subject.id)
        self.episodic = conf.episodic

    def _template(self, parts: list[str], own: bool) -> list[str] | None:
        """The configured prefix `parts` lies under (with the subject at its mark when `own`)."""
        for t in self.templates:
            if len(parts) >= len(t) and all(
                    (_casefold(p) == _casefold(label.replace(MARK, self.want)) if own else True) if MARK in label
                    else p == label for p, label in zip(parts, t, strict=False)):
                return t
        return None

    def _own(self, parts: list[str]) -> int | None:
        return next((i for i, p in enumerate(parts) if _casefold(p) == self.want), None)

    def is_subject(self, prefix: str, key: str) -> bool:
        """The item `key` in namespace `prefix` is the subject's: a label of the namespace, or the
        item's key (`store.put(("profiles",), user_id, ...)`), is their id."""
        parts = prefix.split(".")
        return (self._template(parts, True) is not None or self._own(parts) is not None
                or _casefold(key) == self.want)

    def unconfigured(self, prefix: str, key: str) -> str | None:
        """The subject's layout (labels up to theirs, or the namespace keyed by their id) when no
        configured prefix holds the item."""
        parts = prefix.split(".")
        if self._template(parts, True) is not None:
            return None
        own = self._own(parts)
        if own is not None:
            return ".".join([*parts[:own], MARK])
        return f"{prefix}/{MARK}" if _casefold(key) == self.want else None

    def is_person(self, prefix: str) -> bool:
        """Under a configured prefix for some person (any id at the mark)."""
        return self._template(prefix.split("."), False) is not None

    def episodic_tier(self, prefix: str) -> bool:
        parts = prefix.split(".")
        t = self._template(parts, False)
        if t is not None:
            end = len(t)
        elif (own := self._own(parts)) is not None:
            end = own + 1
        else:
            return False
        return len(parts) > end and parts[end] in self.episodic


OWN_KEYS = {"source", "step", "parents", "writes", "thread_id", "thread_ts", "checkpoint_id", "checkpoint_ns",
            "run_id", "run_name", "task_id"}
"""What LangGraph itself puts in checkpoint metadata: a person is never named there (a subject whose id
is `3` is not the owner of every thread at step 3)."""


def _naming_keys(meta: Any, want: str) -> set[str]:
    """The top-level keys of checkpoint metadata whose value is the subject's id (case-folded): a
    thread is the subject's whatever key an app (or an older version of it) named them under."""
    if not isinstance(meta, dict):
        return set()
    return {str(k) for k, v in meta.items()
            if k not in OWN_KEYS and not str(k).startswith("langgraph_")
            and isinstance(v, (str, int)) and not isinstance(v, bool) and _casefold(str(v)) == want}


def _read(conf: _Conf, subject: Subject) -> _View:
    view = _View()
    if conf.store is not None:
        ns = _Namespaces(conf, subject)
        conn = _open_ro(conf.store, "store")
        try:
            tables = _tables(conn)
            if "store" in tables:
                for prefix, key, value in conn.execute("SELECT prefix, key, value FROM store"):
                    prefix, key = str(prefix), str(key)
                    strings = [prefix, key, *_strings("json", value)]
                    if ns.is_subject(prefix, key):
                        tier = Tier.episodic if ns.episodic_tier(prefix) else Tier.semantic
                        view.subject_items[(prefix, key)] = tier
                        view.subject_item_text += strings[2:]
                        if (layout := ns.unconfigured(prefix, key)) is not None:
                            view.unconfigured_layouts.add(layout)
                            view.unconfigured_items += 1
                    else:
                        view.other_items += 1
                        view.other_episodic += int(ns.is_person(prefix) and ns.episodic_tier(prefix))
                        view.others[f"item\x00{prefix}\x00{key}"] = _Record(strings)
            if "store_vectors" in tables:
                for prefix, key, embedding in conn.execute("SELECT prefix, key, embedding FROM store_vectors"):
                    blob = bytes(embedding) if embedding is not None else b""
                    if ns.is_subject(str(prefix), str(key)):
                        view.subject_vector_rows += 1
                        view.subject_vectors.append(blob)
                    else:
                        view.other_vectors.append(blob)
                        view.others.setdefault(f"item\x00{prefix}\x00{key}", _Record([str(prefix), str(key)]))
        finally:
            conn.close()
    if conf.checkpoints is not None:
        conn = _open_ro(conf.checkpoints, "checkpoints")
        try:
            tables = _tables(conn)
            threads: dict[str, list[str]] = {}
            rows_per_thread: dict[str, int] = {}
            want = _casefold(subject.id)
            subject_threads: set[str] = set()
            configured: set[str] = set()
            if "checkpoints" in tables:
                for tid, kind, blob, metadata in conn.execute(
                        "SELECT thread_id, type, checkpoint, metadata FROM checkpoints"):
                    tid = str(tid)
                    try:
                        meta = json.loads(metadata) if metadata is not None else {}
                    except (ValueError, TypeError):
                        meta = {}
                    naming = _naming_keys(meta, want)
                    if naming:
                        subject_threads.add(tid)
                        if naming & set(conf.thread_keys):
                            configured.add(tid)
                    text = threads.setdefault(tid, [tid])
                    text += _strings(kind, blob)
                    text += _strings("json", metadata)
                    rows_per_thread[tid] = rows_per_thread.get(tid, 0) + 1
            if "writes" in tables:
                for tid, kind, blob in conn.execute("SELECT thread_id, type, value FROM writes"):
                    tid = str(tid)
                    threads.setdefault(tid, [tid]).extend(_strings(kind, blob))
                    rows_per_thread[tid] = rows_per_thread.get(tid, 0) + 1
            view.unconfigured_threads = subject_threads - configured
            for tid, text in threads.items():
                if tid in subject_threads:
                    view.subject_threads.add(tid)
                    view.subject_thread_text += text
                else:
                    view.other_threads.add(tid)
                    view.other_checkpoint_rows += rows_per_thread.get(tid, 0)
                    view.others[f"thread\x00{tid}"] = _Record(text)
        finally:
            conn.close()
    return view


def _chunk(values: tuple[Any, ...]) -> bytes:
    """One row as bytes, every value length-prefixed with its type (no two rows encode alike)."""
    out = bytearray()
    for v in values:
        raw = v if isinstance(v, bytes) else repr(v).encode("utf-8", "surrogatepass")
        out += type(v).__name__.encode() + b":" + len(raw).to_bytes(8, "big") + raw
    return bytes(out)


TTL_COLUMNS = frozenset({"expires_at"})
"""Columns a read may rewrite (LangGraph refreshes an item's TTL when it is read): not content."""


def _content_digests(conf: _Conf, records: set[str]) -> dict[str, list[str]]:
    """Content digests of other people's records (`_View.others` keys): `<item|thread>:<sha256 of the
    record's identity>` -> the sorted digests of every row the record has (an item: its `store` row and
    its `store_vectors` rows; a thread: its `checkpoints` and `writes` rows), each over every column
    but TTL bookkeeping. A record survived when every row it had is still there byte for byte: an
    agent that appends a turn to someone's thread meanwhile adds rows and changes none."""
    rows: dict[str, list[str]] = {}
    spec = ((conf.store, "store", "item", ("prefix", "key"), ("store", "store_vectors")),
            (conf.checkpoints, "checkpoints", "thread", ("thread_id",), ("checkpoints", "writes")))
    for path, key, kind, id_cols, tables in spec:
        if path is None:
            continue
        conn = _open_ro(path, key)
        try:
            present = _tables(conn)
            for table in (t for t in tables if t in present):
                cols = [str(c[1]) for c in conn.execute(f'PRAGMA table_info("{table}")')]
                if not set(id_cols) <= set(cols):
                    continue
                keep = [c for c in cols if c not in TTL_COLUMNS]
                select = ", ".join(f'"{c}"' for c in keep)
                idx = [keep.index(c) for c in id_cols]
                for row in conn.execute(f'SELECT {select} FROM "{table}"'):
                    name = "\x00".join([kind, *(str(row[i]) for i in idx)])
                    if name in records:
                        rows.setdefault(name, []).append(_digest(table.encode() + b"\x00" + _chunk(tuple(row)))[:32])
        finally:
            conn.close()
    return {f"{name.split(chr(0), 1)[0]}:{_digest(name.encode('utf-8', 'surrogatepass'))}": sorted(rows.get(name, []))
            for name in records}


def _unchanged(before: dict[str, list[str]], now: dict[str, list[str]], kind: str) -> tuple[int, int]:
    """(records of `kind` in the baseline, those of them whose every row is still there unchanged)."""
    mine = {k: d for k, d in before.items() if k.startswith(f"{kind}:")}
    return len(mine), sum(1 for k, d in mine.items() if k in now and set(d) <= set(now[k]))


# --- the probe --------------------------------------------------------------------------------------


def _bounded(spellings_: list[str]) -> re.Pattern[str]:
    body = "|".join(re.escape(s) for s in sorted(spellings_, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9])(?:{body})(?![A-Za-z0-9])", re.IGNORECASE)


def _digest(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


class LangGraphSqliteProbe:
    """The probing side of kind `langgraph-sqlite` (see the module docstring)."""

    kind: ClassVar[str] = KIND

    def files(self, target: Target) -> list[Path]:
        conf = _conf(target)
        out: list[Path] = []
        for db in (conf.store, conf.checkpoints):
            if db is not None:
                out += [db, *(db.with_name(db.name + s) for s in _SIDECARS)]
        return list(dict.fromkeys(out))

    def fingerprint(self, target: Target, subject: Subject) -> TargetFingerprint:
        conf = _conf(target)
        view = _read(conf, subject)
        names = [s for _kind, s in spellings(subject, [subject.id]) if len(s.encode()) >= MIN_IDENTIFIER_BYTES]
        naming = _bounded(names) if names else None
        other_text = {k: "\n".join(r.text) for k, r in view.others.items()}
        other_low = {k: t.lower() for k, t in other_text.items()}
        mentions = sum(1 for t in other_text.values() if naming is not None and naming.search(t))

        needles = NeedleSet()
        shared: list[str] = []
        for s in names:
            low = s.lower()
            inside = [k for k, t in other_low.items() if low in t]
            if inside and not all(_bounded([s]).search(other_text[k]) for k in inside):
                shared.append(s)
                needles.bump("identifier_shared")
                continue
            needles.add_group(NeedleKind.identifier, [s.encode()], caseless=True)
        for s in shared:
            needles.add_group(NeedleKind.shared_identifier, [s.encode()], caseless=True)
        mentioned = [n.group for n in needles.needles if n.kind is NeedleKind.identifier
                     and any(n.data.decode().lower() in t for t in other_low.values())]

        windows: list[str] = []
        for text in [*view.subject_item_text, *view.subject_thread_text]:
            for w in plain_windows(text, limit=2):
                if w not in windows:
                    windows.append(w)
        windows = windows[:MAX_CONTENT_GROUPS]
        windows += [tid for tid in sorted(view.subject_threads) if len(tid) >= MIN_THREAD_ID]
        every_other = "\n".join(other_text.values()).encode("utf-8", "replace")
        in_others = _present(every_other, [w.encode() for w in windows])
        for i, w in enumerate(windows):
            if i in in_others:
                needles.bump("content_withheld_in_bystanders")
            else:
                needles.add_group(NeedleKind.content, [w.encode()])

        other_digests = {_digest(v) for v in view.other_vectors}
        other_pieces = {v[i:i + 128] for v in view.other_vectors for i in range(0, len(v), 128)}
        kept: list[bytes] = []
        for vec in view.subject_vectors:
            if _digest(vec) in other_digests:
                needles.bump("vector_withheld_twin")
                continue
            pieces = [p for p in vector_pieces(vec) if p not in other_pieces]
            if needles.add_group(NeedleKind.vector, pieces):
                kept.append(vec)

        digests = _content_digests(conf, set(view.others))
        bystanders = {"items": view.other_items, "episodic-items": view.other_episodic,
                      "vectors": len(view.other_vectors), "threads": len(view.other_threads),
                      "checkpoint-rows": view.other_checkpoint_rows,
                      "items-unchanged": _unchanged(digests, digests, "item")[0],
                      "threads-unchanged": _unchanged(digests, digests, "thread")[0]}
        shared_needles = [n for n in needles.needles if n.kind is NeedleKind.shared_identifier]
        if shared_needles:
            hit: set[int] = set()
            for root in _roots(self.files(target)):
                report = scan_tree(root, [n.data for n in shared_needles], caseless=set(range(len(shared_needles))))
                hit |= {shared_needles[i].group for i in report.found_indexes()}
            bystanders["shared-identifiers"] = len(hit)
        episodic = sum(1 for t in view.subject_items.values() if t is Tier.episodic)
        subject_before = {
            "threads-by-metadata": len(view.subject_threads),
            "items-under-namespace": len(view.subject_items),
            "episodic-items-under-namespace": episodic,
            "vectors-under-namespace": view.subject_vector_rows,
            "items-under-unconfigured-layouts": view.unconfigured_items,
            "unconfigured-namespace-layouts": len(view.unconfigured_layouts),
            "threads-under-unconfigured-metadata-keys": len(view.unconfigured_threads),
        }
        state = {"threads": sorted(view.subject_threads),
                 "items": [[p, k, t.value] for (p, k), t in sorted(view.subject_items.items())],
                 "vector_digests": sorted({_digest(v) for v in kept}),
                 "nearest": [v.hex() for v in kept[:MAX_NEAREST]],
                 "needle_stats": needles.stats, "bystander_digests": digests}
        return TargetFingerprint(target=target.name, needles=needles.needles, bystanders=bystanders,
                                 subject_before=subject_before, mentions=mentions, mentioned_groups=mentioned,
                                 state=state)

    def measure(self, target: Target, subject: Subject, fp: TargetFingerprint) -> list[tuple[str, Measurement]]:
        conf = _conf(target)
        view = _read(conf, subject)
        out: list[tuple[str, Measurement]] = []
        baseline = {str(k): [str(d) for d in v] for k, v in fp.state.get("bystander_digests", {}).items()}
        now = _content_digests(conf, set(view.others)) if baseline else {}
        if conf.checkpoints is not None:
            gone = set(fp.state.get("threads", []))
            left_rows = _rows_of_threads(conf.checkpoints, sorted(gone))
            out.append((Tier.working, Measurement("threads-by-metadata", len(view.subject_threads), "threads",
                                                  len(view.other_threads))))
            out.append((Tier.working, Measurement("thread-rows-by-id", left_rows, "checkpoint-rows",
                                                  view.other_checkpoint_rows)))
            out.append((Tier.working, Measurement("threads-under-unconfigured-metadata-keys",
                                                  len(view.unconfigured_threads), "threads",
                                                  len(view.other_threads))))
            if baseline:
                out.append((Tier.working, Measurement("threads-content-digests", 0, "threads-unchanged",
                                                      _unchanged(baseline, now, "thread")[1])))
        if conf.store is not None:
            episodic = sum(1 for t in view.subject_items.values() if t is Tier.episodic)
            out.append((Tier.episodic, Measurement("items-under-namespace", episodic, "episodic-items",
                                                   view.other_episodic)))
            out.append((Tier.semantic, Measurement("items-under-namespace", len(view.subject_items) - episodic,
                                                   "items", view.other_items)))
            known = {(str(p), str(k)) for p, k, _t in fp.state.get("items", [])}
            left_items = _items_present(conf.store, known)
            out.append((Tier.semantic, Measurement("items-by-key", left_items, "items", view.other_items)))
            out.append((Tier.semantic, Measurement("items-under-unconfigured-layouts", view.unconfigured_items,
                                                   "items", view.other_items)))
            out.append((Tier.semantic, Measurement("unconfigured-namespace-layouts",
                                                   len(view.unconfigured_layouts), "items", view.other_items)))
            if baseline:
                out.append((Tier.semantic, Measurement("items-content-digests", 0, "items-unchanged",
                                                       _unchanged(baseline, now, "item")[1])))
            digests = set(fp.state.get("vector_digests", []))
            every = [*view.subject_vectors, *view.other_vectors]
            by_bytes = sum(1 for v in every if _digest(v) in digests)
            out.append((Tier.vectors, Measurement("vectors-under-namespace", view.subject_vector_rows, "vectors",
                                                  len(view.other_vectors))))
            out.append((Tier.vectors, Measurement("vectors-by-bytes", by_bytes, "vectors", len(view.other_vectors))))
            near = _nearest(conf.store, [bytes.fromhex(h) for h in fp.state.get("nearest", [])])
            out.append((Tier.vectors, Measurement("vectors-nearest-neighbour", near, "vectors",
                                                  len(view.other_vectors))))
        return out


def _present(haystack: bytes, needles: list[bytes]) -> set[int]:
    """Indexes of the needles found in `haystack` (one hyperscan block scan; literals, NUL-safe)."""
    needles = [n for n in needles if n]
    if not needles or not haystack:
        return set()
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=["".join(f"\\x{b:02x}" for b in n).encode("ascii") for n in needles],
               ids=list(range(len(needles))), flags=[0] * len(needles))
    found: set[int] = set()

    def on_match(needle: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
        found.add(needle)

    db.scan(haystack, match_event_handler=on_match)
    return found


def _roots(paths: list[Path]) -> list[Path]:
    dirs = sorted({p.parent.resolve() for p in paths if p.parent.exists()})
    return [d for d in dirs if not any(d != o and d.is_relative_to(o) for o in dirs)]


def _rows_of_threads(path: Path, threads: list[str]) -> int:
    if not threads:
        return 0
    conn = _open_ro(path, "checkpoints")
    try:
        tables = _tables(conn)
        n = 0
        for table in ("checkpoints", "writes"):
            if table in tables:
                for tid in threads:
                    row = conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id = ?", (tid,)).fetchone()
                    n += int(row[0]) if row else 0
        return n
    finally:
        conn.close()


def _items_present(path: Path, items: set[tuple[str, str]]) -> int:
    """How many of the fingerprinted items still have a row in `store` or `store_vectors`."""
    if not items:
        return 0
    conn = _open_ro(path, "store")
    try:
        tables = [t for t in ("store", "store_vectors") if t in _tables(conn)]
        left = set()
        for table in tables:
            for prefix, key in sorted(items):
                if conn.execute(f"SELECT 1 FROM {table} WHERE prefix = ? AND key = ? LIMIT 1",
                                (prefix, key)).fetchone() is not None:
                    left.add((prefix, key))
        return len(left)
    finally:
        conn.close()


def _nearest(path: Path, vectors: list[bytes]) -> int:
    """How many of the subject's vectors still have a copy in `store_vectors` (cosine distance < NEAR)."""
    if not vectors:
        return 0
    conn = _open_ro(path, "store")
    try:
        if "store_vectors" not in _tables(conn):
            return 0
        n = 0
        for vec in vectors:
            row = conn.execute("SELECT min(vec_distance_cosine(embedding, ?)) FROM store_vectors"
                               " WHERE length(embedding) = ?", (vec, len(vec))).fetchone()
            if row is not None and row[0] is not None and float(row[0]) < NEAR:
                n += 1
        return n
    finally:
        conn.close()


PROBE = LangGraphSqliteProbe()
