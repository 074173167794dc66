"""in-toto Statement v1 documents: the engine's erasure proof and the DPO's attestation.

Statements are serialised as `wire.canonical_json`, so the same evidence gives the same payload bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proof.verify.signer import dpo_statement_bytes
from wire.format import (
    ENGINE_ENVELOPE,
    ERASURE_PREDICATE,
    SIGNATURES_DIR,
    STATEMENT_TYPE,
    canonical_json,
    sha256_hex,
)


def subjects(files: Mapping[str, bytes]) -> list[dict[str, Any]]:
    """One in-toto subject per file, sorted by name: `{"name": path, "digest": {"sha256": hex}}`."""
    return [{"name": name, "digest": {"sha256": sha256_hex(files[name])}} for name in sorted(files)]


def erasure_statement(files: Mapping[str, bytes], predicate: Mapping[str, Any]) -> bytes:
    """The engine's statement over every file of the pack except `signatures/*`."""
    covered = {k: v for k, v in files.items() if not k.startswith(SIGNATURES_DIR)}
    return canonical_json(
        {
            "_type": STATEMENT_TYPE,
            "subject": subjects(covered),
            "predicateType": ERASURE_PREDICATE,
            "predicate": dict(predicate),
        }
    )


def dpo_statement(
    files: Mapping[str, bytes], *, request_id: str, attested_at: str, dpo_keyid: str, engine_keyid: str, status: str
) -> bytes:
    """The DPO's statement over the same files as the engine's plus the engine's envelope."""
    covered = {k: v for k, v in files.items() if not k.startswith(SIGNATURES_DIR) or k == ENGINE_ENVELOPE}
    if ENGINE_ENVELOPE not in covered:
        raise ValueError("the pack has no engine envelope to attest")
    return dpo_statement_bytes(
        subjects(covered),
        request_id=request_id,
        attested_at=attested_at,
        dpo_keyid=dpo_keyid,
        engine_keyid=engine_keyid,
        status=status,
    )
