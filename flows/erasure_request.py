"""The `erasure-request` flow: one request erased as a window of one (`service.cascade`), through the
window's tasks under the names a single run shows (preflight, fingerprint, footprint, step-<tier>,
target-<name>, byte-hygiene, proof-pack) and the verification in a flow run of its own. Its only
parameter is the request id: the subject is read from the vault inside the tasks, and only ids and
counts come back out."""

from __future__ import annotations

import dataclasses

from prefect import State, flow, get_run_logger

from erasure.engine_db import Engine
from erasure.request_ids import checked_request_id
from erasure.states import RequestState
from flows import run_report
from flows import signoff as dpo_signoff
from flows.ended import ended, state_data
from flows.parameters import RequestId
from flows.verification import verification
from flows.window import (
    WINDOW,
    window_fingerprint,
    window_footprint,
    window_packs,
    window_preflight,
    window_probe,
    window_step,
)
from service import cascade
from service.home import home
from service.outcome import Outcome, Result
from service.stages import Failure
from service.verification import Verdict, verdict_of


def _verify_in_its_own_run(request_ids: list[str]) -> dict[str, Verdict | Failure]:
    """The `verification` flow for each request (a window of one: one)."""
    out: dict[str, Verdict | Failure] = {}
    for rid in request_ids:
        state = verification(rid, return_state=True)
        doc = state_data(state)
        out[rid] = (
            verdict_of(doc)
            if isinstance(doc, dict) and "all_clear" in doc
            else Failure(state.message or "the verification run did not end")
        )
    return out


SINGLE = dataclasses.replace(
    WINDOW,
    preflight=window_preflight.with_options(name="preflight"),
    fingerprint=window_fingerprint.with_options(name="fingerprint"),
    footprint=window_footprint.with_options(name="footprint"),
    step=window_step.with_options(name="cascade-step"),
    probe=window_probe.with_options(name="store-probes"),
    verify=_verify_in_its_own_run,
    packs=window_packs.with_options(name="proof-pack"),
)


def flow_state(request_id: str, result: Result) -> State:
    """The Prefect state of one request's run: its outcome decides it, its result is the data."""
    data = {"request_id": request_id, **result.to_json()}
    all_clear = result.outcome is Outcome.all_clear
    return ended(result.outcome, cascade.ALL_CLEAR_MESSAGE if all_clear else result.detail, data)


@flow(
    name="erasure-request",
    flow_run_name="erasure-{request_id}",
    persist_result=False,
    log_prints=False,
    on_completion=[run_report.publish],
    on_failure=[run_report.publish],
)
def erasure_request(request_id: RequestId) -> State:
    """Erase one request's subject from every tier, verify independently, and write the signed pack."""
    checked_request_id(request_id)
    h = home()
    asks_dpo = dpo_signoff.waits_for_dpo(h)
    with Engine.session(h.engine_db) as engine:  # the run's engine: its tasks borrow it
        if asks_dpo and dpo_signoff.request_state(engine, request_id) is RequestState.awaiting_attestation:
            # resumed: the pack is written
            return _signed_off(request_id, dpo_signoff.ask_the_dpo(engine, h, request_id))
        result = cascade.run_requests(engine, h, [request_id], SINGLE)[request_id]
        get_run_logger().info(
            "request %s: %s%s", request_id, result.outcome.value, f" ({result.detail})" if result.detail else ""
        )
        if (
            asks_dpo
            and result.outcome.completed
            and dpo_signoff.request_state(engine, request_id) is RequestState.awaiting_attestation
        ):
            return _signed_off(request_id, dpo_signoff.ask_the_dpo(engine, h, request_id))
    return flow_state(request_id, result)


def _signed_off(request_id: str, state: RequestState | None) -> State:
    """The run's end after the DPO's answer: rejected, or all clear (sealed, or still awaiting it)."""
    data = {"request_id": request_id, "request_state": state.value if state else None}
    if state is RequestState.rejected:
        return ended(Outcome.rejected, "the DPO rejected the pack: nothing was sent", data)
    if state is RequestState.awaiting_attestation:
        why = f"still awaiting the DPO's attestation: `erasure attest {request_id}` or a new run"
        return ended(Outcome.all_clear, why, data)
    return ended(Outcome.all_clear, f"sealed by the DPO ({state.value if state else '?'})", data)
