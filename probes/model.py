"""What a probe returns.

A tier module measures with its own queries and file walks and returns `Measurement`s: for one method,
the subject's residue and the size of one bystander population (what is NOT the subject's, e.g.
frames outside the subject's set). The fingerprint holds each population's size as measured before
the cascade; `probes.context.to_results` pairs them into `ProbeResult`s, so an over-deleting erasure shows up as
`bystanders_after < bystanders_before`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from erasure.tiers import Tier
from probes.bytescan import ScannedFile

BYTES = "bytes"
"""The byte scan's pseudo-tier: every file of the store, not one of the nine tiers."""

PROBE_TIERS: tuple[str, ...] = (BYTES, *(t.value for t in Tier))
"""Every probe tier, in the order the runner runs them (bytes first, before any SQL handle)."""

DEFAULT_HTTP_TIMEOUT = 5.0


class Unscanned(BaseModel):
    """A file, or a member of one, that no view could read. Never a path: digest, size and reason."""

    model_config = ConfigDict(frozen=True)

    sha256: str
    size: int
    reason: str
    folder: str = Field(default="", exclude=True)
    """The top folder of the root it lies in ('' at the root): which tier wrote it (never reported: a
    folder can be named after a person)."""
    tier: str = "bytes"
    """The tier whose files hold it (`bytes`: a file no one tier owns)."""
    target: str | None = None
    """The target it lies in (None: the reference store)."""


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


class OthersContent(BaseModel):
    """A place where the subject is named inside someone else's content that the erasure may not rewrite
    (another person's attachment): attributed to its owner and declared, never residue and never all
    clear (docs/matching.md 7.2). Labels only, never a path or a value."""

    model_config = ConfigDict(frozen=True)

    tier: str
    kind: str
    """What the place is: `attachment` (another person's upload) or `unconfigured-database` (a SQLite file
    under the store that no target names)."""
    label: str
    """Where: the blob's opaque store key (random, never derived from content or a person)."""
    hits: int
    """How many of the subject's identifier spellings were found there."""


class ResidueFile(BaseModel):
    """A file the raw byte scan found the subject in, after the cascade. The path is in memory only, as
    the scan manifest's: `probes.manifest.label` names it before anything is written."""

    model_config = ConfigDict(frozen=True)

    folder: str
    """The scanned folder's name (the store's, or another folder of the home)."""
    rel: str
    tier: str
    hits: int
    """How many of the subject's needles (spellings, content pieces) were found there."""
    target: str | None = None
    """The target whose files these are (None: the reference store or the home); `folder` is then the
    kind's role for the folder (`data_dir`, `log_dir`), never its path."""


class Verification(BaseModel):
    """Every probe result of one verification run."""

    model_config = ConfigDict(frozen=True)

    probes: list[ProbeResult]
    others_content: list[OthersContent] = []
    """The subject named in other people's content: declared (an exception each), not residue."""
    unscanned: list[Unscanned] = []
    """Files (or members of them) that no decoded view could read: nothing in them is certified."""
    scanned: dict[str, list[ScannedFile]] = {}
    """Every file the raw byte scans read, by scanned folder (its name): the scan manifest's source. Paths
    in memory only: `probes.manifest` labels them before anything is written."""
    residue_files: list[ResidueFile] = []
    """Where the raw byte scans found the subject (the operator's list of places to look)."""

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
