"""Intake: a request envelope vaulted and its clock started, from a file (`erasure request submit`) or
from the inbox (`erasure intake`, the `intake` deployment)."""

from __future__ import annotations

import fcntl
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from erasure import inbox as inbox_mod
from erasure import request_records
from erasure.clocks import ClockPolicy
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError
from erasure.models import ErasureRequestEnvelope, load_envelope_file, parse_envelope

INBOX_GLOB = "*.json"


def read_envelope(file: Path) -> ErasureRequestEnvelope:
    """The envelope in `file`, validated (`InputError` naming the file and the field): the command
    reads it before it opens the engine, so bad input writes nothing."""
    return load_envelope_file(file)


def submit(
    engine: Engine, envelope: ErasureRequestEnvelope, *, now: datetime | None = None
) -> request_records.SubmitResult:
    """Vault a validated envelope and start its legal clock; idempotent for the same envelope."""
    with engine.lent() as conn:
        return request_records.submit(conn, envelope, now=now or datetime.now(UTC), policy=ClockPolicy.from_env())


@dataclass
class IntakeResult:
    """What one drain of the inbox did (request ids and counts only)."""

    vaulted: list[str] = field(default_factory=list)
    already_present: list[str] = field(default_factory=list)
    rejected: int = 0
    purged: int = 0
    """Rejected envelopes removed because they were older than the retention."""
    refused: int = 0
    """Entries that are not regular files of their own (links, hard links, folders, devices): left alone."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "vaulted": self.vaulted,
            "already_present": self.already_present,
            "rejected": self.rejected,
            "purged": self.purged,
            "refused": self.refused,
        }


def drain_inbox(
    engine: Engine, h: Home, *, now: datetime | None = None, policy: ClockPolicy | None = None, limit: int | None = None
) -> IntakeResult:
    """Vault every `*.json` envelope in the inbox (oldest name first) and delete each file once vaulted
    (also when the identical envelope was already vaulted). A bad or conflicting envelope is kept
    encrypted in `inbox/rejected/` under a random name, with its error in a `.error.txt` beside it
    (`erasure.inbox`), and its file is deleted. Rejected envelopes older than
    `ERASURE_INBOX_RETENTION_DAYS` are purged, and plaintext ones left by older versions sealed, on
    every drain. One drain at a time (a file lock)."""
    inbox = h.inbox_dir
    inbox.mkdir(parents=True, exist_ok=True)
    policy = policy or ClockPolicy.from_env()
    result = IntakeResult()
    with open(inbox / ".intake.lock", "a+") as lock, engine.lent() as conn:
        fcntl.flock(lock, fcntl.LOCK_EX)
        inbox_mod.seal_legacy(h)
        result.purged = inbox_mod.purge_expired(h, now=now)
        result.refused = inbox_mod.strangers(h)
        files = sorted(p for p in inbox.glob(INBOX_GLOB) if not p.name.startswith("."))
        for path in files[:limit]:
            at = now or datetime.now(UTC)
            name = inbox_mod.new_name()  # errors name the envelope by this, never by its file name
            # Read without following a link, a regular file of its own only: a link to another user's
            # file would be sealed here and then overwritten with zeros (`erasure.inbox`).
            raw = inbox_mod.read_entry(path)
            if raw is None:
                inbox_mod.refuse()
                result.refused += 1
                continue
            try:
                envelope: ErasureRequestEnvelope = parse_envelope(raw, source=f"envelope {name}", now=at)
                res = request_records.submit(conn, envelope, now=at, policy=policy)
            except ErasureError as exc:
                message = str(exc) if str(exc).startswith(f"envelope {name}") else f"envelope {name}: {exc}"
                inbox_mod.keep_rejected(h, raw, message, name=name, now=at)
                inbox_mod.shred(path)
                result.rejected += 1
                continue
            (result.vaulted if res.created else result.already_present).append(res.request_id)
            inbox_mod.shred(path)
    return result


def submit_envelope(
    engine: Engine, raw: bytes, *, source: str = "the form", now: datetime | None = None
) -> request_records.SubmitResult:
    """Validate an envelope given as JSON (the request desk's form; `InputError` naming the field, never
    quoting a value), vault it and start its legal clock; idempotent for the same envelope."""
    at = now or datetime.now(UTC)
    return submit(engine, parse_envelope(raw, source=source, now=at), now=at)


def list_requests(engine: Engine) -> list[request_records.RequestRow]:
    """Every request in the vault, soonest deadline first (ids, states and clocks: no identifier)."""
    with engine.lent() as conn:
        return request_records.list_requests(conn)


DESK_FILE = "desk.json"


def desk_file(h: Home) -> Path:
    """Where the running request desk writes its address and pid (`cli.desk`)."""
    return h.root / "server" / DESK_FILE


def desk_url(h: Home) -> str | None:
    """The running request desk's address, or None."""
    import json

    try:
        return str(json.loads(desk_file(h).read_text())["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
