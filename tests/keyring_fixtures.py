"""Keyrings and the attack a keyring exists for: a pack forged with a retired key after its retirement.

`forged_by_retired_keys_after_retirement` is the insider (or thief) who kept copies of the engine's and
the DPO's private keys from before a rotation and signs a new pack dated after it: every check that
only knows single keys passes it; only the keys' validity periods can refuse it.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from proof.dsse import sign_envelope
from proof.keys import keyid, load_private_key, load_public_key, public_key_pem
from proof.statement import dpo_statement
from tests.proof_fixtures import json_edit, read_members, repack, reseal
from wire.format import DPO_ENVELOPE, ENGINE_ENVELOPE, dpo_statement_text, envelope_bytes


def iso(t: datetime) -> str:
    """Whole-second UTC text, as keyrings and the DPO's attested_at are written."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def entry(role: str, pub: Path, valid_from: str, valid_until: str | None) -> dict[str, Any]:
    """A keyring entry for the public key file `pub`, written out here (not by the code under test)."""
    key = load_public_key(pub)
    return {
        "keyid": keyid(key),
        "role": role,
        "algorithm": "ed25519" if isinstance(key, Ed25519PublicKey) else "ecdsa-p256",
        "public_key_pem": public_key_pem(key).decode("ascii"),
        "valid_from": valid_from,
        "valid_until": valid_until,
    }


def keyring_file(entries: list[dict[str, Any]]) -> bytes:
    """The canonical keyring form, as documented (sorted keys and entries, two-space indent, newline)."""
    doc = {
        "format": "erasure-keyring/v1",
        "keys": sorted(entries, key=lambda e: (e["role"], e["valid_from"], e["keyid"])),
    }
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode()


def forged_by_retired_keys_after_retirement(
    genuine_pack: Path, retired_engine_key: Path, retired_dpo_key: Path, signed_at: datetime
) -> bytes:
    """A complete, self-consistent pack re-derived from a genuine pack's evidence, its verification
    re-dated to `signed_at` (after the keys' retirement), signed with the retired engine key and
    attested with the retired DPO key at the same time."""
    top, files = read_members(genuine_pack)
    when = iso(signed_at)
    files["verification.json"] = json_edit(files["verification.json"], lambda d: d.update(verified_at=when))
    sealed = reseal(files, retired_engine_key)
    engine_kid = keyid(load_private_key(retired_engine_key))
    dpo = load_private_key(retired_dpo_key)
    request_id = json.loads(files["request.json"])["request_id"]
    status = _predicate(sealed)["status"]
    statement = dpo_statement(
        sealed,
        request_id=request_id,
        attested_at=when,
        dpo_keyid=keyid(dpo),
        engine_keyid=engine_kid,
        status=status,
    )
    assert dpo_statement_text(request_id, engine_kid, status) in statement.decode()
    sealed[DPO_ENVELOPE] = envelope_bytes(sign_envelope(statement, dpo))
    return repack(top, sealed)


def _predicate(files: dict[str, bytes]) -> dict[str, Any]:
    pred = json.loads(base64.b64decode(json.loads(files[ENGINE_ENVELOPE])["payload"]))["predicate"]
    assert isinstance(pred, dict)
    return pred
