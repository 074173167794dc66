"""Declared backups of a target (`[[targets.backups]]` in targets.toml) and what they still hold.

    [[targets]]
    name = "reference"
    kind = "reference"

    [[targets.backups]]
    folder = "/var/backups/agent-memory"  # a folder of backup files; each file's mtime is when it was taken
    pattern = "*.db"                       # optional glob (default: every file)
    retention_days = 35                    # how long a backup is kept after it was taken

    [[targets.backups]]
    folder = "/var/backups/agent-memory/nightly"
    mode = "rewrite"                       # erase inside each backup instead of waiting for it to expire
    option = "store"                       # the target key each backup is a copy of (a file, folder or tar)
    retention_days = 35

    [[targets.backups]]
    command = ["/usr/local/bin/list-snapshots", "agent-memory"]  # prints "<ISO-8601 UTC time> <name>" lines
    retention_days = 7

A backup taken before an erasure still holds the subject until it expires (taken + retention) or is
deleted: the request's pack then lists it with its expiry as a `held_in_backup_until` exception (the
pack says erasedWithExceptions), and once none is left a signed follow-up statement says so
(`proof/backups_followup.py`). A restore of such a backup is caught by the erasure epoch and replayed
(`erasure.ledger`, `tasks/replay.py`).
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from erasure.child_env import child_env
from erasure.errors import ConfigError
from erasure.targets import Target

"""The exception kind a pack lists for a backup that still holds the subject."""
LIST_TIMEOUT = 60.0
WORK_PREFIX = ".erasure-"
"""Names in a backup folder that are ours (a rewrite's work and its sidecar), never backups."""


class BackupSource(BaseModel):
    """One `[[targets.backups]]` table: where a target's backups are and how long they are kept."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    folder: str | None = None
    pattern: str = "*"
    command: list[str] | None = None
    retention_days: int = Field(ge=0)
    mode: Literal["hold", "rewrite"] = "hold"
    """`hold`: a backup taken before an erasure holds the subject until it expires (the pack says so);
    `rewrite`: `erasure backups rewrite` erases inside each backup of this folder (see `tasks/backup_rewrite.py`)."""
    option: str | None = None
    """For `rewrite`: the target key whose file or folder each backup is a copy of (default: the first of
    its kind's `backup_paths`, `erasure.target_kinds`)."""

    @model_validator(mode="after")
    def _one_place(self) -> BackupSource:
        if (self.folder is None) == (self.command is None):
            raise ValueError("give exactly one of folder or command")
        if self.command is not None and not self.command:
            raise ValueError("command must name a program")
        if self.mode == "rewrite" and self.folder is None:
            raise ValueError("mode = 'rewrite' needs a folder (a listing command names backups we cannot open)")
        return self


@dataclass(frozen=True)
class Backup:
    """One backup that exists now: its name, when it was taken, when it expires."""

    target: str
    name: str
    taken_at: datetime
    expires_at: datetime

    @property
    def ref(self) -> str:
        """How packs name it: its time and a digest of its name (a file name may say anything)."""
        digest = hashlib.sha256(self.name.encode()).hexdigest()[:16]
        return f"target:{self.target}:backup:{iso(self.taken_at)}:{digest}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "name": self.name,
            "taken_at": iso(self.taken_at),
            "expires_at": iso(self.expires_at),
            "ref": self.ref,
        }


def iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sources(target: Target) -> list[BackupSource]:
    """The target's declared backup sources (`ConfigError` naming the key when one is malformed)."""
    raw = target.value("backups", [])
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise ConfigError(f"targets: target {target.name!r}: key 'backups' must be [[targets.backups]] tables")
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(BackupSource.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(x) for x in err["loc"]) or "?"
            raise ConfigError(f"targets: target {target.name!r}: backups[{i}].{key}: {err['msg']}") from exc
    return out


def _parse_time(text: str) -> datetime:
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def list_backups(target: Target) -> list[Backup]:
    """Every backup of `target` that exists now, oldest first."""
    out: list[Backup] = []
    for src in sources(target):
        keep = timedelta(days=src.retention_days)
        if src.folder is not None:
            folder = Path(src.folder).expanduser()
            folder = folder if folder.is_absolute() else target.base_dir / folder
            if not folder.is_dir():
                continue
            for p in sorted(folder.glob(src.pattern)):
                if p.name.startswith(WORK_PREFIX):
                    continue  # our own work: a rewrite's copy, its replacement, its sidecar
                if p.is_file() or p.is_dir():
                    taken = datetime.fromtimestamp(p.stat().st_mtime, UTC)
                    out.append(Backup(target.name, p.name, taken, taken + keep))
        else:
            assert src.command is not None
            try:
                done = subprocess.run(
                    src.command,
                    capture_output=True,
                    text=True,
                    timeout=LIST_TIMEOUT,
                    check=True,
                    cwd=target.base_dir,
                    env=child_env(),
                    stdin=subprocess.DEVNULL,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise ConfigError(
                    f"targets: target {target.name!r}: the backup listing command failed: {type(exc).__name__}"
                ) from exc
            for line in done.stdout.splitlines():
                if not line.strip():
                    continue
                when, _, name = line.strip().partition(" ")
                try:
                    taken = _parse_time(when)
                except ValueError as exc:
                    raise ConfigError(
                        f"targets: target {target.name!r}: the backup listing command printed a "
                        "line that does not start with an ISO-8601 time"
                    ) from exc
                out.append(Backup(target.name, name.strip() or when, taken, taken + keep))
    return sorted(out, key=lambda b: (b.taken_at, b.name))


def holding(target: Target, erased_at: datetime, now: datetime | None = None) -> list[Backup]:
    """The backups taken before `erased_at` that still exist and have not expired at `now`."""
    now = now or datetime.now(UTC)
    return [b for b in list_backups(target) if b.taken_at <= erased_at and b.expires_at > now]
