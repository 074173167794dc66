"""The byte probe: scan every file of the store directory for the fingerprint's needles.

Residue per needle kind = needle groups found (a vector counts once however many of its pieces hit).
Canaries are bystanders' strings: how many are still found is the bystander count, so an erasure that
wiped or rebuilt the files shows a drop. Files that could not be read are residue-unknown, one each.
The scan itself is shared by a whole window (`probes.window`); `measurements` turns one subject's part
of it into measurements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from probes.bytescan import scan_tree
from probes.context import ProbeContext, to_results
from probes.folded import folded_groups
from probes.model import BYTES, Measurement, ProbeResult
from probes.needles import SUBJECT_KINDS, Needle, NeedleKind
from probes.views import scan_views

TIER = BYTES


def measurements(
    needles: Sequence[Needle],
    found: set[int],
    unreadable: int,
    home: Mapping[str, int],
    *,
    folded: int = 0,
    viewed: set[int] | None = None,
) -> list[Measurement]:
    """One subject's byte measurements: `found` are the indexes of its needles the store scan found,
    `home` the identifier and content groups found in each other folder of the home (by folder name),
    `folded` the identifier groups found in the store's texts once folded (`probes.folded`), `viewed`
    the indexes of its needles found in a decoded view of the store's files (`probes.views`; None:
    the views did not run, as before the cascade)."""
    found_groups: dict[NeedleKind, set[int]] = {}
    all_groups: dict[NeedleKind, set[int]] = {}
    for i, n in enumerate(needles):
        all_groups.setdefault(n.kind, set()).add(n.group)
        if i in found:
            found_groups.setdefault(n.kind, set()).add(n.group)
    out = [
        Measurement(f"scan:{kind.value}", len(found_groups.get(kind, ())), "none", 0)
        for kind in SUBJECT_KINDS
        if kind in all_groups
    ]
    if NeedleKind.identifier in all_groups:
        out.append(Measurement("scan-folded:identifier", folded, "none", 0))
    if viewed is not None:
        for kind in (NeedleKind.identifier, NeedleKind.content):
            if kind in all_groups:
                groups = {needles[i].group for i in viewed if needles[i].kind is kind}
                out.append(Measurement(f"scan-views:{kind.value}", len(groups), "none", 0))
    out.append(Measurement("canaries", 0, "canaries", len(found_groups.get(NeedleKind.canary, ()))))
    if NeedleKind.shared_identifier in all_groups:
        # Another subject's own identifiers (a namesake): explained, and expected to survive.
        out.append(
            Measurement(
                "shared-identifiers", 0, "shared-identifiers", len(found_groups.get(NeedleKind.shared_identifier, ()))
            )
        )
    out += [Measurement(f"scan-home:{name}", groups, "none", 0) for name, groups in home.items()]
    out.append(Measurement("unreadable-files", unreadable, "none", 0))
    return out


def measure(ctx: ProbeContext) -> list[Measurement]:
    """Scan the store directory with the fingerprint's needles (the extra roots: `probes.window`)."""
    needles = ctx.fingerprint.needles
    report = scan_tree(
        ctx.store_dir, [n.data for n in needles], caseless={i for i, n in enumerate(needles) if n.caseless}
    )
    folded = folded_groups(ctx.store_dir, [needles])[0]
    views = scan_views(ctx.store_dir, [n.view() for n in needles])
    return measurements(
        needles, report.found_indexes(), len(report.unreadable), {}, folded=len(folded), viewed=views.found_indexes()
    )


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the bytes of every file."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
