"""Probing kind `langgraph-sqlite`: one read of a target's two databases (read-only handles), split into
the subject's records and everyone else's, and the content digests of everyone else's records."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from erasure.errors import StoreError
from erasure.sqlite import connect
from erasure.subject import Subject
from erasure.target_kinds.langgraph_sqlite import LANGGRAPH_METADATA_KEYS, LangGraphSqliteConfig
from erasure.target_kinds.langgraph_sqlite import SUBJECT_LABEL as MARK
from erasure.tiers import Tier
from probes.targets.langgraph_sqlite.serde import texts_of


def casefold(text: str) -> str:
    """An id as the probe compares it: NFKC, case folded, white space collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def table_names(conn: apsw.Connection) -> set[str]:
    """The database's tables."""
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}


def open_ro(path: Path, key: str) -> apsw.Connection:
    """A read-only connection to the database of key `key` (`StoreError` when there is none)."""
    if not path.is_file():
        raise StoreError(f"langgraph-sqlite probe: no database at {path} (key {key!r})")
    return connect(path, readonly=True)


@dataclass
class _Record:
    """One bystander-or-subject record as text (an item, or a whole thread)."""

    text: list[str] = field(default_factory=list)


@dataclass
class View:
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

    def __init__(self, conf: LangGraphSqliteConfig, subject: Subject) -> None:
        self.templates = list(conf.prefixes)
        self.want = casefold(subject.id)
        self.episodic = set(conf.episodic)

    def _template(self, parts: list[str], own: bool) -> tuple[str, ...] | None:
        """The configured prefix `parts` lies under (with the subject at its mark when `own`)."""
        for t in self.templates:
            if len(parts) >= len(t) and all(
                (casefold(p) == casefold(label.replace(MARK, self.want)) if own else True)
                if MARK in label
                else p == label
                for p, label in zip(parts, t, strict=False)
            ):
                return t
        return None

    def _own(self, parts: list[str]) -> int | None:
        return next((i for i, p in enumerate(parts) if casefold(p) == self.want), None)

    def is_subject(self, prefix: str, key: str) -> bool:
        """The item `key` in namespace `prefix` is the subject's: a label of the namespace, or the
        item's key (`store.put(("profiles",), user_id, ...)`), is their id."""
        parts = prefix.split(".")
        return self._template(parts, True) is not None or self._own(parts) is not None or casefold(key) == self.want

    def unconfigured(self, prefix: str, key: str) -> str | None:
        """The subject's layout (labels up to theirs, or the namespace keyed by their id) when no
        configured prefix holds the item."""
        parts = prefix.split(".")
        if self._template(parts, True) is not None:
            return None
        own = self._own(parts)
        if own is not None:
            return ".".join([*parts[:own], MARK])
        return f"{prefix}/{MARK}" if casefold(key) == self.want else None

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


def naming_keys(meta: Any, want: str) -> set[str]:
    """The top-level keys of checkpoint metadata whose value is the subject's id (case-folded): a
    thread is the subject's whatever key an app (or an older version of it) named them under."""
    if not isinstance(meta, dict):
        return set()
    return {
        str(k)
        for k, v in meta.items()
        if k not in LANGGRAPH_METADATA_KEYS
        and not str(k).startswith("langgraph_")
        and isinstance(v, (str, int))
        and not isinstance(v, bool)
        and casefold(str(v)) == want
    }


def read_view(conf: LangGraphSqliteConfig, subject: Subject) -> View:
    """Every item and thread of the target, the subject's apart from everyone else's."""
    view = View()
    if conf.store is not None:
        ns = _Namespaces(conf, subject)
        conn = open_ro(conf.store, "store")
        try:
            tables = table_names(conn)
            if "store" in tables:
                for prefix, key, value in conn.execute("SELECT prefix, key, value FROM store"):
                    prefix, key = str(prefix), str(key)
                    strings = [prefix, key, *texts_of("json", value)]
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
        conn = open_ro(conf.checkpoints, "checkpoints")
        try:
            tables = table_names(conn)
            threads: dict[str, list[str]] = {}
            rows_per_thread: dict[str, int] = {}
            want = casefold(subject.id)
            subject_threads: set[str] = set()
            configured: set[str] = set()
            if "checkpoints" in tables:
                for tid, kind, blob, metadata in conn.execute(
                    "SELECT thread_id, type, checkpoint, metadata FROM checkpoints"
                ):
                    tid = str(tid)
                    try:
                        meta = json.loads(metadata) if metadata is not None else {}
                    except (ValueError, TypeError):
                        meta = {}
                    naming = naming_keys(meta, want)
                    if naming:
                        subject_threads.add(tid)
                        if naming & set(conf.metadata_keys):
                            configured.add(tid)
                    text = threads.setdefault(tid, [tid])
                    text += texts_of(kind, blob)
                    text += texts_of("json", metadata)
                    rows_per_thread[tid] = rows_per_thread.get(tid, 0) + 1
            if "writes" in tables:
                for tid, kind, blob in conn.execute("SELECT thread_id, type, value FROM writes"):
                    tid = str(tid)
                    threads.setdefault(tid, [tid]).extend(texts_of(kind, blob))
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


def content_digests(conf: LangGraphSqliteConfig, records: set[str]) -> dict[str, list[str]]:
    """Content digests of other people's records (`_View.others` keys): `<item|thread>:<sha256 of the
    record's identity>` -> the sorted digests of every row the record has (an item: its `store` row and
    its `store_vectors` rows; a thread: its `checkpoints` and `writes` rows), each over every column
    but TTL bookkeeping. A record survived when every row it had is still there byte for byte: an
    agent that appends a turn to someone's thread meanwhile adds rows and changes none."""
    rows: dict[str, list[str]] = {}
    spec = (
        (conf.store, "store", "item", ("prefix", "key"), ("store", "store_vectors")),
        (conf.checkpoints, "checkpoints", "thread", ("thread_id",), ("checkpoints", "writes")),
    )
    for path, key, kind, id_cols, tables in spec:
        if path is None:
            continue
        conn = open_ro(path, key)
        try:
            present = table_names(conn)
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
                        rows.setdefault(name, []).append(digest(table.encode() + b"\x00" + _chunk(tuple(row)))[:32])
        finally:
            conn.close()
    return {
        f"{name.split(chr(0), 1)[0]}:{digest(name.encode('utf-8', 'surrogatepass'))}": sorted(rows.get(name, []))
        for name in records
    }


def unchanged(before: dict[str, list[str]], now: dict[str, list[str]], kind: str, sep: str = ":") -> tuple[int, int]:
    """(records of `kind` in the baseline, those of them whose every row is still there unchanged): the
    records named `<kind><sep>...`."""
    mine = {k: d for k, d in before.items() if k.startswith(f"{kind}{sep}")}
    return len(mine), sum(1 for k, d in mine.items() if k in now and set(d) <= set(now[k]))


def digest(blob: bytes) -> str:
    """The SHA-256 of `blob`, in hex."""
    return hashlib.sha256(blob).hexdigest()
