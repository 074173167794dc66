"""Run the independent probes and turn their results into `verification.json`.

`run_probes` runs the byte scan first (before any SQL handle touches the store), then each tier's
probe with its own read-only handle. A probe that cannot run (store missing, table missing, I/O
error) is not silently skipped: it yields a `probe-error` result with residue 1. All clear needs at
least one probe to have run, every residue to be 0 and no bystander population to have shrunk.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
from pydantic import BaseModel, ConfigDict

from erasure.errors import ErasureError, InputError
from erasure.subject import Subject
from erasure.tiers import Tier
from probes.fingerprint import Fingerprint
from probes.model import DEFAULT_HTTP_TIMEOUT, PROBE_TIERS, ProbeContext, ProbeResult, to_results
from probes.registry import MEASURES


class Verification(BaseModel):
    """Every probe result of one verification run."""

    model_config = ConfigDict(frozen=True)

    probes: list[ProbeResult]

    @property
    def all_clear(self) -> bool:
        """At least one probe ran, no residue anywhere, no bystander population shrank."""
        return bool(self.probes) and not any(p.failing() for p in self.probes)

    def failing_tiers(self) -> list[str]:
        """Tiers with residue or lost bystanders, in probe order, each once."""
        return list(dict.fromkeys(p.tier for p in self.probes if p.failing()))

    def residue_tiers(self) -> list[str]:
        """Tiers where a probe found something of the subject."""
        return list(dict.fromkeys(p.tier for p in self.probes if p.residue > 0))

    def lost_bystander_tiers(self) -> list[str]:
        """Tiers where a population of other people's data shrank (over-erasure)."""
        return list(dict.fromkeys(p.tier for p in self.probes if p.lost_bystanders()))


def _tiers(tiers: Iterable[str | Tier] | None) -> list[str]:
    if tiers is None:
        return list(PROBE_TIERS)
    wanted = [str(t.value if isinstance(t, Tier) else t) for t in tiers]
    unknown = sorted(set(wanted) - set(PROBE_TIERS))
    if unknown:
        raise InputError(f"unknown probe tier(s): {', '.join(unknown)}")
    return [t for t in PROBE_TIERS if t in wanted]


def run_probes(store_dir: Path, subject: Subject, fingerprint: Fingerprint, *,
               tiers: Iterable[str | Tier] | None = None,
               http_timeout: float = DEFAULT_HTTP_TIMEOUT,
               extra_roots: Iterable[Path] = ()) -> Verification:
    """Probe `tiers` (default: all nine and the byte scan, which also covers `extra_roots`)."""
    if fingerprint.subject_id != subject.id:
        raise InputError("the fingerprint was taken for another subject")
    ctx = ProbeContext(store_dir=Path(store_dir), subject=subject, fingerprint=fingerprint,
                       http_timeout=http_timeout, extra_roots=tuple(Path(r) for r in extra_roots))
    results: list[ProbeResult] = []
    for tier in _tiers(tiers):
        try:
            results += to_results(tier, MEASURES[tier](ctx), fingerprint)
        except (ErasureError, apsw.Error, OSError) as exc:
            results.append(ProbeResult(tier=tier, method=f"probe-error:{type(exc).__name__}", residue=1,
                                       bystanders_before=0, bystanders_after=0))
    return Verification(probes=results)


def to_json(verification: Verification, request_id: str, verified_at: datetime) -> dict[str, Any]:
    """The `verification.json` document (ids and counts only)."""
    at = verified_at if verified_at.tzinfo else verified_at.replace(tzinfo=UTC)
    return {
        "request_id": request_id,
        "verified_at": at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "all_clear": verification.all_clear,
        "probes": [p.model_dump(exclude={"target"} if p.target is None else set()) for p in verification.probes],
        "failing_tiers": verification.failing_tiers(),
        "residue_tiers": verification.residue_tiers(),
        "lost_bystander_tiers": verification.lost_bystander_tiers(),
    }
