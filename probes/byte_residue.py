"""The byte probe: scan every file of the store directory for the fingerprint's needles.

Residue per needle kind = needle groups found (a vector counts once however many of its pieces hit).
Canaries are bystanders' strings: how many are still found is the bystander count, so an erasure that
wiped or rebuilt the files shows a drop. Files that could not be read are residue-unknown, one each.
"""

from __future__ import annotations

from probes.bytescan import scan_tree
from probes.model import BYTES, Measurement, ProbeContext, ProbeResult, to_results
from probes.needles import SUBJECT_KINDS, NeedleKind

TIER = BYTES


def measure(ctx: ProbeContext) -> list[Measurement]:
    """Scan the whole store directory once with all needles."""
    needles = ctx.fingerprint.needles
    report = scan_tree(ctx.store_dir, [n.data for n in needles],
                       caseless={i for i, n in enumerate(needles) if n.caseless})
    found_groups: dict[NeedleKind, set[int]] = {}
    all_groups: dict[NeedleKind, set[int]] = {}
    found = report.found_indexes()
    for i, n in enumerate(needles):
        all_groups.setdefault(n.kind, set()).add(n.group)
        if i in found:
            found_groups.setdefault(n.kind, set()).add(n.group)
    out = [Measurement(f"scan:{kind.value}", len(found_groups.get(kind, ())), "none", 0)
           for kind in SUBJECT_KINDS if kind in all_groups]
    out.append(Measurement("canaries", 0, "canaries", len(found_groups.get(NeedleKind.canary, ()))))
    if NeedleKind.shared_identifier in all_groups:
        # Another subject's own identifiers (a namesake): explained, and expected to survive.
        out.append(Measurement("shared-identifiers", 0, "shared-identifiers",
                               len(found_groups.get(NeedleKind.shared_identifier, ()))))
    unreadable = len(report.unreadable)
    subject_needles = [(i, n) for i, n in enumerate(needles) if n.kind in (NeedleKind.identifier, NeedleKind.content)]
    for root in ctx.extra_roots:
        if not root.is_dir() or not subject_needles:
            continue
        extra = scan_tree(root, [n.data for _, n in subject_needles],
                          caseless={j for j, (_, n) in enumerate(subject_needles) if n.caseless})
        groups = {subject_needles[j][1].group for j in extra.found_indexes()}
        out.append(Measurement(f"scan-home:{root.name}", len(groups), "none", 0))
        unreadable += len(extra.unreadable)
    out.append(Measurement("unreadable-files", unreadable, "none", 0))
    return out


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the bytes of every file."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
