"""The DPO's sign-off inside the `erasure-request` run (issue 27).

After the pack is written, a run started from a deployment suspends (`suspend_flow_run` with
`wait_for_input`: no worker is held) with a form in the UI. Its description shows the per-tier table,
the open exceptions, the pack's statement digest, and the one command the DPO runs on their own
machine (`erasure-dpo-sign.pyz`, from `erasure export --dpo-kit`) with the signing request; they paste
the envelope it prints into the form, or reject with a reason code. The run then checks the envelope
against the pinned DPO key, seals the pack and notifies the requester (`service.signoff`), or records
the rejection. The DPO's private key never reaches Prefect: only their signature does.

A suspended run starts again from the top when resumed: the request is then awaiting attestation with
its pack written, so the run goes straight back here, and the second `suspend_flow_run` with the same
key returns the DPO's answer. `erasure attest` on the command line does the same and resumes the run.
"""

from __future__ import annotations

from typing import Literal

from prefect import get_run_logger
from prefect.context import FlowRunContext
from prefect.flow_runs import suspend_flow_run
from prefect.input import RunInput
from prefect.states import Completed
from pydantic import Field

from erasure import requests
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import NotFound
from erasure.states import RequestState
from flows import run_report
from service import signoff

PAUSE_KEY = "dpo-sign-off"


class DpoSignOff(RunInput):
    """The DPO's answer in the run's form."""

    decision: Literal["attest", "reject"] = Field(description="Attest the pack, or reject it.")
    envelope: str = Field(
        default="",
        description="To attest: the one line erasure-dpo-sign.pyz printed (your signature; never your key).",
    )
    reason: signoff.RejectReason = Field(
        default=signoff.RejectReason.other, description="To reject: why (a code; nothing is sent to the requester)."
    )


def waits_for_dpo(h: Home) -> bool:
    """Whether this run asks the DPO in the UI: it runs from a deployment (a suspended run is started
    again by its worker) and a DPO key is pinned (keys/dpo.pub.pem)."""
    ctx = FlowRunContext.get()
    deployed = ctx is not None and ctx.flow_run is not None and ctx.flow_run.deployment_id is not None
    return deployed and (h.keys_dir / "dpo.pub.pem").is_file()


def request_state(h: Home, request_id: str) -> RequestState | None:
    """The request's state now (None if the engine does not know it)."""
    engine = open_engine(h.engine_db)
    try:
        return requests.get(engine, request_id).state
    except NotFound:
        return None
    finally:
        engine.close()


def description(h: Home, request_id: str) -> str:
    """The form's Markdown: what the DPO attests and the command that signs it (no identifier)."""
    rep = run_report.report(h, request_id, Completed(message="waiting for the DPO's sign-off"))
    rows = rep["rows"]
    pack = rep["pack"] or {}
    lines = [
        f"# DPO sign-off: erasure request `{request_id}`",
        "",
        "| tier | status | before | after | residue |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {r['tier']} | {r['status']} | {r['before']} | {r['after']} | {r['residue']} |" for r in rows),
        "",
        "Open exceptions: "
        + (", ".join(f"{k} ({n})" for k, n in sorted(rep["exceptions"].items())) or "none")
        + f". Pack sha256: `{pack.get('sha256', '?')}`.",
        "",
        "**To attest**, run on your own machine (your key never leaves it), then paste the line it prints"
        " into *envelope* with decision *attest*:",
        "",
        "```",
        f"python erasure-dpo-sign.pyz --key dpo.pem {signoff.signing_request(h, request_id)}",
        "```",
        "",
        "**To reject**, choose decision *reject* and a reason: the request goes to `rejected`, nothing is sent.",
    ]
    return "\n".join(lines)


def sign_off(h: Home, request_id: str) -> RequestState | None:
    """Ask the DPO in the UI and act on the answer; returns the request's state after it."""
    if request_state(h, request_id) is RequestState.awaiting_attestation:
        answer = suspend_flow_run(
            wait_for_input=DpoSignOff.with_initial_data(description=description(h, request_id), decision="attest"),
            key=PAUSE_KEY,
        )
        state = request_state(h, request_id)
        if state is RequestState.awaiting_attestation:  # not already done by `erasure attest`
            if answer.decision == "reject":
                signoff.reject(h, request_id, answer.reason)
            else:
                signoff.seal(h, request_id, envelope=answer.envelope)
    state = request_state(h, request_id)
    get_run_logger().info("request %s: %s after the DPO's sign-off", request_id, state.value if state else "?")
    return state


def resume_waiting_run(request_id: str, answer: dict[str, str]) -> bool:
    """Resume the request's run that waits for the DPO (after `erasure attest` did the sign-off), so
    it finishes; False when no run waits."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.flow_runs import resume_flow_run

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                name=FlowRunFilterName(any_=[f"erasure-{request_id}"]),
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED])),
            )
        )
    for run in runs:
        resume_flow_run(run.id, run_input=answer)
    return bool(runs)
