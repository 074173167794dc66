"""What the DPO pastes back, checked before it changes anything: an attestation envelope made for this
request's current pack, or a signed rejection (issue 34 finding 5: a reject needs the DPO's key, not
only the API credential).

A signed rejection is a DSSE envelope (`proof.dsse` conventions, one signature) whose payloadType is
`REJECTION_TYPE` and whose payload is the canonical JSON of exactly `REJECTION_FIELDS`:

    {"pack_sha256": ..., "reason": ..., "rejected_at": "YYYY-MM-DDTHH:MM:SSZ", "request_id": ...}

signed by the pinned DPO key (`proof.verify.signer --reject REASON` prints one). `pack_sha256` names the
pack the DPO refused: its name (the sha256 of the engine's signed statement, which the signing request
carries and the standalone signer names it by), or the sha256 of the pack file (what the sign-off form
shows). Either binds the rejection to this pack only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from erasure.errors import InputError
from proof.keys import keyid, load_public_key
from proof.verify import PackError
from proof.verify.envelopes import check_signature
from proof.verify.signer import SignerError, engine_statement, read_signing_request
from proof.verify.strict_json import utc_time
from wire.format import PAYLOAD_TYPE, canonical_json, envelope_bytes

REJECTION_TYPE = "application/vnd.erasure.rejection+json"
REJECTION_FIELDS = ("pack_sha256", "reason", "rejected_at", "request_id")
REASON_MAX_CHARS = 500
_CLOCK_SKEW = timedelta(minutes=5)


class WrongEnvelope(InputError):
    """The DPO's answer is a valid envelope, but not for this request's current pack; nothing changed."""


@dataclass(frozen=True)
class Rejection:
    """A DPO-signed rejection, checked."""

    request_id: str
    pack_sha256: str
    reason: str
    rejected_at: str
    envelope: bytes


def _signed(text: str, dpo_pub: bytes) -> tuple[bytes, str, bytes]:
    """The envelope's file form, payloadType and payload once the pinned DPO key's signature verifies."""
    try:
        signed = envelope_bytes(json.loads(text))
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError("the DPO's answer is not the one-line envelope erasure-dpo-sign prints") from exc
    key = load_public_key(dpo_pub)
    try:
        ptype, payload = check_signature(signed, "the DPO's envelope", key, "DPO")
    except PackError:
        raise WrongEnvelope(
            f"the envelope is not signed by the pinned DPO key (keyid {keyid(key)[:16]}...): "
            "sign with the DPO key the team pinned"
        ) from None
    return signed, ptype, payload


def _json_object(payload: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(payload)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise InputError("the DPO's envelope does not carry a JSON object")
    return doc


def check_attestation(text: str, request_id: str, signing_request: str, dpo_pub: bytes) -> None:
    """Refuse (`WrongEnvelope`, naming why) an attestation envelope made for another request or
    another pack than `signing_request` describes; a rejection pasted as an attestation too."""
    _signed_bytes, ptype, payload = _signed(text, dpo_pub)
    if ptype == REJECTION_TYPE:
        raise WrongEnvelope("this envelope is the DPO's rejection, not an attestation: choose decision reject")
    if ptype != PAYLOAD_TYPE:
        raise WrongEnvelope(f"the envelope's payloadType is {ptype[:80]!r}, not the DPO's statement")
    doc = _json_object(payload)
    pred = doc.get("predicate")
    pred = pred if isinstance(pred, dict) else {}
    made_for = pred.get("request_id")
    if made_for != request_id:
        raise WrongEnvelope(f"the envelope was made for request {str(made_for)[:80]}, not {request_id}")
    try:
        wanted = read_signing_request(signing_request)
    except SignerError as exc:  # our own line: cannot happen unless the pack changed underneath
        raise InputError(str(exc)) from exc
    if doc.get("subject") != wanted["subject"] or pred.get("engine_keyid") != wanted["engine_keyid"]:
        raise WrongEnvelope(
            f"the envelope was made for another pack of request {request_id} (an earlier run's): "
            "sign the current signing request"
        )


def pack_digests(pack: Path, signing_request: str) -> set[str]:
    """The digests a rejection may name this pack by: the pack's name (the sha256 of the engine's signed
    statement, what the standalone signer names it by) and the pack file's sha256 (the form shows it)."""
    try:
        _statement, name = engine_statement(read_signing_request(signing_request))
    except SignerError as exc:
        raise InputError(str(exc)) from exc
    return {hashlib.sha256(pack.read_bytes()).hexdigest(), name}


def check_rejection(
    text: str, request_id: str, digests: set[str], dpo_pub: bytes, *, now: datetime | None = None
) -> Rejection:
    """The DPO's signed rejection of this request's current pack, or `InputError` / `WrongEnvelope`
    saying why not (unsigned, another key, another request, another pack, a time in the future)."""
    signed, ptype, payload = _signed(text, dpo_pub)
    if ptype != REJECTION_TYPE:
        raise WrongEnvelope(
            "this envelope is not a rejection: run the signer with --reject REASON (an attestation goes with"
            " decision attest)"
        )
    doc = _json_object(payload)
    if set(doc) != set(REJECTION_FIELDS) or not all(isinstance(doc[k], str) for k in REJECTION_FIELDS):
        raise InputError(f"the DPO's rejection must hold exactly {', '.join(REJECTION_FIELDS)}, as text")
    if canonical_json(doc) != payload:
        raise InputError("the DPO's rejection is not in canonical JSON")
    if doc["request_id"] != request_id:
        raise WrongEnvelope(f"the rejection was made for request {doc['request_id'][:80]}, not {request_id}")
    if doc["pack_sha256"] not in digests:
        raise WrongEnvelope(f"the rejection was made for another pack of request {request_id}")
    at = utc_time(doc["rejected_at"])
    if at is None or at > (now or datetime.now(UTC)) + _CLOCK_SKEW:
        raise InputError("the rejection's rejected_at is not a UTC time (YYYY-MM-DDTHH:MM:SSZ) up to now")
    reason = doc["reason"].strip()
    if not reason or len(reason) > REASON_MAX_CHARS:
        raise InputError(f"the rejection's reason must be 1-{REASON_MAX_CHARS} characters")
    return Rejection(request_id, doc["pack_sha256"], reason, doc["rejected_at"], signed)
