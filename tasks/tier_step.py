"""The small protocol every tier step implements, and the context it runs in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import apsw

from erasure.identity import Identity
from erasure.subject import Subject
from erasure.tiers import Tier

Keys = dict[str, set[str]]
"""A tier's items, by kind (e.g. {"frame": {"12", "13"}, "chunk": {...}}). Ids only, as strings."""


@dataclass
class StepContext:
    """What a step needs: ids and open handles, never passed through Prefect (opened in the task)."""

    request_id: str
    subject: Subject
    store_dir: Path
    store: apsw.Connection
    engine: apsw.Connection
    evidence_dir: Path
    sources: list[tuple[str, str]]
    frames: set[int] = field(default_factory=set)
    """Every frame of the subject known so far: summary, turn and derived (footprint and live)."""
    batch_size: int = 10_000
    detail: dict[str, Any] = field(default_factory=dict)
    subject_ids: tuple[str, ...] = ()
    """The subject's ids as the store spells them (case variants, confirmed aliases) and the request's."""
    identity: Identity | None = None
    co_requests: tuple[str, ...] = ()
    """The other requests of the erasure window this step runs in (`tasks.runner.window`): a step that
    rewrites something whole (a corpus) leaves their subjects out of it too, once for the window."""
    items: list[tuple[str, str, str]] = field(default_factory=list)
    """(source, source_ref, item key) of the subject's archived items (footprint and live): what sticky
    erasure records."""

    def ids(self) -> tuple[str, ...]:
        """Every id the subject's rows may carry in the store."""
        return self.subject_ids or (self.subject.id,)

    def who(self) -> Identity:
        """The subject's normalised identifiers."""
        return self.identity or Identity.of(self.subject)

    def add_detail(self, **counts: int) -> None:
        for k, v in counts.items():
            self.detail[k] = int(self.detail.get(k, 0)) + int(v)


@dataclass(frozen=True)
class ExceptionSpec:
    """Something the step could not erase, or must report: opened as an exception on the request."""

    kind: str
    item_key: str
    detail: dict[str, Any]
    ground: str | None = None
    retryable: bool = False


class TierStep(Protocol):
    """One tier of the cascade.

    `resolve` finds the subject's items live (the runner unions them with the footprint stored before
    the first deletion); `count` says how many of `keys` still exist; `erase` removes at most `limit`
    of them inside the runner's store transaction and returns how many it removed; `exceptions` lists
    what must be reported (models trained on the subject, processors that keep failing).
    """

    tier: ClassVar[Tier]

    def resolve(self, ctx: StepContext) -> Keys: ...

    def count(self, ctx: StepContext, keys: Keys) -> int: ...

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int: ...

    def exceptions(self, ctx: StepContext, keys: Keys) -> list[ExceptionSpec]: ...


class BaseStep:
    """Defaults for steps with nothing to report and no transaction of their own."""

    transactional: ClassVar[bool] = True
    """False for steps that manage their own store transactions (HTTP calls must not run inside one)."""

    resolvable_kinds: ClassVar[frozenset[str]] = frozenset()
    """Exception kinds a later run of this step can resolve (a processor that confirms at last): an open
    one the step no longer reports is closed by the runner, kept as evidence."""

    def exceptions(self, ctx: StepContext, keys: Keys) -> list[ExceptionSpec]:
        return []


def ints(keys: Keys, kind: str) -> list[int]:
    """The keys of one kind as sorted ints."""
    return sorted(int(k) for k in keys.get(kind, set()))


def in_list(n: int) -> str:
    return ",".join("?" * n)


def existing(conn: apsw.Connection, table: str, column: str, ids: list[Any], *, extra: str = "") -> list[Any]:
    """Which of `ids` still exist as `table.column` (batched IN lookups on an indexed column)."""
    out: list[Any] = []
    for i in range(0, len(ids), 500):
        b = ids[i : i + 500]
        sql = f"SELECT {column} FROM {table} WHERE {column} IN ({in_list(len(b))}){extra}"
        out += [r[0] for r in conn.execute(sql, b)]
    return out
