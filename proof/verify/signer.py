"""The DPO's standalone signer: `erasure-dpo-sign.pyz`, built from this package like the verifier, so
the DPO signs on their own machine with nothing but Python 3.11+ and `cryptography` (any version from
Debian 12's 38 on), and their private key never reaches Prefect or the engine's machine.

    python3 erasure-dpo-sign.pyz --key dpo.pem [--passphrase-env VAR] SIGNING_REQUEST
    python3 erasure-dpo-sign.pyz --key dpo.pem --reject REASON SIGNING_REQUEST

SIGNING_REQUEST is the line, a file holding it (`<request>-signing-request.txt` in a request's kit),
or `-` for standard input.

The signing request is what the run's sign-off form shows (one base64 line, `signing_request`): the
request id, the engine's key id, the status the engine states, the in-toto subjects (file names and
sha256 digests, never a person's data) and the engine's envelope, whose digest is one of those
subjects. The signer shows the engine's signed tier table and exceptions (each explained), asks for a
yes unless `--yes`, and prints the DSSE envelope of the DPO's statement (`dpo_statement_bytes`) as
one line, to paste into the form (or to give `erasure attest --envelope`). With `--reject REASON` it
prints instead a DSSE envelope of the refusal (`REJECTION_PAYLOAD_TYPE`, `rejection_bytes`).

The engine signs with the same code (`signature`): one implementation of the signature format.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from wire.explain import exception_line, tier_table
from wire.format import (
    DPO_PREDICATE,
    ENGINE_ENVELOPE,
    P256_ORDER,
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    canonical_json,
    dpo_statement_text,
    keyid_of,
    pae,
    sha256_hex,
)

SigningKey = ec.EllipticCurvePrivateKey | Ed25519PrivateKey
REQUEST_FIELDS = ("request_id", "engine_keyid", "status", "subject", "engine_envelope")
REJECTION_PAYLOAD_TYPE = "application/vnd.erasure.rejection+json"
"""The DSSE payloadType of a DPO's signed refusal: canonical JSON of `REJECTION_FIELDS`."""
REJECTION_FIELDS = ("request_id", "pack_sha256", "reason", "rejected_at")
REJECT_REASONS = ("evidence_incomplete", "scope_wrong", "identity_unverified", "legal_hold", "other")
"""The refusal's reason codes (service.signoff.RejectReason's values; a test keeps them equal)."""


class SignerError(Exception):
    """A signing request or key the signer cannot use; its message is for the DPO."""


def signature(key: SigningKey, data: bytes) -> bytes:
    """Sign `data`: ECDSA-SHA256 (deterministic, DER, low-s: s <= n/2, the one encoding the verifier
    accepts) or Ed25519 (64 raw bytes)."""
    if isinstance(key, Ed25519PrivateKey):
        return key.sign(data)
    try:
        algorithm = ec.ECDSA(hashes.SHA256(), deterministic_signing=True)
    except TypeError:  # cryptography < 42 (Debian 12 ships 38): a random nonce, as valid to every verifier
        algorithm = ec.ECDSA(hashes.SHA256())
    r, s = decode_dss_signature(key.sign(data, algorithm))
    return encode_dss_signature(r, P256_ORDER - s if s > P256_ORDER // 2 else s)


def dpo_statement_bytes(
    subject: Sequence[Mapping[str, Any]],
    *,
    request_id: str,
    attested_at: str,
    dpo_keyid: str,
    engine_keyid: str,
    status: str,
) -> bytes:
    """The DPO's in-toto statement over `subject` (the pack's files and the engine's envelope)."""
    predicate = {
        "request_id": request_id,
        "attested_at": attested_at,
        "dpo_keyid": dpo_keyid,
        "engine_keyid": engine_keyid,
        "statement": dpo_statement_text(request_id, engine_keyid, status),
    }
    return canonical_json(
        {"_type": STATEMENT_TYPE, "subject": list(subject), "predicateType": DPO_PREDICATE, "predicate": predicate}
    )


def signing_request(
    request_id: str, engine_keyid: str, status: str, subject: Sequence[Mapping[str, Any]], engine_envelope: bytes
) -> str:
    """The one line the sign-off form shows the DPO: base64 of the canonical JSON of what they sign, with
    the engine's envelope (its file bytes, base64) so the signer can show the signed tiers and exceptions."""
    doc = {
        "request_id": request_id,
        "engine_keyid": engine_keyid,
        "status": status,
        "subject": list(subject),
        "engine_envelope": base64.b64encode(engine_envelope).decode("ascii"),
    }
    return base64.b64encode(canonical_json(doc)).decode("ascii")


def read_signing_request(text: str) -> dict[str, Any]:
    """The signing request back from its line (`SignerError` if it is not one)."""
    try:
        doc = json.loads(base64.b64decode("".join(text.split()), validate=True))
    except (binascii.Error, ValueError) as exc:
        raise SignerError("the signing request is not the base64 line the sign-off form shows") from exc
    if not isinstance(doc, dict) or set(doc) != set(REQUEST_FIELDS):
        raise SignerError(f"the signing request must hold exactly {', '.join(REQUEST_FIELDS)}")
    ok = all(isinstance(doc[k], str) for k in REQUEST_FIELDS if k != "subject") and isinstance(doc["subject"], list)
    if not ok or not all(
        isinstance(s, dict)
        and isinstance(s.get("name"), str)
        and isinstance(s.get("digest"), dict)
        and isinstance(s["digest"].get("sha256"), str)
        for s in doc["subject"]
    ):
        raise SignerError("the signing request's fields are not of the expected types")
    return doc


def engine_statement(request: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The engine's signed statement the request carries and the pack's name (the sha256 of that
    statement), once its envelope's sha256 is the one among the subjects the DPO signs (`SignerError`
    otherwise): what the signer shows comes from what is signed."""
    try:
        raw = base64.b64decode(request["engine_envelope"], validate=True)
        payload = base64.b64decode(json.loads(raw)["payload"], validate=True)
        statement = json.loads(payload)
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise SignerError("the signing request's engine envelope is not a DSSE envelope") from exc
    signed = [s["digest"]["sha256"] for s in request["subject"] if s["name"] == ENGINE_ENVELOPE]
    if signed != [sha256_hex(raw)]:
        raise SignerError("the signing request's engine envelope is not the one its subjects name")
    pred = statement.get("predicate") if isinstance(statement, dict) else None
    if not isinstance(pred, dict) or pred.get("request_id") != request["request_id"]:
        raise SignerError("the engine's statement is about another request")
    if pred.get("status") != request["status"] or not isinstance(pred.get("tiers"), dict):
        raise SignerError("the engine's statement states another status than the signing request")
    return statement, sha256_hex(payload)


def review_text(request: Mapping[str, Any]) -> str:
    """What the DPO attests, shown before the question: request, status, the tier table and each
    exception with its one-sentence explanation (from the engine's signed statement)."""
    statement, name = engine_statement(request)
    pred = statement["predicate"]
    exceptions = pred.get("exceptions") or []
    return "\n".join(
        [
            f"Erasure request {request['request_id']}: status {request['status']},"
            f" {'all clear' if pred.get('all_clear') else 'NOT all clear'}",
            f"Engine key {request['engine_keyid']}; pack name sha256:{name}",
            f"{len(request['subject'])} files covered by your signature.",
            "",
            *tier_table(pred["tiers"]),
            "",
            f"Exceptions ({len(exceptions)}):" if exceptions else "Exceptions: none",
            *(f"  - {exception_line(e)}" for e in exceptions),
            "",
        ]
    )


def sign_request(key: SigningKey, request: Mapping[str, Any], *, attested_at: str | None = None) -> bytes:
    """The DPO's DSSE envelope (one JSON line) over the statement the request describes, now."""
    when = attested_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    payload = dpo_statement_bytes(
        request["subject"],
        request_id=request["request_id"],
        attested_at=when,
        dpo_keyid=keyid_of(key.public_key()),
        engine_keyid=request["engine_keyid"],
        status=request["status"],
    )
    return dsse_line(key, PAYLOAD_TYPE, payload)


def dsse_line(key: SigningKey, payload_type: str, payload: bytes) -> bytes:
    """One DSSE envelope (one JSON line, sorted keys) over `payload`, signed by `key`."""
    envelope = {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {
                "keyid": keyid_of(key.public_key()),
                "sig": base64.b64encode(signature(key, pae(payload_type, payload))).decode("ascii"),
            }
        ],
    }
    return json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode("ascii")


def rejection_bytes(request: Mapping[str, Any], reason: str, *, rejected_at: str | None = None) -> bytes:
    """The DPO's refusal as canonical JSON: the request, the pack's name (`pack_sha256`: the sha256 of
    the engine's signed statement, as VERIFY.md and `erasure pack show` name a pack), the reason code."""
    if reason not in REJECT_REASONS:
        raise SignerError(f"the reason must be one of {', '.join(REJECT_REASONS)}")
    _statement, name = engine_statement(request)
    when = rejected_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return canonical_json(
        {"request_id": request["request_id"], "pack_sha256": name, "reason": reason, "rejected_at": when}
    )


def load_signing_key(data: bytes, passphrase: bytes | None) -> SigningKey:
    """A PEM private key (ECDSA P-256 or Ed25519); `SignerError` otherwise."""
    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError as exc:
        raise SignerError("the key is encrypted: give --passphrase-env" if passphrase is None else str(exc)) from exc
    except ValueError as exc:
        raise SignerError("not a PEM private key, or a wrong passphrase") from exc
    if isinstance(key, Ed25519PrivateKey) or (
        isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)
    ):
        return key
    raise SignerError("the key is neither ECDSA P-256 nor Ed25519")


def main(argv: Sequence[str] | None = None) -> int:
    """The signer's command line (see the module docstring). Exit 0 signed, 1 declined, 2 unusable input."""
    p = argparse.ArgumentParser(prog="erasure-dpo-sign", description="Sign (or refuse) an erasure proof pack.")
    p.add_argument("request", help="the signing request: its line, a file holding it, or '-' (read stdin)")
    p.add_argument("--key", required=True, help="your private key (PEM), e.g. dpo.pem")
    p.add_argument("--passphrase-env", help="environment variable holding the key's passphrase")
    p.add_argument("--reject", metavar="REASON", choices=REJECT_REASONS, help="refuse to attest, with this reason")
    p.add_argument("--yes", action="store_true", help="sign without asking")
    args = p.parse_args(argv)
    try:
        if args.request == "-":
            text = sys.stdin.read()
        elif os.path.isfile(args.request):  # the file the kit or the sign-off form gives
            with open(args.request, encoding="ascii", errors="replace") as fh:
                text = fh.read()
        else:
            text = args.request
        request = read_signing_request(text)
        review = review_text(request)
        try:
            with open(args.key, "rb") as fh:
                pem = fh.read()
        except OSError as exc:
            raise SignerError(f"cannot read {args.key}: {exc.strerror}") from exc
        secret = os.environ.get(args.passphrase_env) if args.passphrase_env else None
        if args.passphrase_env and secret is None:
            raise SignerError(f"the environment variable {args.passphrase_env} is not set")
        key = load_signing_key(pem, secret.encode() if secret is not None else None)
    except SignerError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stderr.write(review + "\n")
    question = f"Refuse to attest ({args.reject})?" if args.reject else "Attest this erasure with your key?"
    if not args.yes:
        sys.stderr.write(f"{question} [y/N] ")
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            sys.stderr.write("nothing signed\n")
            return 1
    if args.reject:
        line = dsse_line(key, REJECTION_PAYLOAD_TYPE, rejection_bytes(request, args.reject))
    else:
        line = sign_request(key, request)
    sys.stdout.write(line.decode("ascii") + "\n")
    return 0
