"""The protocol every target kind's probing module implements; it shares no code with the erasing side.

A kind's module (or package) is `probes/targets/<kind with - as _>` and exposes `PROBE`; its keys are read
by its configuration model, `erasure/target_kinds/<kind with - as _>.py` (settings only: the erasing side
uses the same model, and no code that reads a store). `PROBE` is an object with:

- `kind`: the kind's name as written in targets.toml;
- `files(target)`: every file of the target to scan byte by byte (main files, `-wal`, `-shm`,
  journals, segment folders, index files), read by the probes' own walk;
- `fingerprint(target, subject)`: BEFORE the erasure, with the probe's own read-only access (open the
  files directly, not through the framework): the needles (identifiers, distinctive content, the
  subject's vectors in every encoding the store uses: float32 for sqlite-vec and Chroma's HNSW
  files, pickled float64 for local Qdrant) and the size of each bystander population;
- `measure(target, subject, fp)`: AFTER the erasure, logical probes that read the files directly:
  one `(tier, Measurement)` per method (the tier of the nine it watches; the subject's residue and a
  bystander population's size now).

The byte scan of `files(target)` with the fingerprint's needles is done by `probes.targets.run`, the
same for every kind. Counts only, never an identifier or content, in anything returned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

from erasure.subject import Subject
from erasure.target_kinds import check_config, kind_part
from erasure.targets import Target
from probes.model import Measurement
from probes.needles import Needle


class TargetFingerprint(BaseModel):
    """What a kind's probe saw of the subject before the erasure. Sensitive: kept sealed."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")

    target: str
    needles: list[Needle] = Field(default_factory=list, repr=False)
    bystanders: dict[str, int] = Field(default_factory=dict)
    """population -> size before the erasure (other people's items, threads, vectors...)."""
    subject_before: dict[str, int] = Field(default_factory=dict)
    """method -> the subject's items each logical probe saw before the erasure."""
    mentions: int = 0
    """Other people's items that name the subject (reported per target, not erased)."""
    mentioned_groups: list[int] = Field(default_factory=list)
    """Needle groups (identifiers) that occur inside those items: their byte hits are explained by the
    reported mentions. Hits of any other identifier group are residue."""
    state: dict[str, Any] = Field(default_factory=dict, repr=False)
    """Anything else the kind's own `measure` needs later (ids, keys): never logged."""


class TargetProbe(Protocol):
    kind: ClassVar[str]

    def files(self, target: Target) -> list[Path]: ...

    def fingerprint(self, target: Target, subject: Subject) -> TargetFingerprint: ...

    def measure(self, target: Target, subject: Subject, fp: TargetFingerprint) -> list[tuple[str, Measurement]]: ...


def probe_for(target: Target) -> TargetProbe:
    """The probing module of the target's kind (`ConfigError` for a kind nobody implements)."""
    probe: TargetProbe = kind_part(target, "probes.targets", "PROBE", "probe", f"no probe for kind {target.kind!r}")
    check_config(target)  # its keys, read by the kind's one configuration model
    return probe
