"""The follow-up statement: once no declared backup holds a request's subject any longer, the engine
signs a statement over the request's pack that says so, beside the pack in its evidence folder, once
(`backups-followup.intoto.json`; a later pack's `proof-<n>.backups-followup.intoto.json`). The verifier
checks it (`proof/verify/backups.py`).

It is a DSSE envelope over an in-toto Statement v1 whose subject is the pack (`proof.tar.gz` and its
sha256) and whose predicate lists every backup the pack said held the subject (`held_in_backup_until`
exceptions), each with its expiry and how it ended (expired, or deleted before it expired), and when
this was checked. Ids, times and digests only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from erasure.errors import InputError
from proof.dsse import sign_envelope
from proof.history import current_pack
from proof.keyring import check_signing_key, read_beside
from proof.keys import keyid, load_private_key
from proof.verify.strict_json import utc_time
from wire.format import FOLLOWUP_PREDICATE, STATEMENT_TYPE, canonical_json, envelope_bytes, followup_name

PACK_FILE = "proof.tar.gz"


def followup_statement(
    pack: bytes,
    request_id: str,
    backups: Sequence[dict[str, Any]],
    stated_at: str,
    engine_keyid: str,
    pack_name: str = PACK_FILE,
) -> bytes:
    """The canonical Statement bytes (see the module's docstring)."""
    return canonical_json(
        {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": pack_name, "digest": {"sha256": hashlib.sha256(pack).hexdigest()}}],
            "predicateType": FOLLOWUP_PREDICATE,
            "predicate": {
                "request_id": request_id,
                "stated_at": stated_at,
                "engine_keyid": engine_keyid,
                "backups": [dict(b) for b in backups],
                "held_in_backup": 0,
                "statement": "no declared backup taken before the erasure holds the subject any longer",
            },
        }
    )


def write_followup(
    evidence_dir: Path, engine_key_path: Path, request_id: str, backups: Sequence[dict[str, Any]], stated_at: str
) -> Path:
    """Sign the follow-up statement over the request's current pack with the engine key and write it
    beside the pack. `backups`: {ref, expires_at, ended ('expired' | 'deleted' | 'rewritten')} per backup."""
    key = load_private_key(engine_key_path)
    when = utc_time(stated_at)
    if when is None:
        raise InputError(f"stated_at {stated_at!r} is not a UTC time")
    check_signing_key(read_beside(Path(engine_key_path).parent), key, "engine", when)  # never a retired key
    pack_path = current_pack(evidence_dir)
    out = evidence_dir / followup_name(pack_path.name)
    if out.exists() or out.is_symlink():  # made once: evidence is never written over (issue 34)
        return out
    payload = followup_statement(pack_path.read_bytes(), request_id, backups, stated_at, keyid(key), pack_path.name)
    with open(out, "xb") as f:
        f.write(envelope_bytes(sign_envelope(payload, key)))
    return out
