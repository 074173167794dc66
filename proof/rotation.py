"""Proof of a key rotation: what `erasure keys enrol` needs before a new public key signs anything.

`erasure keys rotate` writes `<role>.rotation.json` beside the new key: one statement (the role, the
retired key's id, the new key's id and public key, the time) in two DSSE envelopes, one signed by the
retired (current) key, "I hand over to this key", and one by the new key, "I hold this key" (proof of
possession). The controller's `keys enrol` checks both against the key its keyring holds as the role's
current one, and refuses anything else: a message saying "my new key is this" proves nothing.

The very first key of a role has no earlier key to vouch for it: `erasure keys trust` takes it on the
operator's word, with its fingerprint typed in after comparing it with the key's holder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from erasure.errors import ConfigError
from proof.dsse import sign_envelope
from proof.keys import PrivateKey, PublicKey, keyid, load_public_key, public_key_pem
from proof.verify.envelopes import check_signature
from proof.verify.errors import PackError
from wire.format import canonical_json, envelope_bytes

ROTATION_FORMAT = "erasure-key-rotation/v1"
ROTATION_PAYLOAD_TYPE = "application/vnd.erasure.key-rotation+json"
MAX_ROTATION_BYTES = 64 * 1024


class KeyNotProven(ConfigError):
    """A key offered for enrolment without a valid rotation statement from the current key, or without
    the new key's own signature."""


def rotation_file(keys_dir: Path, role: str) -> Path:
    """Where `keys rotate` writes the rotation statement of `role`'s newest key."""
    return Path(keys_dir) / f"{role}.rotation.json"


def rotation_statement(role: str, retired: PrivateKey, new: PrivateKey, at: str) -> bytes:
    """The rotation file's bytes: the statement signed by the retired key and by the new key."""
    payload = canonical_json(
        {
            "format": ROTATION_FORMAT,
            "role": role,
            "previous_keyid": keyid(retired),
            "keyid": keyid(new),
            "public_key_pem": public_key_pem(new.public_key()).decode("ascii"),
            "rotated_at": at,
        }
    )
    by_current = json.loads(envelope_bytes(sign_envelope(payload, retired, ROTATION_PAYLOAD_TYPE)))
    by_new = json.loads(envelope_bytes(sign_envelope(payload, new, ROTATION_PAYLOAD_TYPE)))
    return canonical_json({"format": ROTATION_FORMAT, "by_current_key": by_current, "by_new_key": by_new}) + b"\n"


def check_rotation(data: bytes, role: str, current: PublicKey, new: PublicKey) -> dict[str, Any]:
    """The rotation statement in `data` when it hands `role` over from `current` to `new`, signed by both;
    else `KeyNotProven` saying what is wrong. Returns the statement."""
    if len(data) > MAX_ROTATION_BYTES:
        raise KeyNotProven("the rotation statement is larger than a rotation statement can be")
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != ROTATION_FORMAT:
            raise KeyNotProven(f"not a rotation statement ({ROTATION_FORMAT})")
        ptype, payload = check_signature(
            envelope_bytes(doc["by_current_key"]), "the rotation statement", current, f"current {role}"
        )
        ptype2, payload2 = check_signature(envelope_bytes(doc["by_new_key"]), "the rotation statement", new, "new")
    except PackError as exc:
        raise KeyNotProven(f"{exc}: the new key is not proven") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise KeyNotProven(f"the rotation statement is malformed ({type(exc).__name__})") from exc
    if ptype != ROTATION_PAYLOAD_TYPE or (ptype2, payload2) != (ptype, payload):
        raise KeyNotProven("the two signatures of the rotation statement are not over one rotation statement")
    stated = json.loads(payload)
    if not isinstance(stated, dict):
        raise KeyNotProven("the rotation statement is not a JSON object")
    if stated.get("role") != role:
        raise KeyNotProven(f"the rotation statement is for the {stated.get('role')!r} role, not {role!r}")
    if stated.get("previous_keyid") != keyid(current) or stated.get("keyid") != keyid(new):
        raise KeyNotProven("the rotation statement hands over between other keys than the current and the new one")
    if keyid(load_public_key(str(stated.get("public_key_pem", "")).encode("ascii"))) != keyid(new):
        raise KeyNotProven("the rotation statement names another public key than the one offered")
    return stated
