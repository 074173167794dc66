"""What the DPO is shown before attesting (`summary`): the pack checked, then its per-tier table,
exceptions, scope, verification result, receipts by status and keys. Counts and ids only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from erasure.errors import InputError
from proof import verify
from proof.errors import PackRejected
from proof.history import current_pack
from proof.keys import load_public_key, public_key_pem
from proof.pack import predicate_of, read_pack
from wire.format import ENGINE_ENVELOPE, TIERS


def _count(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def summary(
    pack_path: Path,
    *,
    engine_pub: bytes | Path | None = None,
    dpo_pub: bytes | Path | None = None,
    keyring: bytes | None = None,
) -> dict[str, Any]:
    """What the DPO is shown before attesting: per-tier table, exceptions, scope, verification result,
    receipts by status, keys. Counts and ids only. The pack is checked first (signatures too when
    `engine_pub` is given; `signatures_verified` says which); `PackRejected` if it fails.

    `attested` is true only when the DPO's envelope verified under `dpo_pub` (a trusted key, which
    needs `engine_pub` too); an envelope present but not checked is `dpo_attestation: "not checked"`,
    never "attested", and its claimed key and time are not shown. With `keyring` (instead of the two
    keys) both signatures are checked against it: each key as of its statement's signing time."""
    pack_path = Path(pack_path)
    if pack_path.is_dir():
        pack_path = current_pack(pack_path)
    if dpo_pub is not None and engine_pub is None:
        raise InputError("the DPO's attestation is checked with the engine's key too: give both")
    if keyring is not None and engine_pub is not None:
        raise InputError("give either a keyring or the engine's (and DPO's) keys, not both")
    data = read_pack(pack_path)
    try:
        result = (
            verify.verify_bytes(data, None, None, require_dpo=False, keyring=keyring)
            if keyring is not None
            else verify.verify_bytes(
                data,
                public_key_pem(load_public_key(engine_pub)),
                public_key_pem(load_public_key(dpo_pub)) if dpo_pub is not None else None,
                require_dpo=False,
            )
            if engine_pub is not None
            else verify.verify_contents(data)
        )
    except verify.PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc
    _, files = verify.extract(data)
    pred = predicate_of(files[ENGINE_ENVELOPE], ENGINE_ENVELOPE)
    ver = json.loads(files["verification.json"])
    probes = ver["probes"]
    receipts: dict[str, int] = {}
    for line in files["subprocessor-receipts.jsonl"].decode("utf-8").splitlines():
        if line.strip():
            st = str(json.loads(line).get("status"))
            receipts[st] = receipts.get(st, 0) + 1
    return {
        "request_id": result.request_id,
        "legal_basis": pred["legal_basis"],
        "received_at": pred["received_at"],
        "verified_at": pred["verified_at"],
        "status": result.status,
        "all_clear": result.all_clear,
        "tiers": [{"tier": t, **pred["tiers"][t]} for t in TIERS],
        "exceptions": pred["exceptions"],
        "out_of_scope": pred["out_of_scope"],
        "verification": {
            "all_clear": ver["all_clear"],
            "probes": len(probes),
            "residue": sum(int(p["residue"]) for p in probes),
            "methods": sorted({f"{p['tier']}/{p['method']}" for p in probes}),
            "bystanders_before": sum(_count(p.get("bystanders_before")) for p in probes),
            "bystanders_after": sum(_count(p.get("bystanders_after")) for p in probes),
        },
        "receipts": dict(sorted(receipts.items())),
        "engine_keyid": result.engine_keyid,
        "attested": result.dpo_attestation == "verified",
        "dpo_attestation": result.dpo_attestation,
        "dpo_keyid": result.dpo_keyid,
        "attested_at": result.attested_at,
        "signatures_verified": result.signatures_verified,
        "pack_name": result.pack_name,
        "timestamps": result.timestamps,
    }
