"""Status per tier and overall, derived from the step records and the verification's probes.

The rules (the offline verifier re-implements them independently in check 8):

Tier status, from the tier's LAST step record and the summed residue of the probes of that tier:
- no step record                                              -> notErased
- step status `exception` or `erasedWithExceptions`           -> erasedWithExceptions
- step status `skipped`, after_count 0 or null, residue 0      -> skipped
- step status `erased`, after_count 0, residue 0               -> erased
- anything else                                               -> notErased
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


def last_steps(steps: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The last record of each step, in file order (a rerun's record replaces the earlier one)."""
    out: dict[str, Mapping[str, Any]] = {}
    for rec in steps:
        out[str(rec["step"])] = rec
    return out


def residue_by_tier(probes: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Sum of probe residue per probe tier name (which may be outside the nine tiers)."""
    out: dict[str, int] = {}
    for p in probes:
        out[str(p["tier"])] = out.get(str(p["tier"]), 0) + int(p["residue"])
    return out


def tier_status(rec: Mapping[str, Any] | None, residue: int) -> str:
    """The status of one tier (see the module docstring)."""
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


def tiers_table(steps: Sequence[Mapping[str, Any]],
                probes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """`{tier: {"status", "before", "after", "residue"}}` for the nine tiers, in cascade order."""
    recs, residue = last_steps(steps), residue_by_tier(probes)
    table: dict[str, dict[str, Any]] = {}
    for tier in TIERS:
        rec = recs.get(tier)
        table[tier] = {
            "status": tier_status(rec, residue.get(tier, 0)),
            "before": None if rec is None else rec.get("before_count"),
            "after": None if rec is None else rec.get("after_count"),
            "residue": residue.get(tier, 0),
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
    for tier, rec in last_steps(steps).items():
        after, status = rec.get("after_count"), rec.get("status")
        if status in EXCEPTION_STEP or after == 0 or (status == "skipped" and after is None):
            continue
        problems.append(f"step {tier} ends with after_count {after}")
    return problems
