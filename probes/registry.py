"""Which module probes which tier, in the order the runner runs them (bytes first: the byte scan
reads the files before any SQL handle is opened on them)."""

from __future__ import annotations

from collections.abc import Callable

from probes import (
    audit_log,
    byte_residue,
    derivatives,
    episodic,
    fine_tune,
    semantic,
    subprocessors,
    uploads,
    vectors,
    working,
)
from probes.context import ProbeContext
from probes.model import PROBE_TIERS, Measurement

Measure = Callable[[ProbeContext], list[Measurement]]

MEASURES: dict[str, Measure] = {
    m.TIER: m.measure
    for m in (
        byte_residue,
        working,
        episodic,
        semantic,
        vectors,
        fine_tune,
        uploads,
        derivatives,
        subprocessors,
        audit_log,
    )
}
assert tuple(MEASURES) == PROBE_TIERS
