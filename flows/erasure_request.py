"""The `erasure-request` flow: preflight, fingerprint, footprint, nine cached steps, verification (its
own flow run), proof pack. Its only parameter is the request id: the subject is read from the vault
inside the tasks, and only ids and counts come back out."""

from __future__ import annotations

from typing import Any

from prefect import State, flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed

from erasure import requests
from erasure.engine import engine_session, open_engine
from erasure.errors import ErasureError
from erasure.states import RequestState
from erasure.tiers import CASCADE_ORDER
from flows import run_report
from flows.common import RequestId, store_writer
from flows.verification import verification
from proof.errors import EvidenceInvalid
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
from service.verification import take_and_seal_fingerprint
from tasks import epochs, runner
from tasks.preflight import preflight


def _set_state(request_id: str, state: RequestState, detail: str | None = None) -> None:
    engine = open_engine(home().engine_db)
    try:
        requests.set_state(engine, request_id, state, detail)
    finally:
        engine.close()


@task(name="preflight", retries=0)
def preflight_task(request_id: str) -> dict[str, Any]:
    h = home()
    targets = targets_of(h)
    pf = preflight(request_id, h, reference=targets.reference() is not None, tenant=targets.tenant)
    return {"action": pf.action, "state": pf.state, "holds": pf.holds, "detail": pf.detail}


@task(name="footprint", retries=0)
def footprint_task(request_id: str) -> dict[str, int]:
    """Resolve the subject's items in every tier before the first deletion (ids into the engine)."""
    return runner.prepare(request_id, home())


@task(name="fingerprint", retries=0)
def fingerprint_task(request_id: str) -> dict[str, Any]:
    """The probes' own fingerprint, sealed to disk under a key the verification destroys."""
    return take_and_seal_fingerprint(request_id, home())


@task(name="cascade-step", task_run_name="step-{step}", cache_policy=NO_CACHE, retries=0)
def cascade_step(request_id: str, step: str) -> dict[str, Any]:
    """One tier's step. Never cached: the runner is idempotent (a finished step that finds nothing
    left keeps its record), so a rerun after a fix re-resolves and re-erases instead of replaying."""
    from erasure.tiers import Tier

    record = runner.run_step(request_id, Tier(step), home())
    get_run_logger().info("step %s: %s, before %s, after %s", step, record["status"],
                          record["before_count"], record["after_count"])
    return record


@task(name="target", task_run_name="target-{target_name}", cache_policy=NO_CACHE, retries=0)
def target_task(request_id: str, target_name: str) -> dict[str, Any]:
    """Erase the subject from one target of targets.toml (one step record per tier); counts only."""
    from tasks.targets.runner import erase_target

    h = home()
    result = erase_target(request_id, targets_of(h).by_name(target_name), h)
    get_run_logger().info("target %s (%s): %s", target_name, result["kind"], result["tiers"])
    return result


@task(name="byte-hygiene", retries=0)
def scrub_task(request_id: str) -> dict[str, Any]:
    """Rebuild the store's pages so no stale copy of an erased cell outlives it (see tasks/scrub.py)."""
    return runner.scrub(request_id, home())


@task(name="proof-pack", retries=0)
def proof_task(request_id: str) -> dict[str, Any]:
    """Write the engine-signed pack. Evidence that is missing (a step that never finished) or that
    contradicts itself leaves no pack: the request stays in exception until a rerun completes it."""
    try:
        return write_engine_pack(request_id, home())
    except EvidenceInvalid as exc:
        get_run_logger().warning("no pack for %s: %s", request_id, exc)
        return {"request_id": request_id, "pack": None, "error": str(exc)}


@flow(name="erasure-request", flow_run_name="erasure-{request_id}", persist_result=False, log_prints=False,
      on_completion=[run_report.publish], on_failure=[run_report.publish])
def erasure_request(request_id: RequestId) -> State:
    """Erase one request's subject from every tier, verify independently, and write the signed pack."""
    checked_request_id(request_id)
    log = get_run_logger()
    h = home()
    with request_lock(h, request_id), engine_session(h.engine_db):
        engine_key_present(h)
        pf = preflight_task(request_id)
        if pf["action"] == "noop":
            log.info("request %s already completed (%s): nothing to do", request_id, pf["state"])
            return Completed(message=f"already completed ({pf['state']}): nothing to do",
                             data={"request_id": request_id, "noop": True, "state": pf["state"]})
        if pf["action"] == "conflict":
            _set_state(request_id, RequestState.exception, pf["detail"])
            log.warning("request %s refused: %s", request_id, pf["detail"])
            return Failed(name="IdentityConflict", message=pf["detail"])
        if pf["action"] == "blocked":
            counts = footprint_task(request_id)
            held = sum(counts.values())
            detail = f"litigation hold: {held} item(s) held under {pf['holds']} hold(s); nothing erased"
            _set_state(request_id, RequestState.blocked, detail)
            log.warning("request %s blocked: %s", request_id, detail)
            return Failed(name="Blocked", message=detail)
        _set_state(request_id, RequestState.running)
        try:
            with store_writer(h), store_lock(h):
                return _erase_verify_prove(request_id)
        except Exception as exc:
            # Never leave a request in `running`: the SLA monitor shows the recorded state. Our own
            # errors carry user-facing messages without identifiers; others are named by type only.
            _set_state(request_id, RequestState.exception, user_reason(exc))
            raise


def _erase_verify_prove(request_id: str) -> State:
    """Fingerprint, cascade, byte hygiene, verification and pack, under the store's lock. Stops at the
    first step that cannot finish (the same rule as `tasks.runner.run_cascade`): a rerun resumes it."""
    targets = targets_of(home())
    fingerprint_task(request_id)
    records: list[dict[str, Any]] = []
    if targets.reference() is not None:
        with runner.shared_mentions([request_id], home()):  # the store's texts read once for every step
            footprint_task(request_id)
            for tier in CASCADE_ORDER:
                state = cascade_step(request_id, tier.value, return_state=True)
                if not state.is_completed():
                    why = f"step {tier.value} did not finish: rerun the request to resume it"
                    _set_state(request_id, RequestState.exception, why)
                    return Failed(message=why)
                records.append(state.result())
        scrub_task(request_id)
    for target in targets.external():
        t_state = target_task(request_id, target.name, return_state=True)
        if not t_state.is_completed():
            exc = t_state.result(raise_on_failure=False)
            # Our own error says why (a store whose rows lead out of its folder is not fixed by a rerun).
            why = (f"target {target.name} did not finish: {user_reason(exc)}" if isinstance(exc, ErasureError)
                   else f"target {target.name} did not finish: rerun the request to resume it")
            _set_state(request_id, RequestState.exception, why)
            return Failed(message=why)
        records.append({"status": "exception" if t_state.result().get("mentions") else "erased"})
    v_state = verification(request_id, return_state=True)
    v = v_state.result(raise_on_failure=False) if v_state.is_completed() else None
    all_clear = bool(isinstance(v, dict) and v.get("all_clear"))
    exceptions = any(r.get("status") == "exception" for r in records)
    pack = proof_task(request_id)
    if all_clear and not pack.get("pack"):
        # It erased, and there is no signed pack to show for it: never "awaiting attestation", never exit 0.
        why = f"erased and verified, but the proof pack was not written: {pack.get('error')}; rerun the request"
        _set_state(request_id, RequestState.exception, why)
        return Failed(name="NoPack", message=why)
    if not all_clear:
        why = v_state.message or "verification did not end all clear"
        _set_state(request_id, RequestState.exception, why)
        return Failed(name="BystandersLost" if v_state.name == "BystandersLost" else "Failed", message=why)
    epochs.record_completed(request_id, home())  # hook (issue 26): the ledger of erasures
    _set_state(request_id, RequestState.awaiting_attestation,
               "erased with exceptions: see the pack" if exceptions else None)
    return Completed(message="erased, verified all clear, awaiting DPO attestation",
                     data={"request_id": request_id, "all_clear": True, "exceptions": exceptions,
                           "pack": pack.get("pack")})
