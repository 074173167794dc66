"""The compliance team's operations (`service.*`) as thin Prefect flows (deployments in `prefect.yaml`): place and
release a litigation hold, allow re-ingest (re-consent), extend, pause and resume a request's clock,
and drain the inbox of request envelopes into the vault.

Forms take request ids, never a subject's identifiers (invariant 6): a hold is placed on *the subject
of request X*, read from the vault inside the run. Free text (reasons, actor) is refused when it
names the subject. Each operation is audited: the store's audit log for holds and re-consent, the
engine's event log for every operation on a request. Results hold ids and counts only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from enum import StrEnum
from typing import Annotated, Any

from prefect import flow, get_run_logger

from erasure.config import Home
from erasure.engine_db import Engine
from flows.parameters import RequestId, described
from service.clocks import ClockOp, ClockView, clock_operation
from service.consent import Reconsented, allow_reingest
from service.holds import RequestHoldPlaced, RequestHoldsReleased, place_hold, release_hold
from service.home import home
from service.intake import drain_inbox

# UI forms take no free text: Prefect keeps every parameter in its database before a run could refuse
# one, so a reason typed as "hold for <name>" would put an identifier there (invariant 6). A form
# takes a reason code and a case reference (a token: no spaces, no "@"); the CLI, which checks free
# text before anything is stored, still takes a free-text reason.
CaseRef = Annotated[
    str,
    described(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}$",
        description="Case or ticket reference (letters, digits, . _ : / -). Never an email or a name.",
    ),
]
Actor = Annotated[
    str,
    described(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$",
        description="Staff id or role that authorises this (a token, e.g. legal-team), recorded in the audit log.",
    ),
]


class HoldReason(StrEnum):
    """Why a litigation hold is placed (GDPR Art.17(3)(e): legal claims)."""

    litigation = "litigation"
    regulatory_investigation = "regulatory-investigation"
    law_enforcement_request = "law-enforcement-request"
    internal_investigation = "internal-investigation"


class ReleaseReason(StrEnum):
    """Why the holds on a subject are released."""

    matter_closed = "matter-closed"
    lifted_by_counsel = "lifted-by-counsel"
    placed_in_error = "placed-in-error"


class ReconsentReason(StrEnum):
    """Why an erased subject's items may be ingested again."""

    subject_reconsented = "subject-reconsented"
    erased_in_error = "erased-in-error"


class ExtendReason(StrEnum):
    """GDPR Art.12(3) / CCPA grounds for extending the deadline."""

    complexity = "complexity-of-the-request"
    number_of_requests = "number-of-requests"


class ClockReason(StrEnum):
    """Why a clock is paused or resumed."""

    identity_verification = "identity-verification"
    identity_verified = "identity-verified"
    identity_not_verified = "identity-could-not-be-verified"


HoldWhy = Annotated[
    HoldReason, described(description="Why the hold is placed (a code; details stay in the case file).")
]
ReleaseWhy = Annotated[ReleaseReason, described(description="Why the holds are released.")]
ReconsentWhy = Annotated[ReconsentReason, described(description="Why the subject's items may be ingested again.")]
ExtendWhy = Annotated[
    ExtendReason,
    described(description="The ground for the extension (GDPR Art.12(3): complexity or number of requests)."),
]
ClockWhy = Annotated[ClockReason, described(description="Why the clock is paused or resumed.")]


@contextmanager
def _engine() -> Iterator[tuple[Home, Engine]]:
    """The flow's home and its engine, opened once for the run and passed down."""
    h = home()
    with Engine.session(h.engine_db) as engine:
        yield h, engine


def _reason(code: StrEnum, reference: str) -> str:
    return f"{code.value} ({reference})"


# --- flows ------------------------------------------------------------------------------------------


@flow(name="hold-place", flow_run_name="hold-place-{request_id}", persist_result=False)
def hold_place(
    request_id: RequestId, reference: CaseRef, actor: Actor, reason: HoldWhy = HoldReason.litigation
) -> RequestHoldPlaced:
    """Place a litigation hold on the subject of a request: while it is active, nothing of the subject
    is erased (an erasure run ends blocked)."""
    with _engine() as (h, engine):
        out = place_hold(engine, h, request_id, _reason(reason, reference), actor)
    get_run_logger().info(
        "hold %s placed for the subject of request %s (%s active)", out["hold_id"], request_id, out["active_holds"]
    )
    return out


@flow(name="hold-release", flow_run_name="hold-release-{request_id}", persist_result=False)
def hold_release(
    request_id: RequestId, reference: CaseRef, actor: Actor, reason: ReleaseWhy = ReleaseReason.matter_closed
) -> RequestHoldsReleased:
    """Release every active litigation hold on the subject of a request."""
    with _engine() as (h, engine):
        out = release_hold(engine, h, request_id, _reason(reason, reference), actor)
    get_run_logger().info("released %d hold(s) for the subject of request %s", len(out["released"]), request_id)
    return out


@flow(name="suppression-allow", flow_run_name="suppression-allow-{request_id}", persist_result=False)
def suppression_allow(
    request_id: RequestId,
    reference: CaseRef,
    actor: Actor,
    reason: ReconsentWhy = ReconsentReason.subject_reconsented,
    source: Annotated[
        str | None,
        described(
            max_length=128,
            pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
            description="Only re-allow items of this source (e.g. chat, email); empty: every source.",
        ),
    ] = None,
) -> Reconsented:
    """Re-consent: let the subject of an erased request be ingested again (removes the request's
    suppression keys)."""
    with _engine() as (h, engine):
        out = allow_reingest(engine, h, request_id, _reason(reason, reference), actor, source)
    get_run_logger().info("re-allowed %d key(s) of request %s", out["allowed"], request_id)
    return out


@flow(name="request-extend", flow_run_name="extend-{request_id}", persist_result=False)
def request_extend(
    request_id: RequestId,
    reference: CaseRef,
    reason: ExtendWhy = ExtendReason.complexity,
    until: Annotated[
        date | None,
        described(
            description="New deadline day; empty: the legal maximum (GDPR two further months, CCPA 45 days). "
            "Only once, and only before the original deadline."
        ),
    ] = None,
) -> ClockView:
    """Extend a request's legal deadline once, with notice to the subject."""
    with _engine() as (_, engine):
        out = clock_operation(engine, ClockOp.extend, request_id, _reason(reason, reference), until=until)
    get_run_logger().info("request %s extended: deadline %s", request_id, out["deadline"])
    return out


@flow(name="request-pause", flow_run_name="pause-{request_id}", persist_result=False)
def request_pause(
    request_id: RequestId, reference: CaseRef, reason: ClockWhy = ClockReason.identity_verification
) -> ClockView:
    """Pause a submitted request's clock while the subject's identity is verified."""
    with _engine() as (_, engine):
        out = clock_operation(engine, ClockOp.pause, request_id, _reason(reason, reference))
    get_run_logger().info("request %s paused", request_id)
    return out


@flow(name="request-resume", flow_run_name="resume-{request_id}", persist_result=False)
def request_resume(
    request_id: RequestId, reference: CaseRef, reason: ClockWhy = ClockReason.identity_verified
) -> ClockView:
    """Resume a paused clock: the deadline moves by the whole paused time."""
    with _engine() as (_, engine):
        out = clock_operation(engine, ClockOp.resume, request_id, _reason(reason, reference))
    get_run_logger().info("request %s resumed: deadline %s", request_id, out["deadline"])
    return out


@flow(name="intake", persist_result=False)
def intake(
    limit: Annotated[
        int | None, described(ge=1, description="Vault at most this many envelopes in this run; empty: all.")
    ] = None,
) -> dict[str, Any]:
    """Drain the inbox: vault each request envelope dropped into `<ERASURE_HOME>/inbox/` and delete
    its file; bad envelopes are kept encrypted in `inbox/rejected/` (random names) with their error,
    and purged after the retention."""
    with _engine() as (h, engine):
        out = drain_inbox(engine, h, limit=limit)
    get_run_logger().info(
        "intake: %d vaulted, %d already present, %d rejected, %d expired rejected purged,"
        " %d refused (not regular files)",
        len(out.vaulted),
        len(out.already_present),
        out.rejected,
        out.purged,
        out.refused,
    )
    return out.as_dict()
