"""Kind `mem0`: a mem0 `Memory` with local Qdrant (path mode, on disk) and its SQLite history, erased
by SQL on the files under Qdrant's own folder lock.

Configuration: `erasure.target_kinds.mem0` (`history_db`, `qdrant_path`, `collection`, `lock_timeout`).

The subject is mem0's `user_id` (case variants of the request's id included). Tiers:
- working = the subject's `messages` rows (the raw turns mem0 keeps per session scope
  `agent_id=..&run_id=..&user_id=..`, the scope's user_id naming them);
- semantic = their memories (points of `collection` whose payload `user_id` is theirs) and their
  entity records (points of `<collection>_entities`, the store mem0 2.x links memories through);
- vectors = the dense vectors of those points (pickled float64 in the collection's `storage.sqlite`);
- audit_log = the `history` rows of their memories (ADD, UPDATE and DELETE rows: each keeps the text;
  their memories are their points and the memories their entity records link), and orphaned history
  rows (their memory is gone) whose text or actor names the subject.

What mem0's own `delete_all(user_id=...)` leaves (measured with mem0ai 2.2.1 / qdrant-client 1.20):
- every `history` row of the deleted memories (text in `new_memory`/`old_memory`), and one new
  `DELETE` row per memory that copies the text again;
- every `messages` row of the subject's session scopes (the raw conversation turns);
- the subject's entity records (`<collection>_entities`: entity text such as their name, their
  `user_id`, linked memory ids, and the entity's vector) whenever the deleting process had not itself
  used the entity store: `_remove_memory_from_entity_store` is a no-op until the entity store was
  initialised in that process, so a `delete_all` from a fresh process (an admin script, a new agent
  run) leaves all of them;
- freed pages and b-tree gaps of `storage.sqlite` and `history.db` where the agent's SQLite build does
  not zero freed space (`SQLITE_SECURE_DELETE` is a compile-time default some builds set; the pyenv
  build here does, so our measurements found the deleted points' bytes gone from `storage.sqlite`),
  and old cells left in the gaps of pages SQLite rebuilt (see tasks/scrub.py), which no build zeroes.
- `delete_all` also sends `md5(user_id)` to mem0's telemetry (PostHog) unless `MEM0_TELEMETRY` is off.

Why SQL on the files and not `Memory.delete_all`: constructing `Memory` here would run OUR mem0
version's history migration on THEIR database (`SQLiteManager._migrate_history_table`), needs their
embedder and LLM configuration, writes `~/.mem0`, may send the subject's hashed id to telemetry, and
its DELETE rows would have to be deleted right after. Local Qdrant's storage is one table
`points(id TEXT PRIMARY KEY, point BLOB)` per collection holding a pickled `PointStruct`; deleting a
point is `DELETE FROM points WHERE id = ?` (qdrant-client's `CollectionPersistence.delete`). So this
module imports neither mem0 nor qdrant-client (it works where they are not installed) and reads point
payloads with `erasure.untrusted.load_pickle`, which builds inert records and refuses any other class.

Locks: qdrant-client's local mode takes an exclusive `flock` on `<qdrant_path>/.lock` for as long as a
client is open, and refuses (it does not wait) when another holds it: mem0 local mode is
single-process. We take the same lock, waiting up to `lock_timeout` seconds for the agent to close its
`Memory`, then fail with a StoreError that says so; while we hold it (read, delete, VACUUM: about 2 s
at 10k memories and 20 s at 100k on this machine) an agent starting up gets qdrant-client's "already
accessed" error and must retry. Reading (`count`, `mentions`) takes no lock: SQLite's own locking
makes the read consistent, and the agent keeps running. The history database is waited on with
SQLite's busy timeout and retries on SQLITE_BUSY. Our connections write in DELETE journal mode (a
rollback journal's mode is per connection), so an agent's `journal_mode=PERSIST` journal, with the
pre-images of its last transaction, is removed by our commit.

Order, so that a crash anywhere leaves a rerun able to finish: the subject's points are read first
(they are the only link from the subject to their memory ids), their history and messages rows are
deleted next, the points last; then every file is rebuilt (VACUUM; a TRUNCATE checkpoint if the file
is in WAL; ANALYZE first where `sqlite_stat4` keeps sampled keys), also when nothing was found, since
nothing on disk says whether an earlier run died before its VACUUM. History rows of memories that were
deleted before we ran (e.g. by the team's own `delete_all`) carry no user id: we find them through the
entity records `delete_all` left (their `linked_memory_ids`) and by the subject's identifiers in their
text or actor; the rest cannot be attributed, and the probe (whose fingerprint saw the memory ids
before) reports them.

Other people's memories, entities, history and messages that name the subject are counted
(`mentions`), never changed.
"""

from __future__ import annotations

import fcntl
import json
import pickle
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import apsw

from erasure.errors import ConfigError, StoreError
from erasure.identity import Identity, fold
from erasure.sqlite import connect, scalar, transaction
from erasure.subject import Subject
from erasure.target_kinds.mem0 import QDRANT_POINT_CLASSES, Mem0Config
from erasure.targets import Target
from erasure.tiers import Tier
from erasure.untrusted import PickledRecord, load_pickle
from tasks.targets.eraser import TierOutcome, rebuild_pages, retry_busy

KIND = "mem0"
ENTITY_SUFFIX = "_entities"
"""mem0 2.x keeps entity records in a sibling collection `<collection>_entities` (Qdrant provider)."""
LOCK_FILE = ".lock"
META_FILE = "meta.json"
STORAGE_FILE = "storage.sqlite"


def _error(target: Target, key: str, what: str) -> ConfigError:
    return ConfigError(f"targets: target {target.name!r} ({KIND}): key {key!r}: {what}")


def _entity_collection(cfg: Mem0Config) -> str:
    return cfg.collection + ENTITY_SUFFIX


def _storage(cfg: Mem0Config, collection: str) -> Path:
    return cfg.qdrant_path / "collection" / collection / STORAGE_FILE


# --- reading Qdrant's local storage -------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One stored row of a collection: its rowid and the parts of its payload we look at."""

    rowid: int
    point_id: str
    payload: dict[str, Any]


def read_point(blob: bytes) -> tuple[str, dict[str, Any]]:
    """(point id, payload) of one stored point; `pickle.UnpicklingError` if it is not one."""
    obj = load_pickle(blob, records=QDRANT_POINT_CLASSES)
    if not isinstance(obj, PickledRecord):
        raise pickle.UnpicklingError("not a point")
    payload = obj.state.get("payload")
    return str(obj.state.get("id")), payload if isinstance(payload, dict) else {}


def read_points(path: Path, *, readonly: bool = True) -> list[Point]:
    """Every row of one collection's storage file (none when the file does not exist)."""
    if not path.is_file():
        return []
    conn = connect(path, readonly=readonly)
    try:
        return _points(conn, path)
    finally:
        conn.close()


def _points(conn: apsw.Connection, path: Path) -> list[Point]:
    if scalar(conn, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'points'") == 0:
        return []
    out: list[Point] = []
    bad = 0
    for rowid, blob in conn.execute("SELECT rowid, point FROM points"):
        try:
            pid, payload = read_point(bytes(blob))
        except pickle.UnpicklingError:  # counted, then refused below
            bad += 1
            continue
        out.append(Point(int(rowid), pid, payload))
    if bad:
        raise StoreError(
            f"{bad} point(s) of the local Qdrant storage {path.parent.name!r} could not be read "
            "as qdrant-client points; nothing was erased from it"
        )
    return out


def collections(cfg: Mem0Config) -> list[str]:
    """The collections of the Qdrant folder (its meta.json), as qdrant-client lists them."""
    meta = cfg.qdrant_path / META_FILE
    try:
        doc = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the local Qdrant's {META_FILE} in {cfg.qdrant_path}: {exc}") from exc
    cols = doc.get("collections") if isinstance(doc, dict) else None
    return sorted(str(c) for c in cols) if isinstance(cols, dict) else []


# --- who is the subject here --------------------------------------------------------------------


def _unescape(value: str) -> str:
    """mem0's session-scope escaping undone (`%3D` `=`, `%26` `&`, then `%25` `%`)."""
    return value.replace("%3D", "=").replace("%26", "&").replace("%25", "%")


def scope_user(scope: str | None) -> str | None:
    """The user_id a messages row's `session_scope` names, if any."""
    for part in (scope or "").split("&"):
        key, sep, value = part.partition("=")
        if sep and key == "user_id":
            return _unescape(value)
    return None


@dataclass
class Footprint:
    """The subject's rows in one target (ids, in memory only; never returned)."""

    memories: list[Point] = field(default_factory=list)
    entities: list[Point] = field(default_factory=list)
    live_ids: set[str] = field(default_factory=set)
    """Every point id of every collection of the folder: a history row of any other memory id is orphaned."""
    history_ids: list[str] = field(default_factory=list)
    orphan_ids: list[str] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)

    @property
    def memory_ids(self) -> set[str]:
        """Their memories' ids: their points, and the memories their entity records link (which
        outlive the memories when mem0's `delete_all` ran in a process that never used the entity
        store)."""
        linked = {
            str(m) for p in self.entities for m in p.payload.get("linked_memory_ids") or [] if isinstance(m, str | int)
        }
        return {p.point_id for p in self.memories} | linked


class Resolver:
    """Finds the subject's rows: by user_id (folded) in payloads and scopes, by identifier in texts."""

    def __init__(self, subject: Subject) -> None:
        self.want = fold(subject.id)
        self.identity = Identity.of(subject)

    def is_subject(self, user_id: object) -> bool:
        return isinstance(user_id, str) and fold(user_id) == self.want

    def names(self, *texts: object) -> bool:
        return any(isinstance(t, str) and self.identity.names_in(t) for t in texts)

    def point_names(self, p: Point) -> bool:
        return self.names(p.payload.get("data"), p.payload.get("actor_id"))

    def points(self, cfg: Mem0Config, read: Callable[[Path], list[Point]]) -> Footprint:
        fp = Footprint()
        for name in collections(cfg):
            rows = read(_storage(cfg, name))
            fp.live_ids |= {p.point_id for p in rows}
            if name == cfg.collection:
                fp.memories = [p for p in rows if self.is_subject(p.payload.get("user_id"))]
            elif name == _entity_collection(cfg):
                fp.entities = [p for p in rows if self.is_subject(p.payload.get("user_id"))]
        return fp

    def rows(self, conn: apsw.Connection, fp: Footprint) -> None:
        """The subject's history rows (of their memories; orphans naming them) and messages rows."""
        if _has_table(conn, "history"):
            fp.history_ids = [
                str(r[0])
                for r in conn.execute(
                    "SELECT id FROM history WHERE memory_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(sorted(fp.memory_ids)),),
                )
            ]
            mine = set(fp.history_ids)
            fp.orphan_ids = [
                str(hid)
                for hid, old, new, actor in conn.execute(
                    "SELECT id, old_memory, new_memory, actor_id FROM history"
                    " WHERE memory_id IS NULL OR memory_id NOT IN (SELECT value FROM json_each(?))",
                    (json.dumps(sorted(fp.live_ids)),),
                )
                if str(hid) not in mine and self.names(old, new, actor)
            ]
        if _has_table(conn, "messages"):
            fp.message_ids = [
                str(mid)
                for mid, scope in conn.execute("SELECT id, session_scope FROM messages")
                if self.is_subject(scope_user(scope))
            ]

    def mentions(self, cfg: Mem0Config, conn: apsw.Connection | None) -> int:
        """Other people's points (memories, entities), messages and live memories' history rows that
        name the subject."""
        n = 0
        bystander_memories: set[str] = set()
        for name in collections(cfg):
            for p in read_points(_storage(cfg, name)):
                if self.is_subject(p.payload.get("user_id")):
                    continue
                if name == cfg.collection:
                    bystander_memories.add(p.point_id)
                n += self.point_names(p)
        if conn is None:
            return n
        if _has_table(conn, "history"):
            for mid, old, new, actor in conn.execute("SELECT memory_id, old_memory, new_memory, actor_id FROM history"):
                n += mid in bystander_memories and self.names(old, new, actor)
        if _has_table(conn, "messages"):
            for scope, content, name in conn.execute("SELECT session_scope, content, name FROM messages"):
                n += not self.is_subject(scope_user(scope)) and self.names(content, name)
        return n


def _has_table(conn: apsw.Connection, name: str) -> bool:
    return bool(scalar(conn, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))


# --- locks, waits and byte hygiene --------------------------------------------------------------


@contextmanager
def folder_lock(cfg: Mem0Config) -> Iterator[None]:
    """Hold the local Qdrant folder the way qdrant-client does (exclusive flock on `.lock`), waiting
    up to `lock_timeout` for the agent's client to close; StoreError when it does not."""
    lock = cfg.qdrant_path / LOCK_FILE
    if not lock.exists():
        lock.write_text("tmp lock file")  # what qdrant-client writes there
    deadline = time.monotonic() + cfg.lock_timeout
    with open(lock, "r+") as fh:
        pause = 0.05
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"the local Qdrant folder {cfg.qdrant_path} stayed locked by another client for "
                        f"{cfg.lock_timeout:g} s: mem0's local mode is single-process, so the agent must close "
                        "its Memory (or stop) while the erasure runs; or raise the target's lock_timeout"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 1.5, 1.0)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _delete_ids(conn: apsw.Connection, table: str, key: str, ids: list[str] | list[int]) -> int:
    if not ids:
        return 0
    conn.execute(f"DELETE FROM {table} WHERE {key} IN (SELECT value FROM json_each(?))", (json.dumps(ids),))
    return conn.changes()


# --- the eraser ---------------------------------------------------------------------------------


class Mem0Eraser:
    kind: ClassVar[str] = KIND
    tiers: ClassVar[tuple[Tier, ...]] = (Tier.working, Tier.semantic, Tier.vectors, Tier.audit_log)

    def check(self, target: Target) -> None:
        cfg = Mem0Config.of(target)
        if not cfg.history_db.is_file():
            raise _error(target, "history_db", f"no file at {cfg.history_db}")
        if not (cfg.qdrant_path / META_FILE).is_file():
            raise _error(target, "qdrant_path", f"no local Qdrant folder (no {META_FILE}) at {cfg.qdrant_path}")
        if cfg.collection not in collections(cfg):
            raise _error(target, "collection", f"no collection {cfg.collection!r} in {cfg.qdrant_path}")

    def files(self, target: Target) -> list[Path]:
        cfg = Mem0Config.of(target)
        return [cfg.history_db, cfg.qdrant_path]

    def count(self, target: Target, subject: Subject) -> dict[Tier, int]:
        self.check(target)
        cfg = Mem0Config.of(target)
        resolver = Resolver(subject)
        fp = resolver.points(cfg, read_points)
        conn = connect(cfg.history_db, readonly=True)
        try:
            resolver.rows(conn, fp)
        finally:
            conn.close()
        return self._counts(fp)

    @staticmethod
    def _counts(fp: Footprint) -> dict[Tier, int]:
        points = len(fp.memories) + len(fp.entities)
        return {
            Tier.working: len(fp.message_ids),
            Tier.semantic: points,
            Tier.vectors: points,
            Tier.audit_log: len(fp.history_ids) + len(fp.orphan_ids),
        }

    def erase(self, target: Target, subject: Subject) -> dict[Tier, TierOutcome]:
        self.check(target)
        cfg = Mem0Config.of(target)
        resolver = Resolver(subject)
        with folder_lock(cfg):
            # 1. The points: the only link from the subject to their memory ids.
            fp = resolver.points(cfg, read_points)
            conn = connect(cfg.history_db)
            try:
                # 2. History and messages first: a crash after this leaves the points to find them again.
                before, hist, orphans, msgs = retry_busy(
                    lambda: self._erase_rows(conn, resolver, fp), "a mem0 database"
                )
                # 3. The points, then each storage file rebuilt while the folder is still ours.
                started = time.perf_counter()
                deleted = {
                    name: self._erase_points(_storage(cfg, name), points)
                    for name, points in ((cfg.collection, fp.memories), (_entity_collection(cfg), fp.entities))
                }
                points_ms = round((time.perf_counter() - started) * 1000)
                # 4. The history database rebuilt too; then what is left, counted afresh.
                started = time.perf_counter()
                rebuild_pages(conn, "a mem0 database")
                history_ms = round((time.perf_counter() - started) * 1000)
                after_fp = resolver.points(cfg, read_points)
                resolver.rows(conn, after_fp)
            finally:
                conn.close()
        after = self._counts(after_fp)
        return {
            Tier.working: TierOutcome(before[Tier.working], after[Tier.working], {"messages": msgs}),
            Tier.semantic: TierOutcome(
                before[Tier.semantic],
                after[Tier.semantic],
                {"memories": deleted[cfg.collection], "entities": deleted[_entity_collection(cfg)]},
            ),
            Tier.vectors: TierOutcome(
                before[Tier.vectors],
                after[Tier.vectors],
                {"points": sum(deleted.values()), "delete_and_vacuum_ms": points_ms},
            ),
            Tier.audit_log: TierOutcome(
                before[Tier.audit_log],
                after[Tier.audit_log],
                {"history_rows": hist, "orphaned_rows_naming_subject": orphans, "vacuum_ms": history_ms},
            ),
        }

    def _erase_rows(
        self, conn: apsw.Connection, resolver: Resolver, fp: Footprint
    ) -> tuple[dict[Tier, int], int, int, int]:
        with transaction(conn):
            resolver.rows(conn, fp)
            before = self._counts(fp)
            hist = _delete_ids(conn, "history", "id", fp.history_ids)
            orphans = _delete_ids(conn, "history", "id", fp.orphan_ids)
            msgs = _delete_ids(conn, "messages", "id", fp.message_ids)
        return before, hist, orphans, msgs

    @staticmethod
    def _erase_points(path: Path, points: list[Point]) -> int:
        """Delete the rows of `points` from one storage file, then rebuild it (also when none)."""
        if not path.is_file():
            return 0
        store = connect(path)
        try:

            def drop() -> int:
                with transaction(store):
                    return _delete_ids(store, "points", "rowid", [p.rowid for p in points])

            n = retry_busy(drop, "a mem0 Qdrant storage file")
            rebuild_pages(store, "a mem0 Qdrant storage file")
            return n
        finally:
            store.close()

    def mentions(self, target: Target, subject: Subject) -> int:
        self.check(target)
        cfg = Mem0Config.of(target)
        conn = connect(cfg.history_db, readonly=True)
        try:
            return Resolver(subject).mentions(cfg, conn)
        finally:
            conn.close()


ERASER = Mem0Eraser()
