"""Probe of kind `reference`: our own nine-tier store, read by the tier probes (`probes.registry`: one
module per tier, run by `probes.window` before and after the cascade, with the probes' own handles on
the store folder, never `memory/`). This module is the kind's entry on the probing side: its files."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from erasure.target_kinds.reference import ReferenceConfig
from erasure.targets import REFERENCE, Target


class ReferenceProbe:
    """The reference store as the probes see it: one folder, every file in it scanned."""

    kind: ClassVar[str] = REFERENCE

    def files(self, target: Target) -> list[Path]:
        return [ReferenceConfig.of(target).path]


PROBE = ReferenceProbe()
