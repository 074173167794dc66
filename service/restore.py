"""A store restored from a backup (`erasure restore ...`, `erasure backups ...`): its erasure epoch
against the ledger, the replay that erases again what it brought back, the declared backups' rewrite
and their follow-up statements.

A restored store (its epoch is behind the ledger's) refuses ingest and requests until its replay has
re-applied every erasure the backup predates: each as a replay request named after the original one,
through the same cascade, verification and signed pack. The flow run itself is the caller's (`run`):
this layer runs without Prefect."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from erasure import ledger
from erasure.backups import iso
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.targets import Target, Targets
from proof.history import current_pack
from service.outcome import Outcome
from service.runs import verification_doc
from service.scope import home_tenant


class RunState(Protocol):
    """The final state of a flow run, as far as a replay reads it."""

    name: str
    message: str | None

    def is_completed(self) -> bool: ...


RunFlow = Callable[[str], RunState]
"""Runs the erasure-request flow of one request to its end (the caller's Prefect)."""


def epoch_rows(h: Home, found: Targets) -> list[dict[str, Any]]:
    """Each target's erasure epoch against the ledger: restored (behind) or not, and what to replay."""
    from tasks.epochs import epochs

    return [e.as_dict() for e in epochs(h, found)]


@contextmanager
def _targets_env(path: Path | None) -> Iterator[None]:
    """`ERASURE_TARGETS` names `path` (when given) for the flows run inside, and is put back after."""
    before = os.environ.get("ERASURE_TARGETS")
    try:
        if path is not None:
            os.environ["ERASURE_TARGETS"] = str(path)
        yield
    finally:
        if before is None:
            os.environ.pop("ERASURE_TARGETS", None)
        else:
            os.environ["ERASURE_TARGETS"] = before


def replay(h: Home, found: Targets, target: str, run: RunFlow) -> dict[str, Any]:
    """Re-apply every erasure newer than `target`'s epoch (see the module docstring); one row per
    replay, and the store's epoch against the ledger's after. Raises on the first replay that did not
    end all clear (`Outcome.residue`'s error on residue, else `Outcome.replay_failed`'s)."""
    from tasks import replay as rp
    from tasks.epochs import epochs

    t = found.by_name(target)
    now = next(e for e in epochs(h, found) if e.target == t.name)
    results: list[dict[str, Any]] = []
    if now.restored:
        book = ledger.open_ledger(h)
        try:
            pending = ledger.entries(book, t.name, after_epoch=now.store_epoch)
        finally:
            book.close()
        tenant = home_tenant(h, found)
        one = rp.replay_targets_file(found.source, t, h, tenant)
        try:
            with _targets_env(one):
                for entry in pending:
                    results.append(replay_one(h, t, entry, tenant, run))
        finally:
            if one is not None:
                one.unlink(missing_ok=True)
    after = next(e for e in epochs(h, found) if e.target == t.name)
    return {
        "target": t.name,
        "replayed": results,
        "store_epoch": after.store_epoch,
        "ledger_epoch": after.ledger_epoch,
        "restored": after.restored,
    }


def replay_one(
    h: Home, t: Target, entry: ledger.Entry, tenant: str, run: RunFlow, tag: str = "replay"
) -> dict[str, Any]:
    """Re-apply one ledger entry on target `t` (a restored store, or a restored copy of a backup): find
    the subject by the ledger's keyed hashes, run the request flow as `<original>.<tag>-<seq>`, and bring
    the store's epoch up to the entry's. Raises when it did not end all clear."""
    from tasks import replay as rp

    found = rp.find_subject(h, t, entry)
    if found.subject is None:  # no item of the store is keyed by the subject (ledger hashes): nothing to erase
        rp.finish(h, t, entry, f"{rp.replay_id(entry, tag)}", "nothing_found")
        return {
            "original": entry.request_id,
            "replay": None,
            "found_by": None,
            "outcome": "nothing_found",
            "pack": None,
        }
    rid = rp.submit_replay(h, t, entry, found, tenant, rp.replay_id(entry, tag))
    state = run(rid)
    doc = verification_doc(h, rid)
    if not (state.is_completed() and doc.get("all_clear")):
        book = ledger.open_ledger(h)
        try:
            ledger.end_replay(book, rid, "failed")
        finally:
            book.close()
        if doc and not doc.get("all_clear"):
            Outcome.residue.raise_error(
                f"replay {rid} of {entry.request_id}: verification found residue; the store stays refused"
            )
        Outcome.replay_failed.raise_error(
            f"replay {rid} of {entry.request_id} did not complete: {state.message or state.name}"
        )
    rp.finish(h, t, entry, rid, "all_clear")
    pack = current_pack(h.evidence_dir(rid))
    return {
        "original": entry.request_id,
        "replay": rid,
        "found_by": found.source,
        "outcome": "all_clear",
        "pack": str(pack) if pack.exists() else None,
    }


def declared_backups(found: Targets) -> list[dict[str, Any]]:
    """Each target's declared backups (`[[targets.backups]]`) with their expiry."""
    from erasure.backups import list_backups

    return [b.as_dict() for t in found.targets for b in list_backups(t)]


def followups(engine: Engine, h: Home, now: datetime | None = None) -> dict[str, Any]:
    """Open backup expiries per request; for each request none of whose backups holds the subject any
    longer, sign the follow-up statement beside its pack (with the engine key, when the home has one)
    and close the exceptions. Returns both."""
    from proof.backups_followup import write_followup
    from tasks.backup_holds import by_request, close_ended, open_holds

    now = now or datetime.now(UTC)
    with engine.lent() as conn:
        holds = open_holds(conn, h, now)
        written: list[str] = []
        for rid, mine in by_request(holds).items():
            pack = current_pack(h.evidence_dir(rid))
            if all(x.ended for x in mine) and pack.exists() and (h.keys_dir / "engine.pem").exists():
                write_followup(
                    h.evidence_dir(rid),
                    h.keys_dir / "engine.pem",
                    rid,
                    [{"ref": x.ref, "expires_at": x.expires_at, "ended": x.ended} for x in mine],
                    iso(now),
                )
                close_ended(conn, mine)
                written.append(rid)
    return {"open": [x.as_dict() for x in holds if x.request_id not in written], "followups_written": written}


def restored_and_held(engine: Engine, h: Home) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Restored targets waiting for their replay, and backup expiries still open (the SLA monitor's
    report): ids, epochs and times only."""
    from tasks.backup_holds import open_holds
    from tasks.epochs import epochs

    restored = [e.as_dict() for e in epochs(h) if e.restored]
    with engine.lent() as conn:
        held = [x.as_dict() for x in open_holds(conn, h) if x.ended is None]
    return restored, held


def rewrite_backups(h: Home, t: Target, tenant: str, run: RunFlow) -> list[dict[str, Any]]:
    """Erase inside each backup of `t`'s `mode = "rewrite"` folders: restore a copy beside it, replay
    every erasure the backup predates on the copy, and put the erased copy in place of the backup with
    its original backup time. One row per backup (ids and times)."""
    from tasks import backup_rewrite as bw
    from tasks.epochs import target_epoch

    out: list[dict[str, Any]] = []
    with _targets_env(None):
        for src, path, backup in bw.backups_to_rewrite(t):
            copy = bw.restore_copy(t, src, path, backup, tenant)
            try:
                start = target_epoch(copy.target, h)
                book = ledger.open_ledger(h)
                try:
                    pending = ledger.entries(book, t.name, after_epoch=start)
                finally:
                    book.close()
                row: dict[str, Any] = {
                    "name": backup.name,
                    "ref": backup.ref,
                    "taken_at": backup.as_dict()["taken_at"],
                    "epoch_before": start,
                    "epoch": start,
                    "applied": [],
                    "replays": [],
                }
                if pending:
                    os.environ["ERASURE_TARGETS"] = str(copy.targets_file)
                    tag = "rewrite-" + backup.ref.rsplit(":", 1)[-1][:8]
                    for entry in pending:
                        row["replays"].append(replay_one(h, copy.target, entry, tenant, run, tag=tag))
                    row["applied"] = [e.request_id for e in pending]
                    row["epoch"] = target_epoch(copy.target, h)
                    bw.replace(copy)
                    bw.record(copy, row["epoch"], row["applied"])
                out.append(row)
            finally:
                shutil.rmtree(copy.work, ignore_errors=True)
    return out
