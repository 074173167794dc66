"""VERIFY.md: the regulator's note in an export, with the verifier's command and the openssl recipe
(the template is package data, `proof/notes/VERIFY.md`; `service.export` fills it in)."""

from __future__ import annotations

from proof.notes import note
from wire.format import (
    DPO_ENVELOPE,
    DPO_PREDICATE,
    ENGINE_ENVELOPE,
    ERASURE_PREDICATE,
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
)

VERIFY_MD = note("VERIFY.md")
TSA_STEPS = note("VERIFY-tsa-steps.sh")
ENGINE_CLOCK_TIMES = (
    "Times: no timestamp authority was configured; every time in this pack is the engine's own clock"
    " (manifest.json: time_source engine-clock)."
)


_WIRE_SLOTS = {
    "payload_type": PAYLOAD_TYPE,
    "payload_type_bytes": str(len(PAYLOAD_TYPE.encode())),
    "statement_type": STATEMENT_TYPE,
    "erasure_predicate": ERASURE_PREDICATE,
    "dpo_predicate": DPO_PREDICATE,
    "engine_envelope": ENGINE_ENVELOPE,
    "dpo_envelope": DPO_ENVELOPE,
}


def verify_md(**fields: str) -> str:
    """VERIFY.md for an export (`fields` fill the @NAME@ slots: ids, digests, times, all printable;
    the recipe's types and file names come from the wire format)."""
    text = VERIFY_MD
    defaults = {
        "tsa_fingerprint": "",
        "tsa_arg": "",
        "tsa_steps": "",
        "token_count": "0",
        "times": ENGINE_CLOCK_TIMES,
        "reverify_arg": "",
    }
    for name, value in {**_WIRE_SLOTS, **defaults, **fields}.items():
        text = text.replace(f"@{name.upper()}@", value)
    return text
