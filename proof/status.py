"""Status per tier and overall, derived from the step records and the verification's probes.

The rules (the offline verifier re-implements them independently in check 8):

steps.jsonl holds one record per (target, tier): the reference store's records first (no `target`),
then each other target's (its name in `target`, targets in name order), tiers in cascade order. A
repeated or reordered record is refused (`proof.evidence`), never resolved by "the last one wins".

The status of one record, with the summed residue of the probes of its tier:
- step status `exception` or `erasedWithExceptions`           -> erasedWithExceptions
- step status `skipped`, after_count 0 or null, residue 0      -> skipped
- step status `erased`, after_count 0, residue 0               -> erased
- anything else                                               -> notErased
Tier status, from every record of the tier (one per target): no record -> notErased; else the worst
of its records' (notErased, then erasedWithExceptions), skipped only when every record is skipped,
else erased. Its before/after counts are the sums over its records (null when none has one).
Overall status:
- no probe at all, a tier notErased, or residue > 0 in a probe that is not of an
  erasedWithExceptions tier (probes of no tier, e.g. a byte scan, included) -> notErased
- else a tier erasedWithExceptions, or verification exceptions            -> erasedWithExceptions
- else all_clear true -> erased; else notErased
`all_clear: true` further requires at least one probe, every probe's residue 0, and every step's
after_count 0 (or null for a skipped step) unless its status is an exception status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from erasure.tiers import CASCADE_ORDER

TIERS: tuple[str, ...] = tuple(t.value for t in CASCADE_ORDER)
EXCEPTION_STEP = frozenset({"exception", "erasedWithExceptions"})
ERASED, WITH_EXCEPTIONS, NOT_ERASED, SKIPPED = "erased", "erasedWithExceptions", "notErased", "skipped"


def step_order(rec: Mapping[str, Any]) -> tuple[int, str, int]:
    """Where a record belongs in steps.jsonl: the reference store's, then each target's by name; tiers
    in cascade order. Records must come in strictly increasing order."""
    target, tier = rec.get("target"), TIERS.index(str(rec["step"]))
    return (0, "", tier) if target is None else (1, str(target), tier)


def records_by_tier(steps: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Every record of each tier: the reference store's and each other target's."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for rec in steps:
        out.setdefault(str(rec["step"]), []).append(rec)
    return out


def residue_by_tier(probes: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Sum of probe residue per probe tier name (which may be outside the nine tiers)."""
    out: dict[str, int] = {}
    for p in probes:
        out[str(p["tier"])] = out.get(str(p["tier"]), 0) + int(p["residue"])
    return out


def tier_status(rec: Mapping[str, Any] | None, residue: int) -> str:
    """The status of one record (see the module docstring); None (no record) is notErased."""
    if rec is None:
        return NOT_ERASED
    status, after = rec.get("status"), rec.get("after_count")
    if status in EXCEPTION_STEP:
        return WITH_EXCEPTIONS
    if status == "skipped" and after in (0, None) and residue == 0:
        return SKIPPED
    if status == "erased" and after == 0 and residue == 0:
        return ERASED
    return NOT_ERASED


def combined_status(statuses: Sequence[str]) -> str:
    """A tier's status from its records' (one per target): the worst; skipped only if all are."""
    if not statuses or NOT_ERASED in statuses:
        return NOT_ERASED
    if WITH_EXCEPTIONS in statuses:
        return WITH_EXCEPTIONS
    return SKIPPED if all(st == SKIPPED for st in statuses) else ERASED


def _sum(values: Sequence[Any]) -> int | None:
    counts = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return sum(counts) if counts else None


def tiers_table(steps: Sequence[Mapping[str, Any]],
                probes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """`{tier: {"status", "before", "after", "residue"}}` for the nine tiers, in cascade order."""
    recs, residue = records_by_tier(steps), residue_by_tier(probes)
    table: dict[str, dict[str, Any]] = {}
    for tier in TIERS:
        mine, res = recs.get(tier, []), residue.get(tier, 0)
        table[tier] = {
            "status": combined_status([tier_status(r, res) for r in mine]),
            "before": _sum([r.get("before_count") for r in mine]),
            "after": _sum([r.get("after_count") for r in mine]),
            "residue": res,
        }
    return table


def overall_status(tiers: Mapping[str, Mapping[str, Any]], probes: Sequence[Mapping[str, Any]],
                   all_clear: bool, exceptions: Sequence[Any]) -> str:
    """The pack's status: erased, erasedWithExceptions or notErased (see the module docstring)."""
    excepted = {t for t, row in tiers.items() if row["status"] == WITH_EXCEPTIONS}
    if not probes or any(row["status"] == NOT_ERASED for row in tiers.values()):
        return NOT_ERASED
    if any(int(p["residue"]) > 0 and p["tier"] not in excepted for p in probes):
        return NOT_ERASED
    if excepted or exceptions:
        return WITH_EXCEPTIONS
    return ERASED if all_clear else NOT_ERASED


def all_clear_problems(steps: Sequence[Mapping[str, Any]],
                       probes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why `all_clear: true` would be false for these records (tier names and counts only)."""
    problems: list[str] = []
    if not probes:
        problems.append("no probe ran")
    problems += [f"probe {p['tier']}/{p['method']} found residue {p['residue']}"
                 for p in probes if int(p["residue"]) != 0]
    for rec in steps:
        after, status = rec.get("after_count"), rec.get("status")
        if status in EXCEPTION_STEP or after == 0 or (status == "skipped" and after is None):
            continue
        problems.append(f"step {rec['step']} ends with after_count {after}")
    return problems
