"""Replay: re-apply, on a restored store, every ledger entry newer than the store's erasure epoch.

For each entry, in epoch order:
1. find the subject in the restored store by the entry's keyed hashes: every subject id the store
   files items under, and every person, email and phone entity, is normalised (`erasure.identity`)
   and hashed under the ledger key; those that match the entry are the subject's, and their values
   (read from the store itself, not from the vault) make the replay's subject. A framework store is
   read the same way over every item's identifiers, namespace labels and metadata values
   (`tasks/replay_find.py`). When the store holds nothing of them, the original request's vault is
   used when it still exists and its hashes match the entry; without it, nothing is left to erase.
2. vault a replay request (`<original>.replay-<seq>`, registered in the ledger, so a restored store
   lets it through) and run the same erasure-request flow on that one target (the caller does);
3. after it ended all clear: put the entry's sticky rows back into the store (the suppression lists
   of the original request, keyed hashes as they were) and bring the store's epoch up to the entry's,
   in one transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from erasure import ledger, request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import NotFound
from erasure.identity import Identity
from erasure.ledger import Entry
from erasure.models import ErasureRequestEnvelope
from erasure.request_ids import REQUEST_ID_MAX_CHARS
from erasure.subject import Subject
from erasure.targets import Target
from tasks.epochs import raise_target


@dataclass(frozen=True)
class Found:
    """The replay's subject, and where it was found: `store` (by keyed hashes), `vault`, or None."""

    subject: Subject | None
    source: str | None
    aliases: int = 0


def replay_id(entry: Entry, tag: str = "replay") -> str:
    """The replay request's id: it names the original request (and so does every file of its pack).
    `tag` tells replays of a restored store (`replay`) from rewrites of a backup (`rewrite-<backup>`)."""
    suffix = f".{tag}-{entry.seq}"
    return entry.request_id[: REQUEST_ID_MAX_CHARS - len(suffix)] + suffix


def _from_vault(home: Home, key: bytes, entry: Entry) -> Found:
    """The original request's subject, when its vault still exists and matches the entry's hashes."""
    with Engine.borrow(home.engine_db) as engine:
        try:
            subject = request_records.load_envelope(engine, entry.request_id).subject
        except NotFound:
            return Found(None, None)
    if all(entry.has(kind, digest) for kind, digest in ledger.identity_hashes(key, Identity.of(subject))):
        return Found(subject, "vault")
    return Found(None, None)


def find_subject(home: Home, target: Target, entry: Entry) -> Found:
    """The subject of `entry` in the restored `target` (see the module's docstring)."""
    from tasks.targets.eraser import eraser_for

    key = ledger.ledger_key(home)
    own = getattr(eraser_for(target), "find_subject", None)  # a kind that reads its subject itself (reference)
    if own is not None:
        found: Found = own(target, key, entry)
    else:
        from tasks.replay_find import harvest, match

        subject, _aliases = match(key, entry, harvest(target))  # the framework erasers find by the id alone
        found = Found(subject, "store" if subject is not None else None)
    if found.subject is not None:
        return found
    return _from_vault(home, key, entry)


def submit_replay(home: Home, target: Target, entry: Entry, found: Found, tenant: str, rid: str | None = None) -> str:
    """Vault the replay request for `entry` (id `rid`, default `replay_id(entry)`) and register it in the
    ledger; returns its id."""
    assert found.subject is not None
    rid = rid or replay_id(entry)
    book = ledger.open_ledger(home)
    try:
        ledger.start_replay(book, rid, entry)
    finally:
        book.close()
    now = datetime.now(UTC)
    env = ErasureRequestEnvelope.model_validate(
        {
            "request_id": rid,
            "tenant_id": tenant,
            "subject": found.subject.model_dump(exclude_none=True),
            "legal_basis": entry.legal_basis,
            "received_at": (now - timedelta(seconds=1)).isoformat(),
            "requester_identity_proof_ref": f"ledger:{entry.request_id}",
            "reason": f"replay of erasure {entry.request_id} after target {target.name} was restored from a backup",
        }
    )
    with Engine.borrow(home.engine_db) as engine:
        try:
            request_records.get(engine, rid)
        except NotFound:
            request_records.submit(engine, env, now=now)
            if found.aliases:
                request_records.confirm_aliases(engine, rid, found.aliases)
    return rid


def finish(home: Home, target: Target, entry: Entry, rid: str, outcome: str) -> int:
    """The entry is re-applied: its sticky rows back in the store and the store's epoch up to the
    entry's (one transaction where the kind offers `reapply`). Returns the store's epoch."""
    marker = f"replay:{target.name}:{entry.seq}"
    from tasks.targets.eraser import eraser_for

    reapply = getattr(eraser_for(target), "reapply", None)  # sticky rows and epoch in one transaction (reference)
    if reapply is not None:
        now: int = reapply(target, entry, marker)
    else:
        now = raise_target(target, home, entry.epoch, marker)
    book = ledger.open_ledger(home)
    try:
        ledger.end_replay(book, rid, outcome)
    finally:
        book.close()
    return now


def replay_targets_file(source: Path | None, target: Target, home: Home, tenant: str) -> Path | None:
    """A targets file naming `target` alone, beside the file it was read from (so its relative paths
    read the same); None for the default home (the reference store alone)."""
    if source is None:
        return None
    lines = [
        f"tenant = {json.dumps(tenant)}",
        "[[targets]]",
        f"name = {json.dumps(target.name)}",
        f"kind = {json.dumps(target.kind)}",
    ]
    for k, v in target.options().items():
        if isinstance(v, str | int | bool) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            lines.append(f"{k} = {json.dumps(v)}")
    out = source.parent / f".erasure-replay-{target.name}.toml"
    out.write_text("\n".join(lines) + "\n")
    return out
