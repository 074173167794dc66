"""DSSE envelopes (https://github.com/secure-systems-lab/dsse, protocol v1) over in-toto Statements.

The signature covers `wire.pae(payloadType, payload)`; an envelope's file form is `wire.envelope_bytes`.
"""

from __future__ import annotations

import base64
from typing import Any

from proof.keys import PrivateKey, keyid, sign
from wire.format import PAYLOAD_TYPE, pae


def sign_envelope(payload: bytes, key: PrivateKey, payload_type: str = PAYLOAD_TYPE) -> dict[str, Any]:
    """A DSSE envelope of `payload` with one signature by `key` (keyid = sha256 of its public DER)."""
    sig = sign(key, pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": keyid(key), "sig": base64.b64encode(sig).decode("ascii")}],
    }
