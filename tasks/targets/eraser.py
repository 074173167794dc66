"""The protocol every target kind's erasing module implements, and how a kind's module is found.

A kind's module (or package) is `tasks/targets/<kind with - as _>` and exposes `ERASER`; its keys are read
by its configuration model, `erasure/target_kinds/<kind with - as _>.py` (the probes read them with the same
model). `ERASER` is an object with:

- `kind`: the kind's name as written in targets.toml;
- `tiers`: the tiers of the nine this kind holds (the others are "not applicable" for it);
- `check(target)`: raise `ConfigError` naming the key when the target's configuration is unusable;
- `files(target)`: every file and folder that belongs to the target (for `targets list`);
- `count(target, subject)`: per tier, how many items of the subject the target holds now;
- `erase(target, subject)`: erase them through the framework's API where that is right, then close
  what the framework leaves (side tables, WAL copies, freed pages, index files); return per tier the
  counts before and after and a detail of counts. It must be idempotent (a rerun after a crash finds
  less, erases the rest), wait on the agent's locks instead of failing, never corrupt the store, and
  leave the framework able to open it.
- `mentions(target, subject)`: how many OTHER people's items name the subject (reported, not erased).

Nothing here may put an identifier or content in its return values: counts only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar, runtime_checkable

import apsw

from erasure.errors import StoreError
from erasure.sqlite import checkpoint_truncate, journal_mode
from erasure.subject import Subject
from erasure.target_kinds import check_config, kind_part
from erasure.targets import Target
from erasure.tiers import Tier


@dataclass(frozen=True)
class TierOutcome:
    """One tier of one target after an erase: counts only."""

    before: int
    after: int
    detail: dict[str, int] = field(default_factory=dict)


class TargetEraser(Protocol):
    kind: ClassVar[str]
    tiers: ClassVar[tuple[Tier, ...]]

    def check(self, target: Target) -> None: ...

    def files(self, target: Target) -> list[Path]: ...

    def count(self, target: Target, subject: Subject) -> dict[Tier, int]: ...

    def erase(self, target: Target, subject: Subject) -> dict[Tier, TierOutcome]: ...

    def mentions(self, target: Target, subject: Subject) -> int: ...


@runtime_checkable
class EpochKeeper(Protocol):
    """A kind that keeps its erasure epoch itself, not in a SQLite file (langgraph-postgres: a table in
    the agent's database): `erase` takes the request id and advances the epoch in the deletes' own
    transaction; `tasks/epochs.py` reads and raises it through the other three (issue 26)."""

    def erase(self, target: Target, subject: Subject, request_id: str | None = None) -> dict[Tier, TierOutcome]: ...

    def epoch_current(self, target: Target) -> int: ...

    def epoch_advance(self, target: Target, request_id: str) -> int: ...

    def epoch_raise(self, target: Target, to: int, marker: str) -> int: ...


def epoch_keeper(eraser: object) -> EpochKeeper | None:
    """The eraser as an `EpochKeeper` when its kind keeps its own epoch, else None."""
    return eraser if isinstance(eraser, EpochKeeper) else None


def eraser_for(target: Target) -> TargetEraser:
    """The erasing module of the target's kind (`ConfigError` for a kind nobody implements)."""
    eraser: TargetEraser = kind_part(target, "tasks.targets", "ERASER", "eraser", f"unknown kind {target.kind!r}")
    check_config(target)  # its keys, read by the kind's one configuration model
    return eraser


T = TypeVar("T")
WAIT_SECONDS = 120.0
"""How long an eraser waits on the agent's locks beyond SQLite's own busy timeout before it gives up."""
CHECKPOINT_ATTEMPTS = 40


def retry_busy(fn: Callable[[], T], what: str, *, seconds: float = WAIT_SECONDS) -> T:
    """Run `fn`, again while SQLite reports the database busy (the agent holds a lock past the busy
    timeout), backing off up to `seconds`; then `StoreError` (nothing is lost: the step reruns)."""
    deadline = time.monotonic() + seconds
    pause = 0.05
    while True:
        try:
            return fn()
        except apsw.BusyError as exc:
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"{what} stayed locked by another connection for {seconds:.0f} s; nothing is lost: rerun the step"
                ) from exc
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


def rebuild_pages(conn: apsw.Connection, what: str) -> dict[str, int]:
    """Byte hygiene of one SQLite file after its deletes (see tasks/scrub.py for why): resample planner
    statistics where `sqlite_stat4` keeps sampled keys, rebuild every page (`VACUUM`), and truncate the
    WAL. Run it on every erase, also when nothing was found: a rerun after a crash between the deletes
    and this must still remove the bytes, and nothing on disk says whether that is needed."""
    started = time.perf_counter()
    analyzed = (
        conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'sqlite_stat4'").fetchone()
        is not None
    )
    if analyzed:
        retry_busy(lambda: conn.execute("ANALYZE"), what)
    retry_busy(lambda: conn.execute("VACUUM"), what)
    if journal_mode(conn) == "wal" and checkpoint_truncate(conn, attempts=CHECKPOINT_ATTEMPTS)[0]:
        raise StoreError(
            f"a reader of {what} kept its WAL from being truncated: the erased rows are gone but "
            "old pages are still in the -wal file; rerun the step"
        )
    return {"analyzed": int(analyzed), "vacuum_ms": int((time.perf_counter() - started) * 1000)}
