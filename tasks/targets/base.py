"""The protocol every target kind's erasing module implements, and how a kind's module is found.

A kind's module is `tasks/targets/<kind with - as _>.py` and exposes `ERASER`, an object with:

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

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from erasure.errors import ConfigError
from erasure.subject import Subject
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


def eraser_for(target: Target) -> TargetEraser:
    """The erasing module of the target's kind (`ConfigError` for a kind nobody implements)."""
    try:
        module = importlib.import_module(f"tasks.targets.{target.module}")
    except ModuleNotFoundError as exc:
        if exc.name != f"tasks.targets.{target.module}":
            raise
        raise ConfigError(f"targets: target {target.name!r}: unknown kind {target.kind!r}") from exc
    eraser: Any = getattr(module, "ERASER", None)
    if eraser is None:
        raise ConfigError(f"targets: kind {target.kind!r} has no eraser")
    return eraser  # type: ignore[no-any-return]
