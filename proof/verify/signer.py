"""The DPO's standalone signer: `erasure-dpo-sign.pyz`, built from this package like the verifier, so
the DPO signs on their own machine with nothing but Python and `cryptography`, and their private key
never reaches Prefect or the engine's machine.

    python erasure-dpo-sign.pyz --key dpo.pem [--passphrase-env VAR] SIGNING_REQUEST

The signing request is what the run's sign-off form shows (one base64 line, `signing_request`): the
request id, the engine's key id, the status the engine states, and the in-toto subjects (file names
and sha256 digests, never a person's data). The signer shows what the DPO is about to attest, asks for
a yes unless `--yes`, and prints the DSSE envelope of the DPO's statement (`dpo_statement_bytes`) as
one line, to paste into the form (or to give `erasure attest --envelope`).

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

from proof.verify.wire import (
    DPO_PREDICATE,
    P256_ORDER,
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    canonical_json,
    dpo_statement_text,
    keyid_of,
    pae,
)

SigningKey = ec.EllipticCurvePrivateKey | Ed25519PrivateKey
REQUEST_FIELDS = ("request_id", "engine_keyid", "status", "subject")


class SignerError(Exception):
    """A signing request or key the signer cannot use; its message is for the DPO."""


def signature(key: SigningKey, data: bytes) -> bytes:
    """Sign `data`: ECDSA-SHA256 (deterministic, DER, low-s: s <= n/2, the one encoding the verifier
    accepts) or Ed25519 (64 raw bytes)."""
    if isinstance(key, Ed25519PrivateKey):
        return key.sign(data)
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256(), deterministic_signing=True)))
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


def signing_request(request_id: str, engine_keyid: str, status: str, subject: Sequence[Mapping[str, Any]]) -> str:
    """The one line the sign-off form shows the DPO: base64 of the canonical JSON of what they sign."""
    doc = {"request_id": request_id, "engine_keyid": engine_keyid, "status": status, "subject": list(subject)}
    return base64.b64encode(canonical_json(doc)).decode("ascii")


def read_signing_request(text: str) -> dict[str, Any]:
    """The signing request back from its line (`SignerError` if it is not one)."""
    try:
        doc = json.loads(base64.b64decode("".join(text.split()), validate=True))
    except (binascii.Error, ValueError) as exc:
        raise SignerError("the signing request is not the base64 line the sign-off form shows") from exc
    if not isinstance(doc, dict) or set(doc) != set(REQUEST_FIELDS):
        raise SignerError(f"the signing request must hold exactly {', '.join(REQUEST_FIELDS)}")
    ok = all(isinstance(doc[k], str) for k in REQUEST_FIELDS[:3]) and isinstance(doc["subject"], list)
    if not ok or not all(
        isinstance(s, dict)
        and isinstance(s.get("name"), str)
        and isinstance(s.get("digest"), dict)
        and isinstance(s["digest"].get("sha256"), str)
        for s in doc["subject"]
    ):
        raise SignerError("the signing request's fields are not of the expected types")
    return doc


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
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {
                "keyid": keyid_of(key.public_key()),
                "sig": base64.b64encode(signature(key, pae(PAYLOAD_TYPE, payload))).decode("ascii"),
            }
        ],
    }
    return json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode("ascii")


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
    p = argparse.ArgumentParser(prog="erasure-dpo-sign", description="Sign an erasure proof pack as the DPO.")
    p.add_argument("request", help="the signing request line from the run's sign-off form ('-': read stdin)")
    p.add_argument("--key", required=True, help="your private key (PEM), e.g. dpo.pem")
    p.add_argument("--passphrase-env", help="environment variable holding the key's passphrase")
    p.add_argument("--yes", action="store_true", help="sign without asking")
    args = p.parse_args(argv)
    try:
        text = sys.stdin.read() if args.request == "-" else args.request
        request = read_signing_request(text)
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
    sys.stderr.write(
        f"You attest erasure request {request['request_id']}: status {request['status']}, "
        f"{len(request['subject'])} files, engine key {request['engine_keyid'][:16]}...\n"
    )
    if not args.yes:
        sys.stderr.write("Sign? [y/N] ")
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            sys.stderr.write("not signed\n")
            return 1
    sys.stdout.write(sign_request(key, request).decode("ascii") + "\n")
    return 0
