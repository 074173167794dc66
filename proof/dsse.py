"""DSSE envelopes (https://github.com/secure-systems-lab/dsse, protocol v1) over in-toto Statements.

The signature covers PAE(payloadType, payload) =
    b"DSSEv1 " + len(type) + b" " + type + b" " + len(body) + b" " + body
with the lengths in ASCII decimal (bytes, not characters).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from proof.keys import PrivateKey, keyid, sign

PAYLOAD_TYPE = "application/vnd.in-toto+json"


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding of `body` under `payload_type`."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def sign_envelope(payload: bytes, key: PrivateKey, payload_type: str = PAYLOAD_TYPE) -> dict[str, Any]:
    """A DSSE envelope of `payload` with one signature by `key` (keyid = sha256 of its public DER)."""
    sig = sign(key, pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": keyid(key), "sig": base64.b64encode(sig).decode("ascii")}],
    }


def envelope_bytes(envelope: dict[str, Any]) -> bytes:
    """The file form of an envelope: sorted keys, two-space indent, trailing newline."""
    return (json.dumps(envelope, sort_keys=True, indent=2) + "\n").encode("utf-8")


def payload_of(envelope: dict[str, Any]) -> bytes:
    """The decoded payload bytes of an envelope (not verified: use `proof.verify` for that)."""
    return base64.b64decode(envelope["payload"], validate=True)
