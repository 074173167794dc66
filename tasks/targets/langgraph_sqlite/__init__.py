"""Kind `langgraph-sqlite`: LangGraph's `SqliteStore` (long-term memory, with its `store_vectors`
index) and `SqliteSaver` (thread checkpoints), erased by SQL on their files.

Configuration: `erasure.target_kinds.langgraph_sqlite` (`store`, `checkpoints`, `namespace(s)`,
`thread_key(s)`, `episodic`). Tiers: working = the subject's threads (every `checkpoints` and `writes`
row of them), episodic and semantic = their items in `store`, vectors = their `store_vectors` rows.

Whose is an item or a thread: the configuration names where the app keeps a person, but the person is
theirs wherever it wrote them. An item is the subject's when any label of its namespace, or its key,
IS a spelling of their id (the whole label, after NFKC and case folding), under a configured prefix or
not (`store.put(("profiles",), user_id, ...)` included); a thread
is the subject's when any checkpoint's metadata has a top-level value that is their id, under any key.
What only that rule found (namespace layouts and metadata keys nobody configured) is erased too and
counted in the step record (`unconfigured_namespace_layouts`, `items_under_unconfigured_layouts`,
`threads_under_unconfigured_metadata_keys`): configure them. Two targets on one file that hold the
same person under two layouts therefore both erase and count all of them, never each other's
"bystanders".

Why SQL on the files and not the framework's API: the framework's deletes are two statements each
(`DELETE FROM store WHERE prefix = ? AND key IN (...)`; `delete_thread`: `DELETE FROM checkpoints/writes
WHERE thread_id = ?`), and opening the agent's files with the framework installed here would run OUR
version's migrations on THEIR database (`SqliteStore.setup()`, `SqliteSaver.setup()` alter tables and
set WAL mode): the team's agent has its own environment and versions. So this module never imports
LangGraph (it works where LangGraph is not installed) and does what those deletes do, then closes
what they leave, measured on stores built with langgraph 1.2 / langgraph-checkpoint-sqlite 3.1:

- `store.delete` leaves every `store_vectors` row of the item (namespace, key and the exact float32
  vector): the table's `ON DELETE CASCADE` needs `PRAGMA foreign_keys=ON`, which LangGraph never sets.
  We delete every `store_vectors` row under the subject's prefix, orphans of earlier deletes included.
- `delete_thread` and `store.delete` commit into the `-wal` file while the agent has the database open
  (the copies stay there until a checkpoint rewrites the file and a TRUNCATE checkpoint cuts it): we
  end with `wal_checkpoint(TRUNCATE)` (retried while an agent's reader holds it back).
- freed pages and b-tree gaps keep deleted cells where the SQLite build does not zero freed space
  (Debian's does, the pysqlite3 and python.org builds do not; and no build zeroes the gaps left when a
  page is rebuilt, see tasks/scrub.py): we delete with `secure_delete=ON` and then `VACUUM`.
- `sqlite_stat4` (written by `ANALYZE` / `PRAGMA optimize` on builds with STAT4) keeps sampled index
  keys, namespaces and keys of the subject among them: we re-run `ANALYZE` where it exists, which
  resamples from the rows that are left.

- a rollback journal kept by an agent in `journal_mode=PERSIST` holds the pre-images of its last
  transaction's pages (the subject's items among them): our connection writes in DELETE mode (SQLite's
  default, per connection), so our commit removes the `-journal` file.

We wait on the agent's locks (busy timeout, and retries of the whole step on SQLITE_BUSY for up to
`WAIT_SECONDS`), never change its journal mode, and leave its schema as it was. Every run ends with
ANALYZE (where present) + VACUUM + TRUNCATE checkpoint, even when nothing was found: a rerun after a
crash between the deletes and the VACUUM must still remove the bytes, and nothing on disk says whether
it is needed. Other people's items and threads that name the subject are counted (`mentions`), never
changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import apsw

from erasure.errors import InputError, StoreError
from erasure.identity import Identity, fold
from erasure.sqlite import connect, scalar, transaction
from erasure.subject import Subject
from erasure.target_kinds.langgraph_sqlite import SUBJECT_LABEL, LangGraphSqliteConfig
from erasure.targets import Target
from erasure.tiers import Tier
from tasks.targets.eraser import TierOutcome, rebuild_pages, retry_busy
from tasks.targets.langgraph_sqlite.namespaces import NamespaceMatcher, names_subject

KIND = "langgraph-sqlite"
_SIDECARS = ("-wal", "-shm", "-journal")


# --- who is the subject in this store ------------------------------------------------------------


def _table_columns(conn: apsw.Connection) -> dict[str, set[str]]:
    tables = [
        str(r[0])
        for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    ]
    return {t: {str(c[1]) for c in conn.execute(f'PRAGMA table_info("{t}")')} for t in tables}


def _item_tables(conn: apsw.Connection) -> list[str]:
    """Tables keyed by namespace (`prefix`) and `key`: `store`, `store_vectors`."""
    return sorted(t for t, cols in _table_columns(conn).items() if {"prefix", "key"} <= cols)


def _thread_tables(conn: apsw.Connection) -> list[str]:
    """Tables keyed by `thread_id` and `checkpoint_id`: `checkpoints`, `writes`."""
    return sorted(t for t, cols in _table_columns(conn).items() if {"thread_id", "checkpoint_id"} <= cols)


def _matcher(cfg: LangGraphSqliteConfig, subject: Subject) -> NamespaceMatcher:
    """The subject's namespaces under the target's configuration."""
    if cfg.prefixes and "." in subject.id:
        raise InputError("the subject's id contains '.', which a LangGraph namespace label cannot hold")
    return NamespaceMatcher(cfg.prefixes, cfg.episodic, subject)


Scope = tuple[str, str | None]
"""`(namespace, None)`: every item in the subject's namespace; `(namespace, key)`: one item elsewhere
whose key is the subject's id (`store.put(("profiles",), user_id, ...)`)."""


def _subject_scopes(conn: apsw.Connection, matcher: NamespaceMatcher) -> dict[Scope, Tier]:
    out: dict[Scope, Tier] = {}
    tables = _item_tables(conn)
    for table in tables:
        for (prefix,) in conn.execute(f'SELECT DISTINCT prefix FROM "{table}"'):
            tier = matcher.tier(str(prefix))
            if tier is not None:
                out[(str(prefix), None)] = tier
    for table in tables:
        for prefix, key in conn.execute(f'SELECT DISTINCT prefix, key FROM "{table}"'):
            if (str(prefix), None) not in out and fold(str(key)) == matcher.want:
                out[(str(prefix), str(key))] = Tier.semantic
    return out


def _where(scope: Scope) -> tuple[str, tuple[str, ...]]:
    prefix, key = scope
    return ("prefix = ?", (prefix,)) if key is None else ("prefix = ? AND key = ?", (prefix, key))


def _layout(matcher: NamespaceMatcher, scope: Scope) -> str | None:
    """The layout of a scope of the subject's that no configured prefix holds (counted only)."""
    prefix, key = scope
    return f"{prefix}/{SUBJECT_LABEL}" if key is not None else matcher.unconfigured_layout(prefix)


def _names_subject(metadata: Any, want: str) -> set[str]:
    """`names_subject` of a checkpoint's metadata as SQLite keeps it (JSON text)."""
    try:
        meta = json.loads(metadata if isinstance(metadata, (str, bytes)) else str(metadata))
    except (ValueError, TypeError):
        return set()
    return names_subject(meta, want)


def _subject_threads(conn: apsw.Connection, thread_keys: tuple[str, ...], subject: Subject) -> dict[str, bool]:
    """Threads any of whose checkpoints names the subject in its metadata, under any key -> whether
    one of `thread_keys` (the configured ones) names them."""
    if "checkpoints" not in _table_columns(conn):
        return {}
    want = fold(subject.id)
    out: dict[str, bool] = {}
    for tid, metadata in conn.execute("SELECT thread_id, metadata FROM checkpoints WHERE metadata IS NOT NULL"):
        keys = _names_subject(metadata, want)
        if keys:
            out[str(tid)] = out.get(str(tid), False) or bool(keys & set(thread_keys))
    return dict(sorted(out.items()))


# --- counting --------------------------------------------------------------------------------------


@dataclass
class _Counts:
    items: dict[Tier, int]
    vectors: int
    orphan_vectors: int
    threads: int
    thread_rows: dict[str, int]
    unconfigured_layouts: int = 0
    """The subject's namespace layouts outside every configured prefix (counted, never named)."""
    unconfigured_items: int = 0
    unconfigured_threads: int = 0
    """Threads that name the subject only under a metadata key nobody configured."""


def _count_items(conn: apsw.Connection, scopes: dict[Scope, Tier]) -> tuple[dict[Tier, int], int, int]:
    tables = _item_tables(conn)
    items = {Tier.episodic: 0, Tier.semantic: 0}
    vectors = orphans = 0
    for scope, tier in scopes.items():
        where, args = _where(scope)
        if "store" in tables:
            items[tier] += int(scalar(conn, f"SELECT count(*) FROM store WHERE {where}", args))
        if "store_vectors" in tables:
            vectors += int(scalar(conn, f"SELECT count(*) FROM store_vectors WHERE {where}", args))
            if "store" in tables:
                orphans += int(
                    scalar(
                        conn,
                        f"SELECT count(*) FROM store_vectors v WHERE {where} AND NOT EXISTS"
                        " (SELECT 1 FROM store s WHERE s.prefix = v.prefix AND s.key = v.key)",
                        args,
                    )
                )
    return items, vectors, orphans


def _count_threads(conn: apsw.Connection, threads: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    ids = json.dumps(threads)
    for table in _thread_tables(conn):
        out[table] = int(
            scalar(conn, f'SELECT count(*) FROM "{table}" WHERE thread_id IN (SELECT value FROM json_each(?))', (ids,))
        )
    return out


def _open(path: Path, key: str, *, readonly: bool) -> apsw.Connection:
    if not path.is_file():
        raise StoreError(f"langgraph-sqlite: no database at {path} (key {key!r})")
    try:
        return connect(path, readonly=readonly)
    except apsw.Error as exc:
        raise StoreError(f"langgraph-sqlite: cannot open {path} (key {key!r}): {exc}") from exc


def _measure(cfg: LangGraphSqliteConfig, subject: Subject) -> _Counts:
    counts = _Counts(items={Tier.episodic: 0, Tier.semantic: 0}, vectors=0, orphan_vectors=0, threads=0, thread_rows={})
    if cfg.store is not None:
        conn = _open(cfg.store, "store", readonly=True)
        try:
            matcher = _matcher(cfg, subject)
            scopes = _subject_scopes(conn, matcher)
            counts.items, counts.vectors, counts.orphan_vectors = _count_items(conn, scopes)
            layouts = {sc: layout for sc in scopes if (layout := _layout(matcher, sc)) is not None}
            counts.unconfigured_layouts = len(set(layouts.values()))
            counts.unconfigured_items = sum(_count_items(conn, {sc: scopes[sc] for sc in layouts})[0].values())
        finally:
            conn.close()
    if cfg.checkpoints is not None:
        conn = _open(cfg.checkpoints, "checkpoints", readonly=True)
        try:
            threads = _subject_threads(conn, cfg.metadata_keys, subject)
            counts.threads = len(threads)
            counts.thread_rows = _count_threads(conn, list(threads))
            counts.unconfigured_threads = sum(1 for configured in threads.values() if not configured)
        finally:
            conn.close()
    return counts


# --- erasing ----------------------------------------------------------------------------------------


def _delete_items(conn: apsw.Connection, matcher: NamespaceMatcher) -> tuple[dict[Scope, Tier], dict[str, int]]:
    """In one write transaction (so an item the agent writes meanwhile is either seen or waits):
    resolve the subject's namespaces and items, delete their vectors (the framework leaves them), then
    the items."""
    removed: dict[str, int] = {}
    with transaction(conn):
        scopes = _subject_scopes(conn, matcher)
        tables = _item_tables(conn)
        ordered = [t for t in ("store_vectors",) if t in tables] + [t for t in tables if t != "store_vectors"]
        for table in ordered if scopes else []:
            removed[table] = 0
            for scope in sorted(scopes, key=lambda sc: (sc[0], sc[1] or "")):
                where, args = _where(scope)
                conn.execute(f'DELETE FROM "{table}" WHERE {where}', args)
                removed[table] += conn.changes()
    return scopes, removed


def _delete_threads(conn: apsw.Connection, thread_keys: tuple[str, ...], subject: Subject) -> dict[str, int]:
    """In one write transaction: resolve the subject's threads, delete every row of them."""
    removed: dict[str, int] = {}
    with transaction(conn):
        threads = _subject_threads(conn, thread_keys, subject)
        if threads:
            ids = json.dumps(list(threads))
            for table in _thread_tables(conn):
                conn.execute(f'DELETE FROM "{table}" WHERE thread_id IN (SELECT value FROM json_each(?))', (ids,))
                removed[table] = conn.changes()
    return removed


def _erase_store(cfg: LangGraphSqliteConfig, subject: Subject, path: Path) -> tuple[dict[Scope, Tier], dict[str, int]]:
    conn = _open(path, "store", readonly=False)
    try:
        matcher = _matcher(cfg, subject)
        return retry_busy(lambda: _delete_items(conn, matcher), f"langgraph-sqlite: {path}")
    finally:
        conn.close()


def _erase_threads(cfg: LangGraphSqliteConfig, subject: Subject, path: Path) -> dict[str, int]:
    conn = _open(path, "checkpoints", readonly=False)
    try:
        return retry_busy(lambda: _delete_threads(conn, cfg.metadata_keys, subject), f"langgraph-sqlite: {path}")
    finally:
        conn.close()


def _scrub_file(path: Path, key: str) -> dict[str, int]:
    conn = _open(path, key, readonly=False)
    try:
        return rebuild_pages(conn, f"langgraph-sqlite: {path}")
    finally:
        conn.close()


# --- mentions ----------------------------------------------------------------------------------------


def _msgpack_strings(data: bytes, depth: int = 0) -> Iterator[str]:
    """The text values in a msgpack buffer (LangGraph's serde), read as a flat sequence of objects:
    containers need no bookkeeping since their elements follow them inline. Ext payloads (LangGraph's
    constructor records) are msgpack again. Raises ValueError on anything that is not msgpack."""
    fixed = {
        0xC0: 0,
        0xC2: 0,
        0xC3: 0,
        0xCA: 4,
        0xCB: 8,
        0xCC: 1,
        0xCD: 2,
        0xCE: 4,
        0xCF: 8,
        0xD0: 1,
        0xD1: 2,
        0xD2: 4,
        0xD3: 8,
        0xDC: 2,
        0xDD: 4,
        0xDE: 2,
        0xDF: 4,
    }
    fixext = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        i += 1
        if b <= 0x7F or b >= 0xE0 or 0x80 <= b <= 0x9F:
            continue
        if 0xA0 <= b <= 0xBF:
            size = b & 0x1F
            yield data[i : i + size].decode("utf-8", "replace")
            i += size
        elif b in fixed:
            i += fixed[b]
        elif b in (0xD9, 0xDA, 0xDB, 0xC4, 0xC5, 0xC6):
            width = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}[b]
            size = int.from_bytes(data[i : i + width], "big")
            i += width
            chunk = data[i : i + size]
            i += size
            yield chunk.decode("utf-8", "replace")
        elif b in (0xC7, 0xC8, 0xC9) or b in fixext:
            if b in fixext:
                size = fixext[b]
            else:
                width = {0xC7: 1, 0xC8: 2, 0xC9: 4}[b]
                size = int.from_bytes(data[i : i + width], "big")
                i += width
            payload = data[i + 1 : i + 1 + size]
            i += 1 + size
            if depth < 32:
                try:
                    yield from _msgpack_strings(payload, depth + 1)
                except ValueError:
                    yield payload.decode("utf-8", "replace")
        else:
            raise ValueError("not msgpack")
        if i > n:
            raise ValueError("truncated msgpack")


def json_strings(value: Any) -> Iterator[str]:
    """Every string of a decoded JSON (or msgpack) value, keys included, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from json_strings(v)


def _text_of(kind: Any, data: Any) -> str:
    """A serialised value as text to search: msgpack and JSON decoded, anything else as UTF-8."""
    if data is None:
        return ""
    raw = data if isinstance(data, bytes) else str(data).encode("utf-8", "replace")
    try:
        if kind == "msgpack":
            return "\n".join(_msgpack_strings(raw))
        if kind in ("json", None):
            return "\n".join(json_strings(json.loads(raw)))
    except ValueError:
        pass
    return raw.decode("utf-8", "replace")


def _store_mentions(conn: apsw.Connection, matcher: NamespaceMatcher, identity: Identity) -> int:
    if "store" not in _item_tables(conn):
        return 0
    n = 0
    for prefix, key, value in conn.execute("SELECT prefix, key, value FROM store"):
        if matcher.tier(str(prefix)) is not None or fold(str(key)) == matcher.want:
            continue
        if identity.found_in(f"{prefix}\n{key}\n{_text_of('json', value)}") is not None:
            n += 1
    return n


def _thread_mentions(conn: apsw.Connection, subject_threads: set[str], identity: Identity) -> int:
    tables = _table_columns(conn)
    if "checkpoints" not in tables:
        return 0
    found: set[str] = set()
    queries = ["SELECT thread_id, type, checkpoint, metadata FROM checkpoints"]
    if "writes" in tables:
        queries.append("SELECT thread_id, type, value, NULL FROM writes")
    for sql in queries:
        for tid, kind, blob, metadata in conn.execute(sql):
            tid = str(tid)
            if tid in subject_threads or tid in found:
                continue
            text = f"{tid}\n{_text_of(kind, blob)}\n{_text_of('json', metadata)}"
            if identity.found_in(text) is not None:
                found.add(tid)
    return len(found)


# --- the eraser ---------------------------------------------------------------------------------------


class LangGraphSqliteEraser:
    """The erasing side of kind `langgraph-sqlite` (see the module docstring)."""

    kind: ClassVar[str] = KIND
    tiers: ClassVar[tuple[Tier, ...]] = (Tier.working, Tier.episodic, Tier.semantic, Tier.vectors)

    def check(self, target: Target) -> None:
        LangGraphSqliteConfig.of(target)

    def files(self, target: Target) -> list[Path]:
        cfg = LangGraphSqliteConfig.of(target)
        out: list[Path] = []
        for db in (cfg.store, cfg.checkpoints):
            if db is None or db in out:
                continue
            out.append(db)
            out += [side for s in _SIDECARS if (side := db.with_name(db.name + s)).exists()]
        return out

    def count(self, target: Target, subject: Subject) -> dict[Tier, int]:
        c = _measure(LangGraphSqliteConfig.of(target), subject)
        return {
            Tier.working: c.threads,
            Tier.episodic: c.items[Tier.episodic],
            Tier.semantic: c.items[Tier.semantic],
            Tier.vectors: c.vectors,
        }

    def erase(self, target: Target, subject: Subject) -> dict[Tier, TierOutcome]:
        cfg = LangGraphSqliteConfig.of(target)
        before = _measure(cfg, subject)
        removed: dict[str, int] = {}
        scopes: dict[Scope, Tier] = {}
        if cfg.store is not None:
            scopes, removed_items = _erase_store(cfg, subject, cfg.store)
            removed |= removed_items
        if cfg.checkpoints is not None:
            removed |= _erase_threads(cfg, subject, cfg.checkpoints)
        scrubbed: dict[Path, dict[str, int]] = {}
        for key, path in (("store", cfg.store), ("checkpoints", cfg.checkpoints)):
            if path is not None and path.resolve() not in scrubbed:
                scrubbed[path.resolve()] = _scrub_file(path, key)
        after = _measure(cfg, subject)
        store_scrub = scrubbed[cfg.store.resolve()] if cfg.store else {}
        saver_scrub = scrubbed[cfg.checkpoints.resolve()] if cfg.checkpoints else {}
        items_by_tier = {
            tier: sum(1 for (_p, key), t in scopes.items() if t is tier and key is None)
            for tier in (Tier.episodic, Tier.semantic)
        }
        return {
            Tier.working: TierOutcome(
                before.threads,
                after.threads,
                {
                    "threads": before.threads,
                    **{f"{t}_rows": n for t, n in before.thread_rows.items()},
                    **{f"deleted_{t}_rows": removed.get(t, 0) for t in before.thread_rows},
                    "threads_under_unconfigured_metadata_keys": before.unconfigured_threads,
                    **{f"scrub_{k}": v for k, v in saver_scrub.items()},
                },
            ),
            Tier.episodic: TierOutcome(
                before.items[Tier.episodic],
                after.items[Tier.episodic],
                {"items": before.items[Tier.episodic], "namespaces": items_by_tier[Tier.episodic]},
            ),
            Tier.semantic: TierOutcome(
                before.items[Tier.semantic],
                after.items[Tier.semantic],
                {
                    "items": before.items[Tier.semantic],
                    "namespaces": items_by_tier[Tier.semantic],
                    "unconfigured_namespace_layouts": before.unconfigured_layouts,
                    "items_under_unconfigured_layouts": before.unconfigured_items,
                    **{f"scrub_{k}": v for k, v in store_scrub.items()},
                },
            ),
            Tier.vectors: TierOutcome(
                before.vectors,
                after.vectors,
                {"vectors": before.vectors, "orphaned_by_earlier_deletes": before.orphan_vectors},
            ),
        }

    def mentions(self, target: Target, subject: Subject) -> int:
        cfg = LangGraphSqliteConfig.of(target)
        identity = Identity.of(subject)
        n = 0
        if cfg.store is not None:
            conn = _open(cfg.store, "store", readonly=True)
            try:
                n += _store_mentions(conn, _matcher(cfg, subject), identity)
            finally:
                conn.close()
        if cfg.checkpoints is not None:
            conn = _open(cfg.checkpoints, "checkpoints", readonly=True)
            try:
                threads = set(_subject_threads(conn, cfg.metadata_keys, subject))
                n += _thread_mentions(conn, threads, identity)
            finally:
                conn.close()
        return n


ERASER = LangGraphSqliteEraser()
