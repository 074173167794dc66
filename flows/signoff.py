"""The DPO's sign-off inside the `erasure-request` run (issue 27).

After the pack is written, a run started from a deployment suspends (`suspend_flow_run` with
`wait_for_input`: no worker is held) with a form in the UI. Its description shows the per-tier table,
the open exceptions, the pack's statement digest, and the one command the DPO runs on their own
machine (`erasure-dpo-sign.pyz`, from `erasure export --dpo-kit`) with the signing request; they paste
the envelope it prints into the form, or reject with the signed rejection the same signer prints (`--reject REASON`);
an unsigned reject, or an envelope made for another request or pack, changes nothing and the form
asks again. The run then checks the envelope
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
from pydantic import Field

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError, NotFound
from erasure.exception_kinds import explain
from erasure.states import RequestState
from flows import run_report
from flows.ended import ended
from service import intake, signoff
from service.outcome import Outcome

PAUSE_KEY = "dpo-sign-off"


class DpoSignOff(RunInput):
    """The DPO's answer in the run's form."""

    decision: Literal["attest", "reject"] = Field(description="Attest the pack, or reject it.")
    envelope: str = Field(
        default="",
        description="The one line erasure-dpo-sign.pyz printed: your attestation, or with decision reject your"
        " signed rejection (`--reject REASON`). Your signature only, never your key.",
    )


#: How many answers one run asks for before it stops asking (each needs a person).
MAX_ASKS = 20


def waits_for_dpo(h: Home) -> bool:
    """Whether this run asks the DPO in the UI: it runs from a deployment (a suspended run is started
    again by its worker) and a DPO key is pinned (keys/dpo.pub.pem)."""
    ctx = FlowRunContext.get()
    deployed = ctx is not None and ctx.flow_run is not None and ctx.flow_run.deployment_id is not None
    return deployed and (h.keys_dir / "dpo.pub.pem").is_file()


def request_state(engine: Engine, request_id: str) -> RequestState | None:
    """The request's state now (None if the engine does not know it)."""
    with engine.lent() as conn:
        try:
            return request_records.get(conn, request_id).state
        except NotFound:
            return None


def description(engine: Engine, h: Home, request_id: str, refused: str | None = None) -> str:
    """The form's Markdown: what the DPO attests and the command that signs it (no identifier); with
    `refused`, why the previous answer changed nothing."""
    rep = run_report.report(engine, h, request_id, ended(Outcome.all_clear, "waiting for the DPO's sign-off"))
    rows = rep["rows"]
    pack = rep["pack"] or {}
    desk = intake.desk_url(h)
    lines = [
        f"# DPO sign-off: erasure request `{request_id}`",
        "",
        *([f"> **Your last answer was refused, nothing changed:** {refused}. Paste another.", ""] if refused else []),
        "| tier | status | before | after | residue |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {r['tier']} | {r['status']} | {r['before']} | {r['after']} | {r['residue']} |" for r in rows),
        "",
        *(
            [
                "**Open exceptions** (the pack says erasedWithExceptions; attest only if each may stand):",
                "",
                *(f"- `{k}` ({n}): {explain(k)}" for k, n in sorted(rep["exceptions"].items())),
            ]
            if rep["exceptions"]
            else ["Open exceptions: none."]
        ),
        "",
        f"Pack sha256: `{pack.get('sha256', '?')}`.",
        "",
        "**1. Save the signing request** as `signing-request.txt`: "
        + (
            f"[signing-request.txt]({desk}/requests/{request_id}/signing-request.txt) from the request desk, or "
            if desk
            else ""
        )
        + f"`erasure attest {request_id} --signing-request > signing-request.txt`, or copy this line:",
        "",
        "```",
        signoff.signing_request(h, request_id),
        "```",
        "",
        "**2. To attest**, run on your own machine (your key never leaves it), then paste the line it prints"
        " into *envelope* with decision *attest*:",
        "",
        "```",
        "python3 erasure-dpo-sign.pyz --key dpo.pem signing-request.txt",
        "```",
        "",
        "**To reject**, run the same command with `--reject REASON` instead, paste the line it prints into"
        " *envelope* and choose decision *reject*: the request goes to `rejected`, nothing is sent. A reject"
        " without your signature changes nothing.",
    ]
    return "\n".join(lines)


def answer_refused(engine: Engine, h: Home, request_id: str, answer: DpoSignOff) -> str | None:
    """Act on the DPO's answer; None when it sealed or rejected, else why it changed nothing."""
    try:
        if answer.decision == "reject":
            signoff.reject(engine, h, request_id, answer.envelope)
        else:
            signoff.seal(engine, h, request_id, envelope=answer.envelope)
    except ErasureError as exc:
        return str(exc)
    return None


def ask_the_dpo(engine: Engine, h: Home, request_id: str) -> RequestState | None:
    """Ask the DPO in the UI and act on the answer; a refused answer (another request's or another
    pack's envelope, an unsigned reject) changes nothing and the run asks again. Returns the request's
    state after it. A resumed run replays the answers already given (each suspension has its own key)."""
    refused: str | None = None
    for n in range(MAX_ASKS):
        if request_state(engine, request_id) is not RequestState.awaiting_attestation:
            break
        answer = suspend_flow_run(
            wait_for_input=DpoSignOff.with_initial_data(
                description=description(engine, h, request_id, refused), decision="attest"
            ),
            key=PAUSE_KEY if n == 0 else f"{PAUSE_KEY}-{n + 1}",
        )
        if request_state(engine, request_id) is not RequestState.awaiting_attestation:
            break  # already done by `erasure attest`
        refused = answer_refused(engine, h, request_id, answer)
        if refused is None:
            break
        get_run_logger().warning("request %s: the DPO's answer was refused: %s", request_id, refused)
    state = request_state(engine, request_id)
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
