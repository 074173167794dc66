"""The compliance team's operations as thin Prefect flows (deployments in `prefect.yaml`): place and
release a litigation hold, allow re-ingest (re-consent), extend, pause and resume a request's clock,
and drain the inbox of request envelopes into the vault.

Forms take request ids, never a subject's identifiers (invariant 6): a hold is placed on *the subject
of request X*, read from the vault inside the run. Free text (reasons, actor) is refused when it
names the subject. Each operation is audited: the store's audit log for holds and re-consent, the
engine's event log for every operation on a request. Results hold ids and counts only.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Annotated, Any

import apsw
from prefect import flow, get_run_logger

from erasure import inbox as inbox_mod
from erasure import requests
from erasure.clocks import ClockPolicy, Deadline, iso_utc
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import ErasureError, NotFound
from erasure.models import ErasureRequestEnvelope, parse_envelope
from erasure.states import RequestState
from flows.common import RequestId, checked_request_id, described, home
from memory import holds, suppression
from memory.schema import open_store

# UI forms take no free text: Prefect keeps every parameter in its database before a run could refuse
# one, so a reason typed as "hold for <name>" would put an identifier there (invariant 6). A form
# takes a reason code and a case reference (a token: no spaces, no "@"); the CLI, which checks free
# text before anything is stored, still takes a free-text reason.
CaseRef = Annotated[str, described(
    min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}$",
    description="Case or ticket reference (letters, digits, . _ : / -). Never an email or a name.")]
Actor = Annotated[str, described(
    min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$",
    description="Staff id or role that authorises this (a token, e.g. legal-team), recorded in the audit log.")]


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


HoldWhy = Annotated[HoldReason, described(
    description="Why the hold is placed (a code; details stay in the case file).")]
ReleaseWhy = Annotated[ReleaseReason, described(description="Why the holds are released.")]
ReconsentWhy = Annotated[ReconsentReason, described(description="Why the subject's items may be ingested again.")]
ExtendWhy = Annotated[ExtendReason, described(
    description="The ground for the extension (GDPR Art.12(3): complexity or number of requests).")]
ClockWhy = Annotated[ClockReason, described(description="Why the clock is paused or resumed.")]


def _reason(code: StrEnum, reference: str) -> str:
    return f"{code.value} ({reference})"


INBOX_GLOB = "*.json"
REJECTED_DIR = inbox_mod.REJECTED_DIR


# --- library functions (no Prefect): the flows below are thin wrappers ----------------------------


@contextlib.contextmanager
def _engine(h: Home) -> Iterator[apsw.Connection]:
    conn = open_engine(h.engine_db)
    try:
        yield conn
    finally:
        conn.close()


def _subject_checked(engine: apsw.Connection, request_id: str, texts: dict[str, str]) -> str:
    """The request's subject id (from the vault), after refusing texts (reasons with their case
    reference, actors) that name the subject or anyone else in the vault."""
    subject = requests.load_envelope(engine, request_id).subject
    requests.refuse_if_names_a_subject(engine, texts, subject)
    return subject.id


def place_hold(h: Home, request_id: str, reason: str, actor: str) -> dict[str, Any]:
    """Place a litigation hold on the subject of `request_id`; returns the hold id."""
    checked_request_id(request_id)
    with _engine(h) as engine:
        subject_id = _subject_checked(engine, request_id, {"reason": reason, "actor": actor})
        store = open_store(h.store_dir)
        try:
            hold_id = holds.place(store, subject_id, reason, actor)
            active = holds.active_holds(store, subject_id)
        finally:
            store.close()
        requests.log_event(engine, request_id, "hold.placed", {"hold_id": hold_id, "active_holds": active})
    return {"request_id": request_id, "hold_id": hold_id, "active_holds": active}


def release_hold(h: Home, request_id: str, reason: str, actor: str) -> dict[str, Any]:
    """Release every active hold on the subject of `request_id`. A request blocked by the hold goes
    back to 'submitted' (a new run erases). `NotFound` if the subject has no active hold."""
    checked_request_id(request_id)
    with _engine(h) as engine:
        subject_id = _subject_checked(engine, request_id, {"reason": reason, "actor": actor})
        store = open_store(h.store_dir)
        try:
            released = holds.release(store, subject_id, reason, actor)
            active = holds.active_holds(store, subject_id)
        finally:
            store.close()
        requests.log_event(engine, request_id, "hold.released", {"hold_ids": released, "active_holds": active})
        if active == 0 and requests.get(engine, request_id).state is RequestState.blocked:
            requests.set_state(engine, request_id, RequestState.submitted, "hold released: run again to erase")
    return {"request_id": request_id, "released": released, "active_holds": active}


def allow_reingest(h: Home, request_id: str, reason: str, actor: str, source: str | None = None) -> dict[str, Any]:
    """Re-consent: remove the suppression keys that `request_id`'s erasure recorded (optionally only
    those of one `source`), so the subject's items may be ingested again; without a `source`, also the
    erased-identity hashes it recorded. `NotFound` if there are no keys."""
    checked_request_id(request_id)
    with _engine(h) as engine:
        _subject_checked(engine, request_id, {"reason": reason, "actor": actor})
        store = open_store(h.store_dir)
        try:
            keys = [k for k in suppression.list_suppressed(store)
                    if k.request_ref == request_id
                    and (source is None or k.source == suppression.hashed(store, source))]
            if not keys:
                raise NotFound(f"no suppressed keys recorded for request {request_id}"
                               + (f" and source {source!r}" if source else ""))
            allowed = sum(suppression.allow(store, s, r, reason, actor, request_ref=request_id)
                          for s, r in dict.fromkeys((k.source, k.source_ref) for k in keys))
            # the whole re-consent (no source named) also releases the identity the erasure recorded
            identities = 0 if source else suppression.allow_identities_of(store, request_id, reason, actor)
        finally:
            store.close()
        requests.log_event(engine, request_id, "suppression.allowed",
                           {"keys": allowed, "source": source, "identities": identities})
    return {"request_id": request_id, "allowed": allowed, "identities": identities}


def _clock(request_id: str, clock: Deadline) -> dict[str, Any]:
    return {"request_id": request_id, "deadline": iso_utc(clock.deadline), "target": iso_utc(clock.target),
            "days_left": clock.days_left, "paused": clock.paused, "extended": clock.extended}


def clock_operation(h: Home, kind: str, request_id: str, reason: str, *, until: date | None = None,
                    now: datetime | None = None) -> dict[str, Any]:
    """Extend, pause or resume a request's clock (`erasure.requests`; audited there as
    'request.extended' / 'request.paused' / 'request.resumed'). Returns the new clock."""
    checked_request_id(request_id)
    now = now or datetime.now(UTC)
    policy = ClockPolicy.from_env()
    with _engine(h) as engine:
        if kind == "extend":
            clock = requests.extend(engine, request_id, reason, now=now, until=until, policy=policy)
        elif kind == "pause":
            clock = requests.pause(engine, request_id, reason, now=now, policy=policy)
        elif kind == "resume":
            clock = requests.resume(engine, request_id, reason, now=now, policy=policy)
        else:
            raise ValueError(f"unknown clock operation {kind!r}")
    return _clock(request_id, clock)


@dataclass
class IntakeResult:
    """What one drain of the inbox did (request ids and counts only)."""

    vaulted: list[str] = field(default_factory=list)
    already_present: list[str] = field(default_factory=list)
    rejected: int = 0
    purged: int = 0
    """Rejected envelopes removed because they were older than the retention."""
    refused: int = 0
    """Entries that are not regular files of their own (links, hard links, folders, devices): left alone."""

    def as_dict(self) -> dict[str, Any]:
        return {"vaulted": self.vaulted, "already_present": self.already_present, "rejected": self.rejected,
                "purged": self.purged, "refused": self.refused}


def drain_inbox(h: Home, *, now: datetime | None = None, policy: ClockPolicy | None = None,
                limit: int | None = None) -> IntakeResult:
    """Vault every `*.json` envelope in the inbox (oldest name first) and delete each file once vaulted
    (also when the identical envelope was already vaulted). A bad or conflicting envelope is kept
    encrypted in `inbox/rejected/` under a random name, with its error in a `.error.txt` beside it
    (`erasure.inbox`), and its file is deleted. Rejected envelopes older than
    `ERASURE_INBOX_RETENTION_DAYS` are purged, and plaintext ones left by older versions sealed, on
    every drain. One drain at a time (a file lock)."""
    inbox = h.inbox_dir
    inbox.mkdir(parents=True, exist_ok=True)
    policy = policy or ClockPolicy.from_env()
    result = IntakeResult()
    with open(inbox / ".intake.lock", "a+") as lock, _engine(h) as engine:
        fcntl.flock(lock, fcntl.LOCK_EX)
        inbox_mod.seal_legacy(h)
        result.purged = inbox_mod.purge_expired(h, now=now)
        result.refused = inbox_mod.strangers(h)
        files = sorted(p for p in inbox.glob(INBOX_GLOB) if not p.name.startswith("."))
        for path in files[:limit]:
            at = now or datetime.now(UTC)
            name = inbox_mod.new_name()  # errors name the envelope by this, never by its file name
            # Read without following a link, a regular file of its own only: a link to another user's
            # file would be sealed here and then overwritten with zeros (`erasure.inbox`).
            raw = inbox_mod.read_entry(path)
            if raw is None:
                inbox_mod.refuse()
                result.refused += 1
                continue
            try:
                envelope: ErasureRequestEnvelope = parse_envelope(raw, source=f"envelope {name}", now=at)
                res = requests.submit(engine, envelope, now=at, policy=policy)
            except ErasureError as exc:
                message = str(exc) if str(exc).startswith(f"envelope {name}") else f"envelope {name}: {exc}"
                inbox_mod.keep_rejected(h, raw, message, name=name, now=at)
                inbox_mod.shred(path)
                result.rejected += 1
                continue
            (result.vaulted if res.created else result.already_present).append(res.request_id)
            inbox_mod.shred(path)
    return result


# --- flows ------------------------------------------------------------------------------------------


@flow(name="hold-place", flow_run_name="hold-place-{request_id}", persist_result=False)
def hold_place(request_id: RequestId, reference: CaseRef, actor: Actor,
               reason: HoldWhy = HoldReason.litigation) -> dict[str, Any]:
    """Place a litigation hold on the subject of a request: while it is active, nothing of the subject
    is erased (an erasure run ends blocked)."""
    out = place_hold(home(), request_id, _reason(reason, reference), actor)
    get_run_logger().info("hold %s placed for the subject of request %s (%s active)", out["hold_id"],
                          request_id, out["active_holds"])
    return out


@flow(name="hold-release", flow_run_name="hold-release-{request_id}", persist_result=False)
def hold_release(request_id: RequestId, reference: CaseRef, actor: Actor,
                 reason: ReleaseWhy = ReleaseReason.matter_closed) -> dict[str, Any]:
    """Release every active litigation hold on the subject of a request."""
    out = release_hold(home(), request_id, _reason(reason, reference), actor)
    get_run_logger().info("released %d hold(s) for the subject of request %s", len(out["released"]), request_id)
    return out


@flow(name="suppression-allow", flow_run_name="suppression-allow-{request_id}", persist_result=False)
def suppression_allow(
    request_id: RequestId,
    reference: CaseRef,
    actor: Actor,
    reason: ReconsentWhy = ReconsentReason.subject_reconsented,
    source: Annotated[str | None, described(
        max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
        description="Only re-allow items of this source (e.g. chat, email); empty: every source.")] = None,
) -> dict[str, Any]:
    """Re-consent: let the subject of an erased request be ingested again (removes the request's
    suppression keys)."""
    out = allow_reingest(home(), request_id, _reason(reason, reference), actor, source)
    get_run_logger().info("re-allowed %d key(s) of request %s", out["allowed"], request_id)
    return out


@flow(name="request-extend", flow_run_name="extend-{request_id}", persist_result=False)
def request_extend(
    request_id: RequestId,
    reference: CaseRef,
    reason: ExtendWhy = ExtendReason.complexity,
    until: Annotated[date | None, described(
        description="New deadline day; empty: the legal maximum (GDPR two further months, CCPA 45 days). "
                    "Only once, and only before the original deadline.")] = None,
) -> dict[str, Any]:
    """Extend a request's legal deadline once, with notice to the subject."""
    out = clock_operation(home(), "extend", request_id, _reason(reason, reference), until=until)
    get_run_logger().info("request %s extended: deadline %s", request_id, out["deadline"])
    return out


@flow(name="request-pause", flow_run_name="pause-{request_id}", persist_result=False)
def request_pause(request_id: RequestId, reference: CaseRef,
                  reason: ClockWhy = ClockReason.identity_verification) -> dict[str, Any]:
    """Pause a submitted request's clock while the subject's identity is verified."""
    out = clock_operation(home(), "pause", request_id, _reason(reason, reference))
    get_run_logger().info("request %s paused", request_id)
    return out


@flow(name="request-resume", flow_run_name="resume-{request_id}", persist_result=False)
def request_resume(request_id: RequestId, reference: CaseRef,
                   reason: ClockWhy = ClockReason.identity_verified) -> dict[str, Any]:
    """Resume a paused clock: the deadline moves by the whole paused time."""
    out = clock_operation(home(), "resume", request_id, _reason(reason, reference))
    get_run_logger().info("request %s resumed: deadline %s", request_id, out["deadline"])
    return out


@flow(name="intake", persist_result=False)
def intake(
    limit: Annotated[int | None, described(
        ge=1, description="Vault at most this many envelopes in this run; empty: all.")] = None,
) -> dict[str, Any]:
    """Drain the inbox: vault each request envelope dropped into `<ERASURE_HOME>/inbox/` and delete
    its file; bad envelopes are kept encrypted in `inbox/rejected/` (random names) with their error,
    and purged after the retention."""
    out = drain_inbox(home(), limit=limit)
    get_run_logger().info("intake: %d vaulted, %d already present, %d rejected, %d expired rejected purged,"
                          " %d refused (not regular files)", len(out.vaulted), len(out.already_present), out.rejected,
                          out.purged, out.refused)
    return out.as_dict()
