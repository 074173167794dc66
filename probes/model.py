"""What a probe is given and what it returns.

A tier module measures with its own queries and file walks and returns `Measurement`s: for one method,
the subject's residue and the size of one bystander population (what is NOT the subject's, e.g.
frames outside the subject's set). The fingerprint holds each population's size as measured before
the cascade; `to_results` pairs them into `ProbeResult`s, so an over-deleting erasure shows up as
`bystanders_after < bystanders_before`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from erasure.subject import Subject
from erasure.tiers import Tier
from probes.views import Unscanned

if TYPE_CHECKING:
    from probes.fingerprint import Fingerprint

BYTES = "bytes"
"""The byte scan's pseudo-tier: every file of the store, not one of the nine tiers."""

PROBE_TIERS: tuple[str, ...] = (BYTES, *(t.value for t in Tier))
"""Every probe tier, in the order the runner runs them (bytes first, before any SQL handle)."""

DEFAULT_HTTP_TIMEOUT = 5.0


class ProbeResult(BaseModel):
    """One probe method's verdict on one tier. Counts only: never an id or content."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tier: str
    method: str
    residue: int
    bystanders_before: int
    bystanders_after: int
    target: str | None = None
    """The target probed (None: the reference store)."""

    def lost_bystanders(self) -> bool:
        """True when the population this method watches shrank: someone else's data went too."""
        return self.bystanders_after < self.bystanders_before

    def failing(self) -> bool:
        """Residue left, or bystanders lost."""
        return self.residue > 0 or self.lost_bystanders()


@dataclass(frozen=True)
class Measurement:
    """What one method saw now: residue of the subject, and the size of a bystander population."""

    method: str
    residue: int
    population: str
    bystanders: int


@dataclass(frozen=True)
class ProbeContext:
    """Everything a probe needs: the store, the subject, the fingerprint taken before the cascade."""

    store_dir: Path
    subject: Subject
    fingerprint: Fingerprint
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    extra_roots: tuple[Path, ...] = ()
    """Other folders of the home the byte scan covers (inbox, outbox, services, Prefect's home): all
    of it but the request vault and the keys."""
    others: tuple[Subject, ...] = ()
    """The window's other subjects, when `fingerprint` stands for a whole window (`probes.window`)."""

    def spellings(self) -> list[tuple[str, str]]:
        """(kind, spelling) of every identifier of the subject (of every subject of the window)."""
        from probes.identity import spellings

        out: list[tuple[str, str]] = []
        for i, subject in enumerate((self.subject, *self.others)):
            out += spellings(subject, self.ids if i == 0 else [subject.id])
        return list(dict.fromkeys(out))

    @property
    def ids(self) -> list[str]:
        """The subject's ids as the store spelled them before the cascade (at least the request's)."""
        return sorted({self.subject.id, *self.fingerprint.subject_ids})

    @property
    def ids_json(self) -> str:
        """`ids` as a JSON array for `json_each(?)`."""
        import json

        return json.dumps(self.ids)


class Verification(BaseModel):
    """Every probe result of one verification run."""

    model_config = ConfigDict(frozen=True)

    probes: list[ProbeResult]
    unscanned: list[Unscanned] = []
    """Files (or members of them) that no decoded view could read: nothing in them is certified."""

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


def population_key(tier: str, population: str) -> str:
    """How a bystander population is named in the fingerprint's baseline."""
    return f"{tier}/{population}"


def to_results(tier: str, measured: list[Measurement], fingerprint: Fingerprint) -> list[ProbeResult]:
    """Pair each measurement with its population's size before the cascade.

    A population the fingerprint did not measure (e.g. a processor unreachable back then) has no
    before: it is reported as unchanged, since no loss can be shown without one.
    """
    out = []
    for m in measured:
        before = fingerprint.bystanders.get(population_key(tier, m.population), m.bystanders)
        out.append(ProbeResult(tier=tier, method=m.method, residue=m.residue,
                               bystanders_before=before, bystanders_after=m.bystanders))
    return out
