"""Checks the follow-up statement beside a pack (`backups-followup.intoto.json`, by `proof/backups_followup.py`).

Stdlib and cryptography only, like the verifier that calls it. Steps:
1. the envelope is DSSE over an in-toto Statement v1 of the backups-followup predicate, signed by the
   trusted engine key (keyid and signature);
2. its subject is this pack: `proof.tar.gz` with the pack file's sha256;
3. it is for the pack's request, and says no backup holds the subject (`held_in_backup` 0);
4. every backup the pack's engine statement listed as `held_in_backup_until` is in it, ended (expired at
   or before the statement's time, deleted, or rewritten: erased inside it), with the same expiry.
"""

from __future__ import annotations

import base64
import json
import tarfile
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from proof.verify.archive import MAX_PACK_BYTES
from proof.verify.errors import PackError
from proof.verify.files import open_regular, present, read_regular, sha256_regular
from wire.format import (
    FOLLOWUP_MAX_BYTES,
    FOLLOWUP_PREDICATE,
    PACK_FILE,
    STATEMENT_TYPE,
    followup_name,
    keyid_of,
    pae,
)

HELD = "held_in_backup_until"
MAX_BYTES = FOLLOWUP_MAX_BYTES


class FollowupError(PackError):
    """Check 12: the follow-up statement failed a check (one line)."""

    check = "backups-followup"


def _verified_payload(envelope: dict[str, Any], engine_pub_pem: bytes) -> dict[str, Any]:
    pub = serialization.load_pem_public_key(engine_pub_pem)
    if not isinstance(pub, Ed25519PublicKey | ec.EllipticCurvePublicKey):
        raise FollowupError("the engine key is neither ECDSA P-256 nor Ed25519")
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
        sigs = [s for s in envelope["signatures"] if s.get("keyid") == keyid_of(pub)]
        if not sigs:
            raise FollowupError("not signed by the trusted engine key")
        sig = base64.b64decode(sigs[0]["sig"], validate=True)
        data = pae(str(envelope["payloadType"]), payload)
        if isinstance(pub, Ed25519PublicKey):
            pub.verify(sig, data)
        elif isinstance(pub, ec.EllipticCurvePublicKey):
            pub.verify(sig, data, ec.ECDSA(hashes.SHA256()))
        else:
            raise FollowupError("the engine key is neither ECDSA P-256 nor Ed25519")
        doc = json.loads(payload)
    except InvalidSignature as exc:
        raise FollowupError("the signature does not verify") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise FollowupError(f"malformed envelope: {type(exc).__name__}") from exc
    if not isinstance(doc, dict):
        raise FollowupError("the statement is not a JSON object")
    return doc


def _pack_predicate(pack: Path) -> dict[str, Any]:
    """The pack's engine statement predicate (its signature is the main verifier's business)."""
    with (
        open_regular(pack, MAX_PACK_BYTES, "the pack", FollowupError, charge=False) as raw,
        tarfile.open(fileobj=raw, mode="r:gz") as tar,
    ):
        for m in tar.getmembers():
            if m.isfile() and m.name.endswith("signatures/engine.intoto.json") and m.size <= MAX_BYTES:
                f = tar.extractfile(m)
                assert f is not None
                env = json.loads(f.read())
                pred = json.loads(base64.b64decode(env["payload"]))["predicate"]
                if isinstance(pred, dict):
                    return pred
    raise FollowupError("the pack has no engine statement")


def verify_followup(pack: Path, statement: Path, engine_pub_pem: bytes) -> dict[str, Any]:
    """Check `statement` against `pack` (steps in the module's docstring); returns its predicate."""
    envelope = json.loads(read_regular(statement, MAX_BYTES, statement.name, FollowupError))
    doc = _verified_payload(envelope, engine_pub_pem)
    if doc.get("predicateType") != FOLLOWUP_PREDICATE or doc.get("_type") != STATEMENT_TYPE:
        raise FollowupError("not a backups-followup statement")
    digest = sha256_regular(pack, MAX_PACK_BYTES, "the pack", FollowupError)
    subject = doc.get("subject")
    named = subject[0].get("name") if isinstance(subject, list) and subject and isinstance(subject[0], dict) else None
    # the digest binds it to the pack; the name is the pack's in the evidence folder (an export adds the request id)
    if not isinstance(named, str) or not (PACK_FILE.fullmatch(named) or named == Path(pack).name):
        raise FollowupError("its subject is not this pack")
    if subject != [{"name": named, "digest": {"sha256": digest}}]:
        raise FollowupError("its subject is not this pack")
    pred = doc.get("predicate")
    if not isinstance(pred, dict):
        raise FollowupError("no predicate")
    pack_pred = _pack_predicate(pack)
    if pred.get("request_id") != pack_pred.get("request_id"):
        raise FollowupError("it is for another request")
    if pred.get("held_in_backup") != 0:
        raise FollowupError("it does not say that no backup holds the subject")
    stated = str(pred.get("stated_at", ""))
    ended = {str(b.get("ref")): b for b in pred.get("backups", []) if isinstance(b, dict)}
    for e in pack_pred.get("exceptions", []):
        if not isinstance(e, dict) or e.get("kind") != HELD:
            continue
        ref, _, until = str(e.get("item_key", "")).rpartition(":until:")
        b = ended.get(ref)
        if b is None:
            raise FollowupError(f"the pack's backup {ref} is not accounted for")
        if b.get("expires_at") != until:
            raise FollowupError(f"backup {ref}: another expiry than the pack's")
        if b.get("ended") == "expired" and not until <= stated:
            raise FollowupError(f"backup {ref} is said expired before its expiry")
        if b.get("ended") not in ("expired", "deleted", "rewritten"):
            raise FollowupError(f"backup {ref}: not ended")
    return pred


def beside(pack: str | Path) -> Path | None:
    """The follow-up statement's file beside `pack`, when anything is there (read: regular files only)."""
    statement = Path(pack).with_name(followup_name(Path(pack).name))
    return statement if present(statement) else None


def check_beside(pack: str | Path, engine_pub_pem: bytes) -> str | None:
    """Check the follow-up statement beside `pack` when there is one; None when there is none, else a
    note. Raises `FollowupError`."""
    statement = beside(pack)
    if statement is None:
        return None
    pred = verify_followup(Path(pack), statement, engine_pub_pem)
    return note(pred)


def note(pred: dict[str, Any]) -> str:
    """The verifier's note on a follow-up that passed (its predicate)."""
    return f"backups follow-up of {pred.get('stated_at')}: no backup holds the subject"
