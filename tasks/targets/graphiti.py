"""Kind `graphiti`: a Graphiti temporal knowledge graph on its embedded Kuzu backend, erased by Cypher in
one Kuzu transaction, then the database file rebuilt by Kuzu's own export and import.

Configuration: `erasure.target_kinds.graphiti` (`db`, `subject_key`, `group_template`, `hold_attribute`,
`lock_timeout`).

Who the subject is (the erasure rule of the temporal assertion graph: remove what names the entity as the
subject or the target of an edge; a property that merely spells its key is not a reference):
- their person entities: `Entity` nodes whose JSON `attributes[subject_key]` is the request's id (NFKC,
  case folded), and every node of their own partition (`group_template`, e.g. `user-{subject_id}`);
- every entity edge (`RelatesToNode_`, with its fact and its fact embedding) whose source or target is
  one of those entities, valid or already invalidated (`invalid_at`/`expired_at` set: a soft-deleted
  fact is still data), every edge of their partition, and edges left without a source or a target (what
  Graphiti's own `EntityNode.delete` leaves on Kuzu: it removes only outgoing edges) whose fact names them;
- their own episodes (`Episodic` of their partition) and their communities and sagas; MENTIONS and
  HAS_MEMBER links to their entities go with the entities (`DETACH DELETE`).
Other people's episodes, entities (summaries), facts and communities (summaries) that name them are
counted as mentions (reported, not erased: `erasure.identity`, the matching rule).

Hold: a row of the subject (person entity or edge) whose JSON `attributes[hold_attribute]` is true is
under litigation hold. Then nothing is erased: the deleting transaction is rolled back before its first
delete and `HoldActive` says how many rows are held (the rule's all or nothing).

Order and bytes: the rows are found and deleted in ONE Kuzu transaction (committed all or not at all).
Kuzu does not overwrite deleted values in its file, and a CHECKPOINT does not either (measured: every
byte of the subject stayed in `graph.kuzu` after Graphiti's deletes and a checkpoint; see docs/targets.md),
so the database is then rebuilt on every erase, also when nothing was found (a rerun after a crash
before the rebuild must still remove the bytes): `EXPORT DATABASE` to a private folder beside it, `IMPORT
DATABASE` into a new file, which replaces the old one (`os.replace`), and the export removed. The old
database stays open (and so locked against the agent) until the new file is written.

Record first: with a request id (the cascade always gives one) the graph's erasure epoch (issue 26) is
advanced inside the deleting transaction, after the deletes and before the commit: a node
`ErasureEpoch(request_id, epoch, at)` in the Kuzu file (request ids and numbers only), so a failure to
record rolls the deletes back, and a copy of the file carries the epoch it had (`tasks/epochs.py`).

Locks: Kuzu lets one process open a database for writing. We wait up to `lock_timeout` for the agent to
close it, then fail with a StoreError that says so.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import kuzu

from erasure.errors import ConfigError, HoldActive, StoreError
from erasure.identity import Identity, fold
from erasure.subject import Subject
from erasure.target_kinds.graphiti import GraphitiConfig
from erasure.targets import Target
from erasure.tiers import Tier
from tasks.targets.eraser import TierOutcome

KIND = "graphiti"
REBUILD_SUFFIX = ".erasure-rebuild"
EXPORT_SUFFIX = ".erasure-export"


def rows(conn: kuzu.Connection, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    """All rows of one statement; its result closed before returning (a Kuzu result collected after
    its database closed crashes the process)."""
    result = conn.execute(query, params or {})
    assert isinstance(result, kuzu.QueryResult)
    try:
        return [list(r) for r in result.get_all()]
    finally:
        result.close()


@contextmanager
def opened(cfg: GraphitiConfig, *, read_only: bool) -> Iterator[tuple[kuzu.Database, kuzu.Connection]]:
    """The database, waiting up to `lock_timeout` while another process (the agent) holds it."""
    deadline = time.monotonic() + cfg.lock_timeout
    pause = 0.05
    while True:
        try:
            db = kuzu.Database(str(cfg.db), read_only=read_only)
            break
        except RuntimeError as exc:
            if "lock" not in str(exc).lower():
                raise StoreError(f"cannot open the Kuzu database {cfg.db.name}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"the Kuzu database {cfg.db} stayed open in another process for {cfg.lock_timeout:g} s: Kuzu "
                    "lets one process write it, so the agent must close it while the erasure runs; or raise "
                    "the target's lock_timeout"
                ) from None
            time.sleep(pause)
            pause = min(pause * 1.5, 1.0)
    conn = kuzu.Connection(db)
    try:
        yield db, conn
    finally:
        gc.collect()
        conn.close()
        db.close()


def _attrs(raw: object) -> dict[str, Any]:
    try:
        doc = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


@dataclass
class Footprint:
    """The subject's rows in the graph (uuids, in memory only; never returned) and the mentions."""

    entities: set[str] = field(default_factory=set)
    edges: set[str] = field(default_factory=set)
    episodes: set[str] = field(default_factory=set)
    communities: set[str] = field(default_factory=set)
    sagas: set[str] = field(default_factory=set)
    embeddings: int = 0
    held: int = 0
    mentions: int = 0

    def counts(self) -> dict[Tier, int]:
        return {
            Tier.episodic: len(self.episodes),
            Tier.semantic: len(self.entities) + len(self.edges),
            Tier.vectors: self.embeddings,
            Tier.derivatives: len(self.communities) + len(self.sagas),
        }


class Resolver:
    """Finds the subject's rows and the other rows that name them."""

    def __init__(self, cfg: GraphitiConfig, subject: Subject) -> None:
        self.cfg = cfg
        self.want = fold(subject.id)
        self.group = cfg.group_of(subject.id)
        self.identity = Identity.of(subject)

    def _names(self, *texts: object) -> bool:
        return any(isinstance(t, str) and self.identity.names_in(t) for t in texts)

    def _mine(self, group: object) -> bool:
        return self.group is not None and isinstance(group, str) and fold(group) == fold(self.group)

    def _held(self, attrs: dict[str, Any]) -> bool:
        return bool(attrs.get(self.cfg.hold_attribute))

    def find(self, conn: kuzu.Connection) -> Footprint:
        fp = Footprint()
        entities = rows(
            conn,
            "MATCH (n:Entity) RETURN n.uuid, n.group_id, n.name, n.summary, n.attributes, n.name_embedding IS NOT NULL",
        )
        for uuid, group, name, summary, raw, emb in entities:
            attrs = _attrs(raw)
            key = attrs.get(self.cfg.subject_key)
            if (isinstance(key, str) and fold(key) == self.want) or self._mine(group):
                fp.entities.add(uuid)
                fp.embeddings += bool(emb)
                fp.held += self._held(attrs)
            else:
                fp.mentions += self._names(name, summary)
        edges = rows(
            conn,
            "MATCH (e:RelatesToNode_) OPTIONAL MATCH (a:Entity)-[:RELATES_TO]->(e) "
            "OPTIONAL MATCH (e)-[:RELATES_TO]->(b:Entity) "
            "RETURN e.uuid, e.group_id, e.name, e.fact, e.attributes, e.fact_embedding IS NOT NULL, a.uuid, b.uuid",
        )
        for uuid, group, name, fact, raw, emb, src, dst in edges:
            orphan_naming = (src is None or dst is None) and self._names(name, fact)
            if src in fp.entities or dst in fp.entities or self._mine(group) or orphan_naming:
                if uuid not in fp.edges:
                    fp.edges.add(uuid)
                    fp.embeddings += bool(emb)
                    fp.held += self._held(_attrs(raw))
            elif uuid not in fp.edges:
                fp.mentions += self._names(name, fact)
        for uuid, group, name, content, desc in rows(
            conn, "MATCH (n:Episodic) RETURN n.uuid, n.group_id, n.name, n.content, n.source_description"
        ):
            if self._mine(group):
                fp.episodes.add(uuid)
            else:
                fp.mentions += self._names(name, content, desc)
        for uuid, group, name, summary, emb in rows(
            conn, "MATCH (n:Community) RETURN n.uuid, n.group_id, n.name, n.summary, n.name_embedding IS NOT NULL"
        ):
            if self._mine(group):
                fp.communities.add(uuid)
                fp.embeddings += bool(emb)
            else:
                fp.mentions += self._names(name, summary)
        for uuid, group, name in rows(conn, "MATCH (n:Saga) RETURN n.uuid, n.group_id, n.name"):
            if self._mine(group):
                fp.sagas.add(uuid)
            else:
                fp.mentions += self._names(name)
        return fp


EPOCH_TABLE = "ErasureEpoch"
EPOCH_TABLE_SQL = (
    f"CREATE NODE TABLE IF NOT EXISTS {EPOCH_TABLE}(request_id STRING PRIMARY KEY, epoch INT64, at STRING)"
)
"""The graph's erasure epoch (issue 26): one node per erasing request (request ids and numbers only), in
the Kuzu file itself, so a copy of the file carries the epoch it had when it was taken."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch_current(conn: kuzu.Connection) -> int:
    """The graph's epoch (0: no erasure touched it)."""
    if not rows(conn, "CALL SHOW_TABLES() WHERE name = $t RETURN name", {"t": EPOCH_TABLE}):
        return 0
    got = rows(conn, f"MATCH (n:{EPOCH_TABLE}) RETURN max(n.epoch)")
    return int(got[0][0] or 0) if got else 0


def epoch_advance(conn: kuzu.Connection, request_id: str) -> int:
    """Advance the epoch for `request_id`'s erasure, once (inside the deletes' transaction when there is
    one); returns the epoch of that erasure."""
    known = rows(conn, f"MATCH (n:{EPOCH_TABLE}) WHERE n.request_id = $id RETURN n.epoch", {"id": request_id})
    if known:
        return int(known[0][0])
    epoch = epoch_current(conn) + 1
    rows(
        conn,
        f"CREATE (:{EPOCH_TABLE} {{request_id: $id, epoch: $epoch, at: $at}})",
        {"id": request_id, "epoch": epoch, "at": _now()},
    )
    return epoch


REPLAY_QUERIES = (
    "MATCH (n:Entity) RETURN n.name, n.group_id, n.summary, n.attributes",
    "MATCH (n:RelatesToNode_) RETURN n.name, n.group_id, n.fact, n.attributes",
    "MATCH (n:Episodic) RETURN n.name, n.group_id, n.content, n.source_description",
    "MATCH (n:Community) RETURN n.name, n.group_id, n.summary",
    "MATCH (n:Saga) RETURN n.name, n.group_id",
)

DELETES = (
    ("edges", "MATCH (e:RelatesToNode_) WHERE e.uuid IN $ids DETACH DELETE e"),
    ("episodes", "MATCH (n:Episodic) WHERE n.uuid IN $ids DETACH DELETE n"),
    ("communities", "MATCH (n:Community) WHERE n.uuid IN $ids DETACH DELETE n"),
    ("sagas", "MATCH (n:Saga) WHERE n.uuid IN $ids DETACH DELETE n"),
    ("entities", "MATCH (n:Entity) WHERE n.uuid IN $ids DETACH DELETE n"),
)
"""Edges first (Kuzu models an entity edge as a node between two RELATES_TO rels), entities last."""


def _error(target: Target, key: str, what: str) -> ConfigError:
    return ConfigError(f"targets: target {target.name!r} ({KIND}): key {key!r}: {what}")


def export_fresh(cfg: GraphitiConfig, conn: kuzu.Connection) -> Path:
    """The live graph written into a new database file beside `cfg.db` (returned): a checkpoint, Kuzu's
    `EXPORT DATABASE` into a private folder, `IMPORT DATABASE` into the new file; the export removed.
    The caller keeps the old database open (the agent locked out) meanwhile, closes it, then `replace`s."""
    export = cfg.db.with_name(cfg.db.name + EXPORT_SUFFIX)
    fresh = cfg.db.with_name(cfg.db.name + REBUILD_SUFFIX)
    for leftover in (export, fresh, fresh.with_name(fresh.name + ".wal")):
        if leftover.is_dir():
            shutil.rmtree(leftover)
        elif leftover.exists():
            leftover.unlink()
    try:
        rows(conn, "CHECKPOINT")  # the old file's log applied: closing it then writes nothing more
        rows(conn, f"EXPORT DATABASE '{export.as_posix()}'")
        new_db = kuzu.Database(str(fresh))
        new_conn = kuzu.Connection(new_db)
        try:
            rows(new_conn, f"IMPORT DATABASE '{export.as_posix()}'")
        finally:
            gc.collect()
            new_conn.close()
            new_db.close()
    finally:
        shutil.rmtree(export, ignore_errors=True)
    return fresh


def replace(cfg: GraphitiConfig, fresh: Path) -> None:
    """The rebuilt file in place of the old one, durably. The old file's log goes first (a clean close
    leaves none; the export already holds what one would): a crash between the two steps must never
    leave the new file beside a log Kuzu would replay into it."""
    wal = cfg.db.with_name(cfg.db.name + ".wal")
    if wal.exists():
        wal.unlink()
    os.replace(fresh, cfg.db)
    fd = os.open(cfg.db.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class GraphitiEraser:
    kind: ClassVar[str] = KIND
    tiers: ClassVar[tuple[Tier, ...]] = (Tier.episodic, Tier.semantic, Tier.vectors, Tier.derivatives)

    def check(self, target: Target) -> None:
        cfg = GraphitiConfig.of(target)
        if not cfg.db.is_file():
            raise _error(target, "db", f"no Kuzu database file at {cfg.db}")

    def files(self, target: Target) -> list[Path]:
        cfg = GraphitiConfig.of(target)
        return [cfg.db]

    def _read(self, target: Target, subject: Subject) -> Footprint:
        self.check(target)
        cfg = GraphitiConfig.of(target)
        with opened(cfg, read_only=True) as (_db, conn):
            return Resolver(cfg, subject).find(conn)

    def count(self, target: Target, subject: Subject) -> dict[Tier, int]:
        return self._read(target, subject).counts()

    def held(self, target: Target, subject: Subject) -> int:
        """How many of the subject's rows are under litigation hold (0: none)."""
        return self._read(target, subject).held

    def mentions(self, target: Target, subject: Subject) -> int:
        return self._read(target, subject).mentions

    def erase(self, target: Target, subject: Subject, request_id: str | None = None) -> dict[Tier, TierOutcome]:
        """Erase (see the module docstring); with `request_id`, the graph's erasure epoch advances in the
        deletes' own transaction, after the deletes and before the commit (the rule's record first)."""
        self.check(target)
        cfg = GraphitiConfig.of(target)
        resolver = Resolver(cfg, subject)
        with opened(cfg, read_only=False) as (_db, conn):
            if request_id is not None:
                rows(conn, EPOCH_TABLE_SQL)  # DDL commits on its own in Kuzu: before the transaction
            rows(conn, "BEGIN TRANSACTION")
            try:
                fp = resolver.find(conn)
                if fp.held:
                    raise HoldActive(
                        f"target {target.name}: {fp.held} row(s) of the subject are under litigation hold; "
                        "nothing erased"
                    )
                deleted = {}
                for what, query in DELETES:
                    ids = sorted(getattr(fp, what))
                    if ids:
                        rows(conn, query, {"ids": ids})
                    deleted[what] = len(ids)
                if request_id is not None:
                    epoch_advance(conn, request_id)
                rows(conn, "COMMIT")
            except BaseException:
                rows(conn, "ROLLBACK")
                raise
            started = time.perf_counter()
            fresh = export_fresh(cfg, conn)
        replace(cfg, fresh)
        hygiene = {"rebuild_ms": round((time.perf_counter() - started) * 1000)}
        with opened(cfg, read_only=True) as (_db, conn):
            after = resolver.find(conn).counts()
        before = fp.counts()
        return {
            Tier.episodic: TierOutcome(before[Tier.episodic], after[Tier.episodic], {"episodes": deleted["episodes"]}),
            Tier.semantic: TierOutcome(
                before[Tier.semantic],
                after[Tier.semantic],
                {"entities": deleted["entities"], "edges": deleted["edges"]},
            ),
            Tier.vectors: TierOutcome(before[Tier.vectors], after[Tier.vectors], {"embeddings": fp.embeddings}),
            Tier.derivatives: TierOutcome(
                before[Tier.derivatives],
                after[Tier.derivatives],
                {"communities": deleted["communities"], "sagas": deleted["sagas"], **hygiene},
            ),
        }

    def replay_strings(self, target: Target) -> list[str]:
        """What a replay after a restore looks for a ledger entry's subject in (`tasks/replay_find.py`:
        the graph is no SQLite file): every string of every row of Graphiti's tables (in memory only)."""
        self.check(target)
        out: list[str] = []
        with opened(GraphitiConfig.of(target), read_only=True) as (_db, conn):
            for query in REPLAY_QUERIES:
                out += [v for row in rows(conn, query) for v in row if isinstance(v, str) and v]
        return out

    # --- the erasure epoch (issue 26), kept in the graph itself, read and raised by `tasks/epochs.py` --

    def epoch_current(self, target: Target) -> int:
        """The graph's epoch: 0 when no erasure touched it (no epoch table)."""
        with opened(GraphitiConfig.of(target), read_only=True) as (_db, conn):
            return epoch_current(conn)

    def epoch_advance(self, target: Target, request_id: str) -> int:
        with opened(GraphitiConfig.of(target), read_only=False) as (_db, conn):
            rows(conn, EPOCH_TABLE_SQL)
            return epoch_advance(conn, request_id)

    def epoch_raise(self, target: Target, to: int, marker: str) -> int:
        with opened(GraphitiConfig.of(target), read_only=False) as (_db, conn):
            rows(conn, EPOCH_TABLE_SQL)
            rows(
                conn,
                "MERGE (n:ErasureEpoch {request_id: $id}) SET n.epoch = $epoch, n.at = $at",
                {"id": marker, "epoch": to, "at": _now()},
            )
            return epoch_current(conn)


ERASER = GraphitiEraser()
