"""Backups that still hold a request's subject: opened as `held_in_backup_until` exceptions when the
request is verified (so its pack lists each with its expiry and says erasedWithExceptions), listed for
the team while open, and ended when each backup has expired or is gone (then the follow-up statement
is due: `service/restore.py` signs it with `proof/backups_followup.py`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import apsw

from erasure import request_records
from erasure.backups import holding, iso, list_backups
from erasure.config import Home
from erasure.errors import ErasureError
from erasure.exception_kinds import HELD_IN_BACKUP
from erasure.targets import home_targets
from erasure.tiers import BYTES_SCOPE
from tasks import backup_rewrite

GROUND = (
    "held in a backup taken before the erasure until {until}: put beyond use (a restore is refused until "
    "its erasures are replayed), erased when it expires"
)


def hold_in_backups(engine: apsw.Connection, request_id: str, home: Home, now: datetime | None = None) -> int:
    """Hook of the verification: one open exception per declared backup, taken before now, that still
    exists and has not expired. Returns how many."""
    now = now or datetime.now(UTC)
    n = 0
    for target in home_targets(home.root, home.store_dir).targets:
        for b in holding(target, erased_at=now, now=now):
            until = iso(b.expires_at)
            request_records.open_exception(
                engine,
                request_id,
                BYTES_SCOPE,
                HELD_IN_BACKUP,
                f"{b.ref}:until:{until}",
                {"target": target.name, "taken_at": iso(b.taken_at), "expires_at": until},
                GROUND.format(until=until),
            )
            n += 1
    return n


@dataclass(frozen=True)
class Held:
    """One open backup exception of a request, and whether that backup has ended by now."""

    request_id: str
    exception_id: int
    target: str
    ref: str
    taken_at: str
    expires_at: str
    ended: str | None
    """None: the backup still holds the subject; 'expired', 'deleted' or 'rewritten' (erased inside it) otherwise."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "target": self.target,
            "backup": self.ref,
            "taken_at": self.taken_at,
            "expires_at": self.expires_at,
            "ended": self.ended,
        }


def open_holds(engine: apsw.Connection, home: Home, now: datetime | None = None) -> list[Held]:
    """Every open `held_in_backup_until` exception of every request, with the backup's state now."""
    now = now or datetime.now(UTC)
    targets = home_targets(home.root, home.store_dir)
    existing: dict[str, set[str]] = {}
    rewritten: dict[str, dict[str, set[str]]] = {}
    for t in targets.targets:
        try:
            existing[t.name] = {b.ref for b in list_backups(t)}
            rewritten[t.name] = backup_rewrite.rewritten(t)
        except ErasureError:
            existing[t.name] = set()
    out = []
    rows = engine.execute(
        "SELECT exception_id, request_id, item_key, detail FROM exceptions WHERE kind = ? AND "
        "closed_at IS NULL ORDER BY request_id, exception_id",
        (HELD_IN_BACKUP,),
    ).fetchall()
    for eid, rid, item_key, detail in rows:
        d = json.loads(str(detail or "{}"))
        ref = str(item_key).rpartition(":until:")[0]
        until = str(d.get("expires_at"))
        target = str(d.get("target"))
        ended = (
            "expired"
            if until <= iso(now)
            else "deleted"
            if ref not in existing.get(target, set())
            else "rewritten"
            if str(rid) in rewritten.get(target, {}).get(ref, set())
            else None
        )
        out.append(Held(str(rid), int(str(eid)), str(d.get("target")), ref, str(d.get("taken_at")), until, ended))
    return out


def close_ended(engine: apsw.Connection, holds: list[Held]) -> None:
    """Close the exceptions of backups that ended (after their follow-up statement was written)."""
    for h in holds:
        if h.ended is not None:
            request_records.close_exception(engine, h.exception_id)


def by_request(holds: list[Held]) -> dict[str, list[Held]]:
    out: dict[str, list[Held]] = {}
    for h in holds:
        out.setdefault(h.request_id, []).append(h)
    return out
