"""in-toto Statement v1 documents: the engine's erasure proof and the DPO's attestation.

Statements are serialised canonically (sorted keys, no spaces, UTF-8) before signing, so the same
evidence gives the same payload bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
ERASURE_PREDICATE = "https://erasure-cascade.dev/erasure-proof/v1"
DPO_PREDICATE = "https://erasure-cascade.dev/dpo-attestation/v1"
SIGNATURES_DIR = "signatures/"
ENGINE_ENVELOPE = "signatures/engine.intoto.json"
DPO_ENVELOPE = "signatures/dpo.intoto.json"


def canonical_json(obj: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8: the bytes that are hashed and signed."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def subjects(files: Mapping[str, bytes]) -> list[dict[str, Any]]:
    """One in-toto subject per file, sorted by name: `{"name": path, "digest": {"sha256": hex}}`."""
    return [{"name": name, "digest": {"sha256": hashlib.sha256(files[name]).hexdigest()}}
            for name in sorted(files)]


def erasure_statement(files: Mapping[str, bytes], predicate: Mapping[str, Any]) -> bytes:
    """The engine's statement over every file of the pack except `signatures/*`."""
    covered = {k: v for k, v in files.items() if not k.startswith(SIGNATURES_DIR)}
    return canonical_json({"_type": STATEMENT_TYPE, "subject": subjects(covered),
                           "predicateType": ERASURE_PREDICATE, "predicate": dict(predicate)})


def dpo_statement(files: Mapping[str, bytes], *, request_id: str, attested_at: str, dpo_keyid: str,
                  engine_keyid: str, status: str) -> bytes:
    """The DPO's statement over the same files as the engine's plus the engine's envelope."""
    covered = {k: v for k, v in files.items() if not k.startswith(SIGNATURES_DIR) or k == ENGINE_ENVELOPE}
    if ENGINE_ENVELOPE not in covered:
        raise ValueError("the pack has no engine envelope to attest")
    predicate = {
        "request_id": request_id,
        "attested_at": attested_at,
        "dpo_keyid": dpo_keyid,
        "engine_keyid": engine_keyid,
        "statement": (f"I have reviewed the evidence in this pack for erasure request {request_id}, "
                      f"signed by the engine key {engine_keyid}, and attest that it records the "
                      f"outcome of the request as stated: {status}."),
    }
    return canonical_json({"_type": STATEMENT_TYPE, "subject": subjects(covered),
                           "predicateType": DPO_PREDICATE, "predicate": predicate})
