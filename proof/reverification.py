"""Re-verification statements: each later re-verification of a sealed request is signed by the engine
and written beside its pack as `reverify-<n>.intoto.json`; the pack itself is never rewritten.

A DSSE envelope over an in-toto Statement v1 whose one subject is the pack's name (the sha256 of the
engine's signed statement, `VerifyResult.pack_name`: it does not change with the container or the DPO's
attestation) and whose predicate (`REVERIFY_PREDICATE`) says when the probes ran again, whether all
was clear, the residue per tier, and which scanned files changed since the pack's scan manifest.
The statements are a chain: each names the one before (`previous`: the sha256 of its file, or the
pack's name for the first), so leaving one out (a statement that found the subject again) is seen. Ids,
counts, times, digests and keyed path hashes only. The verifier checks it (`proof/verify/reverify.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from proof.dsse import sign_envelope
from proof.evidence import scan_identifiers
from proof.keys import keyid, load_private_key
from proof.tarball import write_atomic
from wire.format import (
    REVERIFY_FILE,
    REVERIFY_PREDICATE,
    REVERIFY_SUBJECT,
    STATEMENT_TYPE,
    canonical_json,
    envelope_bytes,
)


def statement_files(evidence_dir: Path, prefix: str = "") -> list[tuple[int, Path]]:
    """The re-verification statements of one pack (`prefix`: `proof.history.statement_prefix`), (n, path)
    in order."""
    found = []
    for p in evidence_dir.iterdir() if evidence_dir.is_dir() else ():
        m = REVERIFY_FILE.fullmatch(p.name[len(prefix) :]) if p.name.startswith(prefix) else None
        if m and p.is_file():
            found.append((int(m.group(1)), p))
    return sorted(found)


def reverification_statement(pack_name: str, predicate: Mapping[str, Any]) -> bytes:
    """The canonical Statement bytes (see the module's docstring)."""
    return canonical_json(
        {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": REVERIFY_SUBJECT, "digest": {"sha256": pack_name}}],
            "predicateType": REVERIFY_PREDICATE,
            "predicate": dict(predicate),
        }
    )


def write_reverification(
    evidence_dir: Path,
    engine_key_path: Path,
    predicate: Mapping[str, Any],
    forbidden: Sequence[str],
    prefix: str = "",
) -> Path:
    """Sign the next `reverify-<n>.intoto.json` beside the pack (n = one more than the last; the
    predicate's `sequence`, `previous` and `engine_keyid` are set here: `previous` chains it to the
    statement before, the sha256 of that file's bytes, or for the first one to the pack's name).
    `forbidden`: the subject's identifiers, in memory only; a statement that would hold one is refused
    (`IdentifierInPack`) before it is written."""
    key = load_private_key(engine_key_path)
    before = statement_files(evidence_dir, prefix)
    n = (before[-1][0] if before else 0) + 1
    previous = hashlib.sha256(before[-1][1].read_bytes()).hexdigest() if before else str(predicate["pack_name"])
    pred = {**predicate, "sequence": n, "previous": previous, "engine_keyid": keyid(key)}
    payload = reverification_statement(str(pred["pack_name"]), pred)
    data = envelope_bytes(sign_envelope(payload, key))
    scan_identifiers({"re-verification statement": payload}, forbidden)
    out = evidence_dir / f"{prefix}reverify-{n}.intoto.json"
    write_atomic(out, data, replace=False)  # a concurrent re-verification never overwrites this one
    return out
