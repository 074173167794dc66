"""What a tier probe is given (`ProbeContext`), and how its measurements are paired with the baseline
the fingerprint took before the cascade (`to_results`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from erasure.subject import Subject
from probes.fingerprint_model import Fingerprint
from probes.identity import spellings
from probes.model import DEFAULT_HTTP_TIMEOUT, Measurement, ProbeResult, population_key


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
    lookups: bool = True
    """Whether the subprocessors' probe asks the processors (off: the store's records only; the
    service makes the lookups with the store unlocked, `probes.window.StoreProbes`)."""

    def spellings(self) -> list[tuple[str, str]]:
        """(kind, spelling) of every identifier of the subject (of every subject of the window)."""
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
        return json.dumps(self.ids)


def to_results(tier: str, measured: list[Measurement], fingerprint: Fingerprint) -> list[ProbeResult]:
    """Pair each measurement with its population's size before the cascade.

    A population the fingerprint did not measure (e.g. a processor unreachable back then) has no
    before: it is reported as unchanged, since no loss can be shown without one.
    """
    out = []
    for m in measured:
        before = fingerprint.bystanders.get(population_key(tier, m.population), m.bystanders)
        out.append(
            ProbeResult(
                tier=tier, method=m.method, residue=m.residue, bystanders_before=before, bystanders_after=m.bystanders
            )
        )
    return out
