"""Erasure requests an agent files itself (`erasure mcp`), in two steps: a preview, then a confirm.

- `preview`: per target and tier, how many items of the subject an erasure would meet, the mentions in
  other people's items it would report, and the holds that would block it; an identifier that belongs
  to two people (the request's email filed under another subject id too: docs/matching.md, "two people
  under one key") or an active hold refuses it. It returns counts and target names only, and a
  short-lived token bound to exactly that preview (`service.agent_tokens`).
- `confirm`: checks the token (forged, expired, used, or a preview no longer true: refused), vaults the
  request as intake does (its legal clock starts), marks the token used in the same transaction, and
  starts the run by request id through the caller's `start` (identifiers never enter Prefect).
- `status`: a request filed this way: its state, deadline and, once sealed, its pack's name.

Every call is written to the engine's event log (ids and counts only), as intake writes
`request.submitted`. The preview counts on a scratch engine in a private folder of the home, removed
afterwards: the vault holds a request only once it is confirmed.
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from erasure import request_records
from erasure.clocks import ClockPolicy, LegalBasis, iso_utc
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import Conflict, ErasureError, HoldActive, InputError, NotFound
from erasure.models import ErasureRequestEnvelope, parse_envelope
from erasure.request_ids import checked_request_id
from erasure.sqlite import transaction
from erasure.states import RequestState
from erasure.targets import REFERENCE
from erasure.tiers import CASCADE_ORDER
from service import agent_tokens
from service.clocks import clock_view
from service.home import targets_of
from service.pack_files import PACK_NAME
from service.scope import home_tenant

REASON = "erasure asked for by the data subject through an agent (erasure mcp)"
SUBJECT_FIELDS = ("id", "email", "name", "phone")
SEALED = (RequestState.sealed, RequestState.notified)


class SubjectAmbiguous(Conflict):
    """An identifier given belongs to more than one person in the memories: refused."""


class SubjectHeld(HoldActive):
    """A litigation hold covers the subject: refused (nothing would be erased)."""


class PreviewChanged(agent_tokens.TokenRefused):
    """What the token's preview showed is no longer true."""


@dataclass(frozen=True)
class _ScratchHome(Home):
    """The home with its engine database elsewhere: the preview's counts write a footprint there."""

    scratch_engine: Path = Path()

    @property
    def engine_db(self) -> Path:
        return self.scratch_engine


def _subject(fields: dict[str, str | None]) -> dict[str, str]:
    given = {k: str(v).strip() for k, v in fields.items() if k in SUBJECT_FIELDS and v not in (None, "")}
    if not given.get("id"):
        raise InputError("subject.id: required (the platform's id of the person)")
    return given


def _envelope(
    request_id: str, tenant: str, subject: dict[str, str], basis: str, proof: str, at: datetime
) -> ErasureRequestEnvelope:
    doc = {
        "request_id": request_id,
        "tenant_id": tenant,
        "subject": subject,
        "legal_basis": basis,
        "received_at": iso_utc(at),
        "requester_identity_proof_ref": proof,
        "reason": REASON,
    }
    return parse_envelope(json.dumps(doc), source="the request", now=at)


def _counts(h: Home, subject: dict[str, str], tenant: str, *, now: datetime) -> dict[str, Any]:
    """Per target: items per tier (None: the kind holds no such tier) and mentions reported; the holds.
    Raises `SubjectAmbiguous` / `SubjectHeld` (one line, counts only)."""
    from tasks.identity import IdentityConflict
    from tasks.runner import preview as reference_preview
    from tasks.targets.eraser import eraser_for
    from tasks.targets.runner import count_target

    found = targets_of(h)
    scratch = Path(tempfile.mkdtemp(prefix=".preview-", dir=h.engine_dir))
    try:
        shome = _ScratchHome(root=h.root, evidence_root=scratch / "evidence", scratch_engine=scratch / "engine.db")
        rid = "preview-" + secrets.token_hex(8)
        envelope = _envelope(rid, tenant, subject, LegalBasis.GDPR.value, "preview", now)
        out: dict[str, Any] = {}
        holds = 0
        with Engine.session(shome.engine_db) as engine:
            with engine.lent() as conn:
                request_records.submit(conn, envelope, now=now, policy=ClockPolicy.from_env())
            for t in found.targets:
                if t.kind == REFERENCE:
                    try:
                        seen = reference_preview(rid, shome)
                    except IdentityConflict:
                        raise SubjectAmbiguous(
                            "refused: an identifier given (the email) also belongs to another person in the"
                            f" memories of target {t.name}; a person must review this request: nothing was filed"
                        ) from None
                    holds += int(seen["holds"])
                    items = {tier.value: seen["items"].get(tier.value) for tier in CASCADE_ORDER}
                    out[t.name] = {"items": items, "mentions_reported": sum(seen["reported"].values())}
                else:
                    eraser = eraser_for(t)
                    mentions = getattr(eraser, "mentions", None)
                    out[t.name] = {
                        "items": count_target(t, envelope.subject, rid, shome),
                        "mentions_reported": int(mentions(t, envelope.subject)) if mentions else 0,
                    }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if holds:
        raise SubjectHeld(
            f"refused: {holds} active litigation hold(s) cover this person; nothing would be erased while one"
            " is active, and nothing was filed"
        )
    return {"targets": out, "holds_blocking": holds}


def _log(engine: Engine, request_id: str | None, event: str, detail: dict[str, Any]) -> None:
    with engine.lent() as conn:
        request_records.log_event(conn, request_id, event, detail)


def preview(
    engine: Engine, h: Home, secret: str, subject: dict[str, str | None], *, now: datetime | None = None
) -> dict[str, Any]:
    """Step one: what an erasure of the person named by `subject` (id, and email, name, phone when
    given) would meet now, and a confirmation token bound to it. Counts and target names only: nothing
    the caller did not send. `SubjectAmbiguous`, `SubjectHeld`, `InputError` refuse it (one line)."""
    at = now or datetime.now(UTC)
    given = _subject(subject)
    tenant = home_tenant(h)
    _envelope("preview-check", tenant, given, LegalBasis.GDPR.value, "preview", at)  # InputError names a field
    try:
        content = _counts(h, given, tenant, now=at)
    except (SubjectAmbiguous, SubjectHeld) as exc:
        _log(engine, None, "agent.preview_refused", {"why": type(exc).__name__})
        raise
    token, claims = agent_tokens.issue(secret, given, content, now=at)
    items = sum(n or 0 for t in content["targets"].values() for n in t["items"].values())
    _log(engine, None, "agent.previewed", {"token_id": claims.token_id, "items": items})
    return {
        **content,
        "identifiers_given": sorted(given),
        "token": token,
        "expires_at": iso_utc(claims.expires_at),
        "next": "request_erasure with this token, the requester's identity proof reference and the legal basis",
    }


def confirm(
    engine: Engine,
    h: Home,
    secret: str,
    token: str,
    requester_identity_proof_ref: str,
    legal_basis: str,
    *,
    start: Callable[[str], str] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Step two: file the previewed request (vaulted as intake does; its legal clock starts) and start
    its run by id with `start` (returns the run's id). Refused with one line when the token is forged,
    expired or used, or what it previewed is no longer true."""
    at = now or datetime.now(UTC)
    try:
        claims = agent_tokens.check(secret, token, now=at)
        with engine.lent() as conn:
            used = request_records.token_use(conn, claims.token_id)
        if used is not None:
            raise request_records.TokenAlreadyUsed(
                f"this confirmation token was already used (request {used}): refused"
            )
        tenant = home_tenant(h)
        content = _counts(h, claims.subject, tenant, now=at)
        if agent_tokens.preview_digest(content) != claims.preview_sha256:
            raise PreviewChanged("what the preview showed is no longer true (the memories changed): preview again")
        request_id = f"agent-{at.strftime('%Y%m%d')}-{claims.token_id[:16]}"
        envelope = _envelope(request_id, tenant, claims.subject, legal_basis, requester_identity_proof_ref, at)
        with engine.lent() as conn, transaction(conn):
            request_records.use_token(conn, claims.token_id, request_id, now=at)
            filed = request_records.submit(conn, envelope, now=at, policy=ClockPolicy.from_env())
            request_records.log_event(conn, request_id, "agent.confirmed", {"token_id": claims.token_id}, now=at)
    except ErasureError as exc:
        _log(engine, None, "agent.confirm_refused", {"why": type(exc).__name__})
        raise
    out: dict[str, Any] = {
        "request_id": filed.request_id,
        "legal_basis": filed.legal_basis.value,
        "deadline": iso_utc(filed.deadline),
        "run_started": False,
    }
    if start is not None:
        try:
            out["run_id"] = start(filed.request_id)
            out["run_started"] = True
        except ErasureError as exc:  # vaulted all the same: an operator or the hourly window runs it
            out["note"] = str(exc)
    return out


def status(engine: Engine, h: Home, request_id: str) -> dict[str, Any]:
    """A request filed through a confirmation token: state, deadline and, once sealed, the pack's name.
    `NotFound` for any other request id (an agent sees only what agents filed)."""
    rid = checked_request_id(request_id)
    with engine.lent() as conn:
        if not request_records.agent_filed(conn, rid):
            raise NotFound(f"no request {rid} filed through erasure mcp")
        row = request_records.get(conn, rid)
        clock = request_records.deadline_of(conn, rid, now=datetime.now(UTC), policy=ClockPolicy.from_env())
        request_records.log_event(conn, rid, "agent.status", {"state": row.state.value})
    pack = h.evidence_dir(rid) / PACK_NAME
    view = clock_view(rid, clock)
    return {
        "request_id": rid,
        "state": row.state.value,
        "deadline": view["deadline"],
        "days_left": view["days_left"],
        "pack": f"{rid}-{PACK_NAME}" if row.state in SEALED and pack.is_file() else None,
    }
