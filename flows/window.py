"""The `erasure-window` flow: several requests erased as one window.

Per request: its own preflight, footprint, nine steps and step records, verification and pack. For the
whole window, paid once: the fingerprint's store facts, byte scan and bystander baseline
(`probes.window`), the byte-hygiene scrub, the verification's byte scan and tier probes. The Prefect
task count grows with the tiers, not with requests x tiers: one task per step runs that step for every
request of the window. A held request is skipped and reported; a request that fails leaves the others'
results as they are (it stops at its first unfinished step, the others go on). Its only parameter is
request ids (tokens, never identifiers); none means every submitted request.

A home whose targets include stores other than the reference store runs its requests one by one (as
child `erasure-request` runs): an external target's bystander counts are per subject, so its erasure
and probe of one subject must not see another's erasure in between.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from prefect import State, flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed

from erasure import requests
from erasure.engine import engine_session, open_engine
from erasure.errors import Conflict, ErasureError
from erasure.states import RequestState
from erasure.tiers import CASCADE_ORDER, Tier
from flows.common import RequestId, described, store_writer
from probes.fingerprint import Fingerprint
from probes.window import take_window, verify_window
from service.common import (
    checked_request_id,
    engine_key_present,
    home,
    request_lock,
    store_lock,
    targets_of,
    user_reason,
)
from service.packs import write_engine_pack
from service.verification import fingerprint_paths, home_scan_roots, record_verification, take_and_seal_fingerprint
from tasks import epochs, runner
from tasks.preflight import preflight

RequestIds = Annotated[list[RequestId] | None, described(
    max_length=1000,
    description="The request ids to run as one window (at most 1,000). Empty: every submitted request.")]


def _set_states(changes: dict[str, tuple[RequestState, str | None]]) -> None:
    engine = open_engine(home().engine_db)
    try:
        for rid, (state, detail) in changes.items():
            requests.set_state(engine, rid, state, detail)
    finally:
        engine.close()


@task(name="window-preflight", retries=0, cache_policy=NO_CACHE)
def window_preflight(request_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each request's preflight: run, noop (already done), conflict (aliases unconfirmed) or blocked."""
    h = home()
    targets = targets_of(h)
    out: dict[str, dict[str, Any]] = {}
    for rid in request_ids:
        try:
            pf = preflight(rid, h, reference=targets.reference() is not None, tenant=targets.tenant)
            out[rid] = {"action": pf.action, "holds": pf.holds, "detail": pf.detail}
        except ErasureError as exc:
            out[rid] = {"action": "refused", "holds": 0, "detail": user_reason(exc)}
    return out


@task(name="window-fingerprint", retries=0, cache_policy=NO_CACHE)
def window_fingerprint(request_ids: list[str]) -> dict[str, str]:
    """The probes' fingerprints of every subject, sealed per request, taken together (one store-facts
    read, one byte scan, one bystander baseline). A request with a sealed fingerprint from an earlier run
    keeps it (or has its bystander baseline retaken, as a single run would)."""
    h = home()
    out: dict[str, str] = {}
    fresh: list[str] = []
    for rid in request_ids:
        ct, key = fingerprint_paths(h, rid)
        if ct.exists() and key.exists():
            out[rid] = take_and_seal_fingerprint(rid, h)["fingerprint"]
        else:
            fresh.append(rid)
    if fresh:
        engine = open_engine(h.engine_db)
        try:
            subjects = [requests.load_envelope(engine, rid).subject for rid in fresh]
        finally:
            engine.close()
        for rid, fp in zip(fresh, take_window(h.store_dir, subjects), strict=True):
            fp.seal(*fingerprint_paths(h, rid))
            out[rid] = "taken"
    return out


def _each(request_ids: list[str], work: Any) -> dict[str, Any]:
    """Run `work(rid)` for every request; a failure is kept as its reason, the others go on."""
    out: dict[str, Any] = {}
    for rid in request_ids:
        try:
            out[rid] = work(rid)
        except Exception as exc:  # one request's failure must not stop the window
            out[rid] = {"error": user_reason(exc)}
    return out


@task(name="window-footprint", retries=0, cache_policy=NO_CACHE)
def window_footprint(request_ids: list[str]) -> dict[str, Any]:
    """Every request's footprint before its first deletion (counts per tier)."""
    h = home()
    return _each(request_ids, lambda rid: runner.prepare(rid, h))


@task(name="window-step", task_run_name="step-{step}", retries=0, cache_policy=NO_CACHE)
def window_step(step: str, request_ids: list[str]) -> dict[str, Any]:
    """One tier's step for every request of the window, one after another (records per request). A step
    that rewrites a whole (the fine-tune corpus) does it once, without every subject of the window: each
    request's count is taken before the first rewrite, so its record keeps what it had."""
    h = home()
    tier = Tier(step)
    with runner.window(request_ids):
        before: dict[str, Any] = {}
        if getattr(runner.STEPS[tier], "window_shared", False) and len(request_ids) > 1:
            before = _each(request_ids, lambda rid: runner.count_step(rid, tier, h))
        return _each(request_ids, lambda rid: runner.run_step(
            rid, tier, h, before=before.get(rid) if isinstance(before.get(rid), int) else None))


@task(name="byte-hygiene", retries=0, cache_policy=NO_CACHE)
def window_scrub(request_ids: list[str]) -> dict[str, Any]:
    """Per request the epilogue; one rebuild of the store's pages for the whole window."""
    return runner.scrub_window(request_ids, home())


@task(name="window-verification", retries=0, cache_policy=NO_CACHE)
def window_verification(request_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The independent probes for every request at once; each request's verification.json."""
    h = home()
    engine = open_engine(h.engine_db)
    try:
        pairs = []
        for rid in request_ids:
            subject = requests.load_envelope(engine, rid).subject
            pairs.append((subject, Fingerprint.unseal(*fingerprint_paths(h, rid))))
        found = verify_window(h.store_dir, pairs, extra_roots=home_scan_roots(h))
        out: dict[str, dict[str, Any]] = {}
        for rid, (_s, fp), result in zip(request_ids, pairs, found, strict=True):
            doc = record_verification(h, engine, rid, result, fp, True)
            out[rid] = {k: doc.get(k) for k in ("all_clear", "residue_tiers", "lost_bystander_tiers")}
        return out
    finally:
        engine.close()


@task(name="proof-packs", retries=0, cache_policy=NO_CACHE)
def window_packs(request_ids: list[str]) -> dict[str, Any]:
    """Each request's engine-signed pack."""
    h = home()
    return _each(request_ids, lambda rid: write_engine_pack(rid, h))


def _submitted() -> list[str]:
    """Every submitted request, and every one left `running` (a run that died: one that is still alive
    holds the request's lock, and the window skips it)."""
    engine = open_engine(home().engine_db)
    try:
        return [r.request_id for r in requests.list_requests(engine, [RequestState.submitted, RequestState.running])]
    finally:
        engine.close()


@flow(name="erasure-window", persist_result=False, log_prints=False)
def erasure_window(request_ids: RequestIds = None) -> State:
    """Erase several requests as one window (none given: every submitted request, and every one a dead
    run left running), verify each independently, write each one's signed pack. Held requests are
    skipped and reported."""
    log = get_run_logger()
    h = home()
    ids = list(dict.fromkeys(checked_request_id(r) for r in request_ids)) if request_ids else _submitted()
    if not ids:
        return Completed(message="no request to run", data={"requests": {}})
    engine_key_present(h)
    report: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as locks:
        locks.enter_context(engine_session(h.engine_db))
        runnable: list[str] = []
        for rid in ids:
            try:
                locks.enter_context(request_lock(h, rid))
                runnable.append(rid)
            except Conflict as exc:
                report[rid] = {"outcome": "skipped", "detail": str(exc)}
        pf = window_preflight(runnable)
        states: dict[str, tuple[RequestState, str | None]] = {}
        go: list[str] = []
        for rid in runnable:
            p = pf[rid]
            if p["action"] == "run":
                go.append(rid)
            elif p["action"] == "noop":
                report[rid] = {"outcome": "noop", "detail": "already completed: nothing to do"}
            elif p["action"] == "blocked":
                detail = f"litigation hold: {p['holds']} hold(s) on the subject; nothing erased"
                states[rid] = (RequestState.blocked, detail)
                report[rid] = {"outcome": "held", "detail": detail}
            else:
                states[rid] = (RequestState.exception, p["detail"])
                report[rid] = {"outcome": "refused", "detail": p["detail"]}
        _set_states(states)
        if go and targets_of(h).external():
            report |= _one_by_one(go)
        elif go:
            with store_writer(h), store_lock(h):
                report |= _window(go)
    counts: dict[str, int] = {}
    for r in report.values():
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    log.info("window of %d request(s): %s", len(ids), summary)
    data = {"requests": report, "counts": counts}
    if any(r["outcome"] not in ("all_clear", "held", "noop") for r in report.values()):
        return Failed(message=f"window: {summary}", data=data)
    return Completed(message=f"window: {summary}", data=data)


def _one_by_one(request_ids: list[str]) -> dict[str, dict[str, Any]]:
    from flows.erasure_request import erasure_request

    out: dict[str, dict[str, Any]] = {}
    for rid in request_ids:
        state = erasure_request(rid, return_state=True)
        out[rid] = {"outcome": "all_clear" if state.is_completed() else (state.name or "failed").lower(),
                    "detail": state.message}
    return out


def _window(request_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Fingerprint, footprints, the nine steps, one scrub, verification and packs, under the store's
    lock. A request leaves the window at its first failure (recorded); the others go on."""
    report: dict[str, dict[str, Any]] = {}
    states: dict[str, tuple[RequestState, str | None]] = {}

    def drop(results: dict[str, Any], what: str, active: list[str]) -> list[str]:
        kept = []
        for rid in active:
            r = results.get(rid)
            if isinstance(r, dict) and "error" in r:
                why = f"{what} did not finish: rerun the request to resume it ({r['error']})"[:300]
                states[rid] = (RequestState.exception, why)
                report[rid] = {"outcome": "failed", "detail": why}
            else:
                kept.append(rid)
        return kept

    _set_states({rid: (RequestState.running, None) for rid in request_ids})
    active = list(request_ids)
    try:
        window_fingerprint(active)
    except Exception as exc:
        why = f"fingerprint did not finish: {user_reason(exc)}"
        _set_states({rid: (RequestState.exception, why) for rid in active})
        return {rid: {"outcome": "failed", "detail": why} for rid in active}
    exceptions: set[str] = set()
    with runner.shared_mentions(active, home()):  # the store's texts read once for every step of every request
        active = drop(window_footprint(active), "footprint", active)
        for tier in CASCADE_ORDER:
            if not active:
                break
            results = window_step(tier.value, active)
            exceptions |= {rid for rid, r in results.items() if isinstance(r, dict) and r.get("status") == "exception"}
            active = drop(results, f"step {tier.value}", active)
    verified: dict[str, dict[str, Any]] = {}
    if active:
        window_scrub(active)
        verified = window_verification(active)
        packs = window_packs(active)
        for rid in active:
            v = verified[rid]
            pack = packs.get(rid, {})
            if v.get("all_clear") and not pack.get("pack"):
                why = f"erased and verified, but the proof pack was not written: {pack.get('error')}"
                states[rid] = (RequestState.exception, why)
                report[rid] = {"outcome": "no_pack", "detail": why, "pack": None}
            elif v.get("all_clear"):
                detail = "erased with exceptions: see the pack" if rid in exceptions else None
                epochs.record_completed(rid, home())  # hook (issue 26): the ledger of erasures
                states[rid] = (RequestState.awaiting_attestation, detail)
                report[rid] = {"outcome": "all_clear", "detail": detail, "pack": pack.get("pack")}
            else:
                residue, lost = v.get("residue_tiers") or [], v.get("lost_bystander_tiers") or []
                why = (f"residue found in: {', '.join(residue)}" if residue else
                       f"other people's data lost in: {', '.join(lost)} (no residue of the subject)")
                states[rid] = (RequestState.exception, why)
                report[rid] = {"outcome": "residue" if residue else "bystanders_lost", "detail": why,
                               "pack": pack.get("pack")}
    _set_states(states)
    return report
