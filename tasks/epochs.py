"""Erasure epochs of every target, the ledger entries of completed erasures, and restored stores.

Where each kind keeps its epoch (`erasure.epoch`, a table `erasure_epoch`):
- the reference store: in `memory.db`, advanced in the same transaction as each batch's deletions and
  sticky rows (`tasks.runner`), and in the scrub's sticky-identity transaction (a subject the store
  held nothing of still changes its sticky lists);
- langgraph-sqlite, chroma, mem0: in the kind's main SQLite file (the first of its eraser's `files`:
  LangGraph's store database, Chroma's `chroma.sqlite3`, mem0's history database). Inside the store's
  own database, not beside it: a backup of that one file (SQLite's online backup, `VACUUM INTO`) or of
  the folder (a tar) carries it, so a restore brings the old epoch back with the old data. The
  framework erases through its own API in its own transactions, so the epoch is advanced right after
  the target's erasure completed: a crash between the two leaves the epoch behind, and the store is
  then taken for restored and replayed (idempotent): the safe side;
- langgraph-postgres: in a table `erasure_epoch` of the agent's own database (configured schema),
  advanced by the eraser in the same transaction as its deletes; a `pg_dump`/`pg_basebackup` carries
  it. A kind like it exposes the hook `tasks.targets.eraser.EpochKeeper` (`epoch_current`,
  `epoch_advance`, `epoch_raise`), which the functions here call instead of opening a SQLite file.

A target is restored when its epoch is behind the ledger's newest entry for it. Until it is replayed,
ingest and requests on it are refused (`refuse_if_restored`, exit 6).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from erasure import epoch, ledger, ledger_seal, request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError, RequestBlocked
from erasure.identity import Identity
from erasure.sqlite import transaction
from erasure.targets import Target, Targets, home_targets
from erasure.tiers import Tier

if TYPE_CHECKING:
    from tasks.targets.eraser import EpochKeeper


class StoreRestored(RequestBlocked):
    """A target was restored from a backup older than its last erasure: refused until replayed (exit 6)."""


def epoch_db(target: Target, home: Home) -> Path:
    """The SQLite file that holds `target`'s erasure epoch: the first of its eraser's `files`."""
    from tasks.targets.eraser import eraser_for

    return eraser_for(target).files(target)[0]


def _keeper(target: Target) -> EpochKeeper | None:
    """The target's eraser when its kind keeps its epoch itself (langgraph-postgres), else None."""
    from tasks.targets.eraser import epoch_keeper, eraser_for

    return epoch_keeper(eraser_for(target))


def tracks_epoch(target: Target, home: Home) -> bool:
    """Whether `target`'s kind keeps an epoch: the reference store, the kinds with the epoch hook
    (langgraph-postgres) and the kinds whose main file is a SQLite file."""
    if _keeper(target) is not None:
        return True
    from tasks.targets.eraser import eraser_for

    files = eraser_for(target).files(target)
    return bool(files) and not files[0].is_dir()


def _open(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.setbusytimeout(30_000)
    return conn


def target_epoch(target: Target, home: Home) -> int:
    """The target's epoch now (0 when its database is missing or no erasure touched it)."""
    keeper = _keeper(target)
    if keeper is not None:
        return keeper.epoch_current(target)
    path = epoch_db(target, home)
    if not path.exists():
        return 0
    conn = apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    conn.setbusytimeout(30_000)
    try:
        return epoch.current(conn)
    finally:
        conn.close()


def advance_target(target: Target, home: Home, request_id: str) -> int:
    """Advance a framework target's epoch for `request_id`'s completed erasure (idempotent)."""
    if not tracks_epoch(target, home):
        return 0
    keeper = _keeper(target)
    if keeper is not None:
        return keeper.epoch_advance(target, request_id)
    conn = _open(epoch_db(target, home))
    try:
        with transaction(conn):
            return epoch.advance(conn, request_id)
    finally:
        conn.close()


def raise_target(target: Target, home: Home, to: int, marker: str) -> int:
    """Bring a target's epoch up to `to` (after a replay re-applied the ledger up to it)."""
    if not tracks_epoch(target, home):
        return 0
    keeper = _keeper(target)
    if keeper is not None:
        return keeper.epoch_raise(target, to, marker)
    conn = _open(epoch_db(target, home))
    try:
        with transaction(conn):
            return epoch.raise_to(conn, to, marker)
    finally:
        conn.close()


def _request_epoch(target: Target, home: Home, request_id: str) -> int:
    keeper = _keeper(target)
    if keeper is not None:
        return keeper.epoch_advance(target, request_id)  # the epoch its deletes' transaction gave it
    path = epoch_db(target, home)
    conn = _open(path)
    try:
        with transaction(conn):
            return epoch.advance(conn, request_id)  # the epoch it already has; made now if a path skipped it
    finally:
        conn.close()


def _sticky(target: Target, request_id: str) -> dict[str, Any]:
    """The target's own suppression rows of `request_id`, when its kind keeps them (`sticky`: reference)."""
    from tasks.targets.eraser import eraser_for

    sticky = getattr(eraser_for(target), "sticky", None)
    return sticky(target, request_id) if sticky is not None else {}


def record_completed(request_id: str, home: Home) -> list[int]:
    """Hook: a request completed all clear: one ledger entry per target (hashes only). A replay
    (registered in the ledger) records nothing new. Returns the entries' seqs."""
    targets = home_targets(home.root, home.store_dir)
    key = ledger.ledger_key(home)
    book = ledger.open_ledger(home)
    try:
        with Engine.borrow(home.engine_db) as engine:
            ledger_seal.check(book, key, home)  # never extend a ledger that was changed behind our back
            if ledger.is_replay(book, request_id):
                return []
            row = request_records.get(engine, request_id)
            subject = request_records.load_envelope(engine, request_id).subject
            store_ids = {subject.id, *request_records.store_ids(engine, request_id)}
            sources = {
                tuple(json.loads(k)) for k in request_records.footprint(engine, request_id, Tier.episodic, "source")
            }
            hashes = ledger.identity_hashes(key, Identity.of(subject))
            hashes += [("store_id", ledger.store_id_hash(key, s)) for s in sorted(store_ids)]
            hashes += [("source_key", ledger.source_key_hash(key, str(s[0]), str(s[1]))) for s in sorted(sources)]
            seqs = []
            for target in (t for t in targets.targets if tracks_epoch(t, home)):
                seqs.append(
                    ledger.record(
                        book,
                        target=target.name,
                        request_id=request_id,
                        epoch=_request_epoch(target, home, request_id),
                        legal_basis=row.legal_basis.value,
                        hashes=hashes,
                        sticky=_sticky(target, request_id),
                    )
                )
            ledger_seal.seal(book, key, home)
            return seqs
    finally:
        book.close()


@dataclass(frozen=True)
class TargetEpoch:
    """A target's epoch against the ledger's: `restored` when the store is behind."""

    target: str
    kind: str
    store_epoch: int
    ledger_epoch: int
    pending: tuple[str, ...]
    """The original requests whose erasures the restored store no longer has (to replay)."""

    @property
    def restored(self) -> bool:
        return self.store_epoch < self.ledger_epoch

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "kind": self.kind,
            "store_epoch": self.store_epoch,
            "ledger_epoch": self.ledger_epoch,
            "restored": self.restored,
            "pending": list(self.pending),
        }


def epochs(home: Home, targets: Targets | None = None) -> list[TargetEpoch]:
    """Every target's epoch against the ledger."""
    targets = targets or home_targets(home.root, home.store_dir)
    if not ledger.ledger_path(home).exists():
        return [TargetEpoch(t.name, t.kind, 0, 0, ()) for t in targets.targets]
    book = ledger.open_ledger(home)
    try:
        ledger_seal.check(book, ledger.ledger_key(home), home)  # a ledger changed behind our back is trusted by nothing
        out = []
        for t in targets.targets:
            try:
                if not tracks_epoch(t, home):
                    continue
                now = target_epoch(t, home)
            except ErasureError:
                continue  # an unusable target (unknown kind, bad keys): listed with its error elsewhere
            now = _accounted(t, home, book, now)
            pending = tuple(e.request_id for e in ledger.entries(book, t.name, after_epoch=now))
            out.append(TargetEpoch(t.name, t.kind, now, ledger.last_epoch(book, t.name), pending))
        return out
    finally:
        book.close()


def _accounted(target: Target, home: Home, book: apsw.Connection, now: int) -> int:
    """The store's epoch as far as its own rows account for the ledger's erasures: each entry up to `now`
    needs its request's row at its epoch, or the marker of its replay. An epoch raised by hand (an
    edited or inserted row of a restored store) accounts for nothing: the store counts as restored from
    the first entry it cannot show. (A kind that keeps its epoch itself, PostgreSQL, is taken at its word.)"""
    if _keeper(target) is not None:
        return now
    path = epoch_db(target, home)
    if not path.exists():
        return now
    conn = apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    conn.setbusytimeout(30_000)
    try:
        held = epoch.rows(conn)
    finally:
        conn.close()
    for e in ledger.entries(book, target.name):
        if e.epoch > now:
            break
        if held.get(e.request_id) != e.epoch and f"replay:{target.name}:{e.seq}" not in held:
            return e.epoch - 1
    return now


def refuse_if_restored(
    home: Home, *, request_id: str | None = None, only: str | None = None, targets: Targets | None = None
) -> None:
    """Hook: refuse (exit 6, one line) when a target (or the one named, or of the kind, `only`) was restored and not
    yet replayed. A registered replay (`request_id`) is let through: it is what brings the store back."""
    if not ledger.ledger_path(home).exists():
        return
    if request_id is not None:
        book = ledger.open_ledger(home)
        try:
            if ledger.is_replay(book, request_id):
                return
        finally:
            book.close()
    for t in epochs(home, targets):
        if t.restored and (only is None or only in (t.target, t.kind)):
            raise StoreRestored(
                f"target {t.target} was restored from a backup: its erasure epoch {t.store_epoch} is behind the "
                f"ledger's {t.ledger_epoch} ({len(t.pending)} erasure(s) to replay): run `erasure restore replay "
                f"--target {t.target}` first"
            )
