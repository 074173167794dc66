"""Check 8, consistency (`ConsistencyError`): the claims follow from the records.

One request id throughout: manifest, request, every step record, verification, every receipt, the
DPO's statement, and the audit chain; the predicate repeats the records; all_clear, every tier's
status and the overall status follow from the step records and the probes by the status rules of
`wire` (the writer derives them with the same functions); receipts, the DPO's statement text and
attested_at agree with them.

steps.jsonl holds at most one record per (target, tier) in `wire.step_order`; a repeated or reordered
record is refused (no "last one wins"). A verification.json without `exceptions` has none;
verified_at is a UTC time. Each receipt of subprocessor-receipts.jsonl names this request, a
processor (once) and a status done|pending|failed; a receipt not done means the subprocessors tier is
neither erased nor skipped. The audit evidence's `erasure.audit_redaction` entry between its before
and after checkpoints has fields.request_id this request (the store's checkpoint key signs that
binding: the entry is in the after checkpoint's tree); a pack with no audit log of ours
(audit-log-redaction/none/v1) has no step record of the reference store. The checkpoints were taken
during the run: received_at - 5 min <= before.at <= after.at <= verified_at (after.at to the second).
The DPO's statement text is `wire.dpo_statement_text` with the pack's status; attested_at is not
before verified_at (to the second) and not more than a day ahead of this machine's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from proof.verify.audit import AuditSummary
from proof.verify.errors import ConsistencyError, fail
from proof.verify.strict_json import count, json_object, parse_json, parse_jsonl, utc_time
from wire.format import (
    AUDIT,
    AUDIT_REDACTION_EVENT,
    RECEIPT_STATUSES,
    TIERS,
    all_clear_problems,
    dpo_statement_text,
    overall_status,
    step_order,
    tiers_table,
)

CLOCK_SKEW = timedelta(days=1)
"""How far ahead of this machine's clock the DPO's attested_at may be."""


def _records(
    data: Callable[[str], bytes],
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    C = ConsistencyError
    request = json_object(parse_json(data("request.json"), "request.json", C), "request.json", C)
    steps = [json_object(s, "a step record", C) for s in parse_jsonl(data("steps.jsonl"), "steps.jsonl", C)]
    verification = json_object(parse_json(data("verification.json"), "verification.json", C), "verification.json", C)
    receipts = [
        json_object(r, "a receipt", C)
        for r in parse_jsonl(data("subprocessor-receipts.jsonl"), "subprocessor-receipts.jsonl", C)
    ]
    order: tuple[int, str, int] | None = None
    for s in steps:
        if s.get("step") not in TIERS:
            fail(C, "a step record names no known tier")
        target = s.get("target")
        if target is not None and (not isinstance(target, str) or not target):
            fail(C, "a step record's target is not a name")
        here = step_order(s)
        if order is not None and here == order:
            fail(
                C,
                f"steps.jsonl repeats step {s['step']}"
                + (f" of target {target!r}" if target else "")
                + " (one record per target and tier)",
            )
        if order is not None and here < order:
            fail(
                C,
                f"steps.jsonl lists step {s['step']} out of order (the reference store's records, then each"
                " target's by name, tiers in cascade order)",
            )
        order = here
        if not isinstance(s.get("status"), str):
            fail(C, f"step {s['step']} has no status")
        count(s.get("before_count"), f"step {s['step']} before_count", C, nullable=True)
        count(s.get("after_count"), f"step {s['step']} after_count", C, nullable=True)
    probes = verification.get("probes")
    if (
        not isinstance(probes, list)
        or not isinstance(verification.get("all_clear"), bool)
        or not isinstance(verification.setdefault("exceptions", []), list)
    ):
        fail(C, "verification.json lacks probes or all_clear, or its exceptions are not a list")
    for p in probes:
        p = json_object(p, "a probe", C)
        if not isinstance(p.get("tier"), str) or not isinstance(p.get("method"), str):
            fail(C, "a probe has no tier or method")
        count(p.get("residue"), f"probe {p['tier']}/{p['method']} residue", C)
    return request, steps, verification, receipts


def _check_receipts(receipts: Sequence[Mapping[str, Any]], rid: str, tier_status: str) -> None:
    C = ConsistencyError
    processors: set[str] = set()
    for r in receipts:
        if r.get("request_id") != rid:
            fail(C, "subprocessor-receipts.jsonl holds a receipt of another request (or of none)")
        proc, status = r.get("processor"), r.get("status")
        if not isinstance(proc, str) or not proc:
            fail(C, "a receipt names no processor")
        if proc in processors:
            fail(C, f"subprocessor-receipts.jsonl holds two receipts of processor {proc!r}")
        processors.add(proc)
        if status not in RECEIPT_STATUSES:
            fail(
                C, f"the receipt of processor {proc!r} has status {status!r}, not one of {', '.join(RECEIPT_STATUSES)}"
            )
        if status != "done" and tier_status in ("erased", "skipped"):
            fail(C, f"the receipt of processor {proc!r} is {status}, yet the subprocessors tier is {tier_status}")


def _check_dpo(
    dpo: Mapping[str, Any], rid: str, engine_keyid: str, status: str, verified_at: datetime, now: datetime
) -> None:
    C = ConsistencyError
    if dpo["statement"] != dpo_statement_text(rid, engine_keyid, status):
        fail(C, f"the DPO's statement does not attest this request's outcome as the pack states it ({status})")
    attested = utc_time(dpo["attested_at"])
    assert attested is not None  # check 3
    if attested < verified_at.replace(microsecond=0):
        fail(C, "the DPO attested before the verification ran (attested_at is earlier than verified_at)")
    if attested > now + CLOCK_SKEW:
        fail(C, "the DPO's attested_at lies in the future")


RECEIVED_SKEW = timedelta(minutes=5)
"""How far in the future a request's received_at may be when it is submitted (erasure.clocks.CLOCK_SKEW)."""


def _check_checkpoint_times(times: tuple[str, str], received: Any, verified_at: datetime) -> None:
    """The audit checkpoints were taken during the run: received_at <= before <= after <= verified_at
    (received_at less the submit's clock skew; the verification is to the second)."""
    before, after = utc_time(times[0]), utc_time(times[1])
    start = utc_time(received)
    assert before is not None and after is not None  # check 7
    if start is None:
        fail(ConsistencyError, "request.json's received_at is not a UTC time (YYYY-MM-DDTHH:MM:SS[.ffffff]Z)")
    if before < start - RECEIVED_SKEW:
        fail(ConsistencyError, f"the before audit checkpoint ({times[0]}) is dated before the request was received")
    if after < before:
        fail(ConsistencyError, "the after audit checkpoint is dated before the before checkpoint")
    if after.replace(microsecond=0) > verified_at:
        fail(ConsistencyError, f"the after audit checkpoint ({times[1]}) is dated after the verification")


def check_consistency(
    data: Callable[[str], bytes],
    manifest: Mapping[str, Any],
    predicate: Mapping[str, Any],
    dpo_predicate: Mapping[str, Any] | None,
    audit: AuditSummary,
    now: datetime | None = None,
) -> None:
    """Check 8 (see the module docstring). `data(name)` gives the bytes of a file of the pack."""
    C = ConsistencyError
    request, steps, verification, receipts = _records(data)
    rid = predicate["request_id"]
    ids = [
        ("manifest.json", manifest.get("request_id")),
        ("request.json", request.get("request_id")),
        ("verification.json", verification.get("request_id")),
    ]
    ids += [("steps.jsonl", s.get("request_id")) for s in steps]
    ids += [("the DPO attestation", dpo_predicate["request_id"])] if dpo_predicate is not None else []
    for where, other in ids:
        if other != rid:
            fail(C, f"{where} names another request than the signed statement")
    if audit.no_audit_log_for is not None:
        if audit.no_audit_log_for != rid:
            fail(C, f"{AUDIT} names another request than the signed statement")
        if any(s.get("target") is None for s in steps):
            fail(C, f"{AUDIT} says there is no reference store, but steps.jsonl has records of one")
    elif audit.redaction_request != rid:
        fail(
            C,
            f"{AUDIT} records no redaction for this request between its checkpoints"
            f" (no {AUDIT_REDACTION_EVENT} entry naming it)",
        )
    for fname, source, key in (
        ("legal_basis", request, "legal_basis"),
        ("received_at", request, "received_at"),
        ("verified_at", verification, "verified_at"),
        ("all_clear", verification, "all_clear"),
        ("exceptions", verification, "exceptions"),
    ):
        if predicate[fname] != source.get(key):
            fail(C, f"the statement's {fname} differs from the records")
    verified_at = utc_time(predicate["verified_at"])
    if verified_at is None:
        fail(C, "verified_at is not a UTC time (YYYY-MM-DDTHH:MM:SS[.ffffff]Z)")
    if audit.checkpoint_times is not None:
        _check_checkpoint_times(audit.checkpoint_times, request.get("received_at"), verified_at)
    probes = verification["probes"]
    all_clear = predicate["all_clear"]
    problems = all_clear_problems(steps, probes) if all_clear else []
    if problems:
        fail(C, f"all_clear is true but {problems[0]}")
    tiers = tiers_table(steps, probes)
    claimed = predicate["tiers"]
    if set(claimed) != set(TIERS):
        fail(C, "the statement does not list exactly the nine tiers")
    for tier in TIERS:
        row = claimed[tier]
        if row != tiers[tier]:
            said = row.get("status") if isinstance(row, dict) else row
            fail(
                C,
                f"tier {tier}: the statement says {said!r} where the records give"
                f" {tiers[tier]['status']!r} (or other counts)",
            )
    _check_receipts(receipts, rid, tiers["subprocessors"]["status"])
    status = overall_status(tiers, probes, all_clear, verification["exceptions"])
    if predicate["status"] != status:
        fail(C, f"the statement says {predicate['status']}, the records give {status}")
    if manifest.get("status") != status or manifest.get("all_clear") != all_clear:
        fail(C, "manifest.json states another status than the signed statement")
    if dpo_predicate is not None:
        _check_dpo(dpo_predicate, rid, predicate["engine_keyid"], status, verified_at, now or datetime.now(UTC))
