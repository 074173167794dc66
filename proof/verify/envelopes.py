"""The trusted keys (check 0, `KeyArgumentError`), check 2 (`SignatureError`) and check 3
(`StatementError`): the DSSE envelopes and the in-toto statements they carry.

0 keys: each key file is read up to 64 KiB and holds an ECDSA P-256 or Ed25519 public key (PEM); any
other key (RSA, SM2, secp112r1...) is refused.

2 signature: each DSSE envelope is in the writer's canonical form (`wire.envelope_bytes`: no signature
covers the DPO's envelope, so its bytes may not vary), holds only payloadType, payload and ONE
signature (keyid, sig), whose keyid is the sha256 of the GIVEN key's SubjectPublicKeyInfo DER and which
verifies over PAE(payloadType, payload) with that key; payload and sig in canonical base64; an ECDSA
sig in DER with s <= n/2 (low-s: (r, n - s) would be a second valid encoding).

3 statement: payloadType is application/vnd.in-toto+json; the payload is an in-toto Statement v1 with
our predicateType (erasure proof for the engine, DPO attestation for the DPO); the predicates are well
formed (the DPO's attested_at a UTC time YYYY-MM-DDTHH:MM:SS[.ffffff]Z) and name the given keys.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from proof.verify.errors import KeyArgumentError, SignatureError, StatementError, fail
from proof.verify.files import read_regular
from proof.verify.strict_json import json_object, parse_json, utc_time
from wire.format import (
    P256_ORDER,
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    STATUSES,
    envelope_bytes,
    keyid_of,
    pae,
)

PublicKey = ec.EllipticCurvePublicKey | Ed25519PublicKey
MAX_KEY_BYTES = 64 * 1024


# --- 0 keys --------------------------------------------------------------------------------------


def read_key(path: str | Path, role: str) -> bytes:
    """A key file's bytes, read up to `MAX_KEY_BYTES` (a device of endless bytes is refused)."""
    return read_bounded(path, MAX_KEY_BYTES, f"the {role} key")


def read_bounded(path: str | Path, limit: int, what: str) -> bytes:
    """A trusted input file's bytes: a regular file of at most `limit` bytes (`KeyArgumentError`
    otherwise; `files.read_regular`)."""
    return read_regular(path, limit, f"{what} {path}", KeyArgumentError)


def load_public_key(pem: bytes, role: str) -> PublicKey:
    """A trusted public key from PEM: ECDSA P-256 or Ed25519, else `KeyArgumentError`."""
    if len(pem) > MAX_KEY_BYTES:
        fail(KeyArgumentError, f"the {role} key is larger than {MAX_KEY_BYTES} bytes: not a PEM public key")
    try:
        key = serialization.load_pem_public_key(pem)
    except UnsupportedAlgorithm:
        fail(KeyArgumentError, f"the {role} key is of an algorithm or curve this verifier does not support")
    except (ValueError, TypeError):
        fail(KeyArgumentError, f"the {role} key is not a PEM public key")
    if isinstance(key, Ed25519PublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    fail(KeyArgumentError, f"the {role} key is neither ECDSA P-256 nor Ed25519")


# --- 2 signature ---------------------------------------------------------------------------------


def _envelope(data: bytes, name: str) -> tuple[dict[str, Any], bytes]:
    env = json_object(parse_json(data, name, SignatureError), name, SignatureError)
    if envelope_bytes(env) != data:
        # No signature covers the DPO's envelope (nor the engine's without it): only a canonical form
        # keeps its bytes, and so the pack's digest, from changing while every check passes.
        fail(
            SignatureError,
            f"{name} is not in the canonical form the writer writes (sorted keys, two-space"
            " indent, ASCII, one final newline)",
        )
    if (
        not isinstance(env.get("payloadType"), str)
        or not isinstance(env.get("payload"), str)
        or not isinstance(env.get("signatures"), list)
    ):
        fail(SignatureError, f"{name} is not a DSSE envelope")
    sigs = env["signatures"]
    if (
        set(env) != {"payloadType", "payload", "signatures"}
        or len(sigs) != 1
        or not isinstance(sigs[0], dict)
        or set(sigs[0]) != {"keyid", "sig"}
    ):
        fail(
            SignatureError,
            f"{name} is not an envelope as the writer writes it (payloadType, payload, and"
            " exactly one signature of keyid and sig)",
        )
    try:
        env["payloadType"].encode("utf-8")
    except UnicodeEncodeError:
        fail(SignatureError, f"{name}: payloadType is not Unicode text")
    try:
        payload = base64.b64decode(env["payload"], validate=True)
    except (binascii.Error, ValueError):
        fail(SignatureError, f"{name}: payload is not base64")
    if base64.b64encode(payload).decode("ascii") != env["payload"]:
        fail(SignatureError, f"{name}: payload is not in canonical base64 (padding bits set)")
    return env, payload


def _verify_sig(key: PublicKey, sig: bytes, message: bytes) -> bool:
    try:
        if isinstance(key, Ed25519PublicKey):
            key.verify(sig, message)
        else:
            key.verify(sig, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def _low_s_der(sig: bytes, name: str, role: str) -> None:
    """An ECDSA signature as the writer makes it: DER (one encoding of (r, s)) with s <= n/2. Either
    (r, s) or (r, n - s) verifies; accepting both would let anyone change the pack's bytes."""
    try:
        r, s = decode_dss_signature(sig)
    except ValueError:
        fail(SignatureError, f"{name}: the {role} signature is not a DER-encoded ECDSA signature")
    if encode_dss_signature(r, s) != sig:
        fail(SignatureError, f"{name}: the {role} signature is not in DER (another encoding of the same values)")
    if s > P256_ORDER // 2:
        fail(SignatureError, f"{name}: the {role} signature is high-s (s > n/2): the writer signs low-s only")


def check_signature(data: bytes, name: str, key: PublicKey, role: str) -> tuple[str, bytes]:
    """Check 2 for one envelope: returns (payloadType, payload) once a signature by `key` verifies."""
    env, payload = _envelope(data, name)
    kid = keyid_of(key)
    mine = [s for s in env["signatures"] if isinstance(s, dict) and s.get("keyid") == kid]
    if not mine:
        fail(SignatureError, f"{name} has no signature by the given {role} key (keyid {kid[:16]}...)")
    message = pae(env["payloadType"], payload)
    for s in mine:
        sig_text = s.get("sig")
        if not isinstance(sig_text, str):
            continue
        try:
            sig = base64.b64decode(sig_text, validate=True)
        except (binascii.Error, ValueError):
            continue
        if base64.b64encode(sig).decode("ascii") != sig_text:
            fail(SignatureError, f"{name}: the {role} signature is not in canonical base64 (padding bits set)")
        if isinstance(key, ec.EllipticCurvePublicKey):
            _low_s_der(sig, name, role)
        if _verify_sig(key, sig, message):
            return env["payloadType"], payload
    fail(SignatureError, f"{name}: the {role} signature does not verify")


def unverified_payload(data: bytes, name: str) -> tuple[str, bytes, str | None]:
    """(payloadType, payload, first keyid) of an envelope WITHOUT checking its signature."""
    env, payload = _envelope(data, name)
    sigs = [s for s in env["signatures"] if isinstance(s, dict)]
    kid = sigs[0].get("keyid") if sigs else None
    return env["payloadType"], payload, kid if isinstance(kid, str) else None


# --- 3 statement ---------------------------------------------------------------------------------

ENGINE_FIELDS: dict[str, Callable[[Any], bool]] = {
    "request_id": lambda v: isinstance(v, str),
    "legal_basis": lambda v: isinstance(v, str),
    "received_at": lambda v: isinstance(v, str),
    "verified_at": lambda v: isinstance(v, str),
    "all_clear": lambda v: isinstance(v, bool),
    "status": lambda v: v in STATUSES,
    "tiers": lambda v: isinstance(v, dict),
    "exceptions": lambda v: isinstance(v, list),
    "out_of_scope": lambda v: isinstance(v, list),
    "engine_keyid": lambda v: isinstance(v, str),
}
DPO_FIELDS: dict[str, Callable[[Any], bool]] = {
    "request_id": lambda v: isinstance(v, str),
    "attested_at": lambda v: utc_time(v) is not None,
    "dpo_keyid": lambda v: isinstance(v, str),
    "statement": lambda v: isinstance(v, str) and bool(v),
    "engine_keyid": lambda v: isinstance(v, str),
}


def check_statement(
    payload_type: str, payload: bytes, name: str, predicate_type: str, fields: Mapping[str, Callable[[Any], bool]]
) -> dict[str, Any]:
    """Check 3 for one envelope: returns the Statement."""
    if payload_type != PAYLOAD_TYPE:
        fail(StatementError, f"{name}: payloadType is not {PAYLOAD_TYPE}")
    st = json_object(parse_json(payload, f"{name} payload", StatementError), f"{name} payload", StatementError)
    if st.get("_type") != STATEMENT_TYPE:
        fail(StatementError, f"{name}: _type is not {STATEMENT_TYPE}")
    if st.get("predicateType") != predicate_type:
        fail(StatementError, f"{name}: predicateType is not {predicate_type}")
    if not isinstance(st.get("subject"), list):
        fail(StatementError, f"{name}: no subject list")
    pred = json_object(st.get("predicate"), f"{name} predicate", StatementError)
    for fname, ok in fields.items():
        if fname not in pred or not ok(pred[fname]):
            fail(StatementError, f"{name}: predicate field {fname!r} is missing or malformed")
    return st
