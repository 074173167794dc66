"""The wire format of a proof pack, defined once: the writer (`proof/`), the store's audit log
(`memory/audit*.py`), the request vault (`erasure/`) and the offline verifier import it; no one keeps a
copy.

It holds the names (files, types, predicate URIs, formats), the encodings that are hashed or signed
(canonical JSON, DSSE PAE, an envelope's file form, a key's id), the audit log's hashes (chain entry,
checkpoint statement, RFC 9162 Merkle leaf and node) and the status rules of check 8.

It imports only the standard library and `cryptography` (the verifier's own rule: import-linter
checks it), and nothing of this project (the ground floor: every side may import it, no arrow climbs).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

# --- names ---------------------------------------------------------------------------------------

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
ERASURE_PREDICATE = "https://erasure-cascade.dev/erasure-proof/v1"
DPO_PREDICATE = "https://erasure-cascade.dev/dpo-attestation/v1"
FOLLOWUP_PREDICATE = "https://erasure-cascade.dev/backups-followup/v1"
"""A statement, signed once no declared backup holds the subject, over the pack (beside it, not in it)."""
PACK_FILE = re.compile(r"proof(?:-([1-9][0-9]{0,5}))?\.tar\.gz")
"""A request's packs in its evidence folder: `proof.tar.gz`, then `proof-<n>.tar.gz` (`proof.history`)."""
FOLLOWUP_FILE = "backups-followup.intoto.json"
"""The follow-up statement of the first pack; a later pack's is `proof-<n>.` + this (`followup_name`)."""
FOLLOWUP_MAX_BYTES = 1 << 20
"""The most a follow-up statement can be: the verifier refuses a larger file before reading it."""

REVERIFY_PREDICATE = "https://erasure-cascade.dev/reverification/v1"
"""A statement, signed at each later re-verification, over the pack's name (beside the pack, not in it)."""
REVERIFY_FILE = re.compile(r"reverify-([1-9][0-9]{0,8})\.intoto\.json")
"""`reverify-<n>.intoto.json`: the n-th re-verification of a pack, in its evidence folder."""
REVERIFY_SUBJECT = "proof.tar.gz#engine-statement"
"""A re-verification statement's one subject: the pack, by its name (the sha256 of its engine statement)."""
SIGNATURES_DIR = "signatures/"
ENGINE_ENVELOPE = "signatures/engine.intoto.json"
DPO_ENVELOPE = "signatures/dpo.intoto.json"
ENGINE_TSR = "signatures/engine.tsr"
DPO_TSR = "signatures/dpo.tsr"
"""RFC 3161 TimeStampResp files (DER): a TSA's token over the sha256 of the envelope's signature bytes."""
TIME_SOURCE_ENGINE, TIME_SOURCE_RFC3161 = "engine-clock", "rfc3161"
"""manifest.json's `time_source`: the times are the engine's own clock, or each envelope carries an RFC
3161 token (`timestamps` names the files). A manifest without the field is of the engine's clock."""
MANIFEST, SUMS, AUDIT = "manifest.json", "SHA256SUMS", "audit-log-redaction.json"
ATTESTATION = "attestation.txt"
EVIDENCE = ("request.json", "steps.jsonl", "verification.json", "subprocessor-receipts.jsonl", AUDIT, ATTESTATION)
"""The files every manifest lists: the five the flows write and the certificate."""
REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""The pack's top directory: erasure.request_ids.SAFE_TOKEN, copied (`erasure` is no import of the
verifier's; a test keeps them equal)."""

TIERS = (
    "working",
    "episodic",
    "semantic",
    "vectors",
    "fine_tune",
    "uploads",
    "derivatives",
    "subprocessors",
    "audit_log",
)
"""The nine tiers in cascade order (the values of erasure.tiers.CASCADE_ORDER; a test keeps them equal)."""
ERASED, WITH_EXCEPTIONS, NOT_ERASED, SKIPPED = "erased", "erasedWithExceptions", "notErased", "skipped"
STATUSES = (ERASED, WITH_EXCEPTIONS, NOT_ERASED)
"""A pack's overall status."""
EXCEPTION_STEP = frozenset({"exception", "erasedWithExceptions"})
"""Step statuses that make a tier erasedWithExceptions."""
RECEIPT_STATUSES = ("done", "pending", "failed")
"""What a subprocessor's receipt may say."""

AUDIT_FORMAT = "audit-log-redaction/v3"
AUDIT_V2_FORMAT = "audit-log-redaction/v2"
"""The format before v3: an inclusion proof in every entry, and every entry's hashes and redacted
commitments spelled out (a subject's entries cost about 2 KB each). Still verified: packs made with it
are in regulators' hands."""
AUDIT_V1_FORMAT = "audit-log-redaction/v1"
"""The format that carried the whole hash-chain segment: refused, with a line that says so."""
AUDIT_NONE_FORMAT = "audit-log-redaction/none/v1"
"""A pack of a home whose targets include no reference store: it has no audit log of ours to redact."""
AUDIT_REDACTION_EVENT = "erasure.audit_redaction"
"""The audit entry the audit-log step appends after redacting; `fields.request_id` names the request."""
CHECKPOINT_TYPE = "audit-checkpoint/v2"
GENESIS = "0" * 64
"""The `prev_hash` of the first audit entry, and the head of the empty log."""
AUDIT_ENTRY_KEYS = ("seq", "at", "event", "actor", "fields")
"""The body of an audit entry: what its hash covers, after its predecessor's hash."""
AUDIT_HASH_RULE = "sha256(prev_hash + '\\n' + canonical_json(body))"
MERKLE_TREE_RULE = (
    "RFC 9162 2.1: leaf i = sha256(0x00 || bytes(entry_hash of seq i+1)), node = sha256(0x01 || left || right)"
)


# --- encodings -----------------------------------------------------------------------------------


def canonical_json(obj: Any) -> bytes:
    """`obj` as the bytes that are hashed and signed: sorted keys, no whitespace, UTF-8 text kept as
    is (not `\\u` escaped). Plain JSON types only; NaN and infinities are refused (`ValueError`: they
    are not JSON)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data`, as 64 lowercase hex digits."""
    return hashlib.sha256(data).hexdigest()


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what an envelope's signature covers. The lengths are in
    ASCII decimal, counted in bytes."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def envelope_bytes(envelope: Mapping[str, Any]) -> bytes:
    """The one file form of a DSSE envelope: sorted keys, two-space indent, ASCII, one final newline.
    No signature covers an envelope's own bytes, so the verifier accepts only this form."""
    return (json.dumps(envelope, sort_keys=True, indent=2) + "\n").encode("ascii")


P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
"""n of NIST P-256: an ECDSA signature is written low-s (s <= n/2), the one encoding the verifier accepts."""


def keyid_of(public_key: ec.EllipticCurvePublicKey | Ed25519PublicKey) -> str:
    """A key's id: the sha256 hex of its SubjectPublicKeyInfo DER."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # on first use: 10 ms

    return sha256_hex(public_key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))


def dpo_statement_text(request_id: str, engine_keyid: str, status: str) -> str:
    """What the DPO signs they attest."""
    return (
        f"I have reviewed the evidence in this pack for erasure request {request_id}, "
        f"signed by the engine key {engine_keyid}, and attest that it records the "
        f"outcome of the request as stated: {status}."
    )


# --- the audit log's hashes ----------------------------------------------------------------------


def audit_entry_hash(prev_hash: str, body: Mapping[str, Any]) -> str:
    """`sha256(prev_hash + "\\n" + canonical_json(body))`, hex; `body` holds `AUDIT_ENTRY_KEYS`."""
    return sha256_hex(prev_hash.encode("ascii") + b"\n" + canonical_json(dict(body)))


def checkpoint_statement(seq: int, head_hash: str, tree_size: int, root_hash: str, at: str) -> bytes:
    """The bytes an `audit-checkpoint/v2` signature covers."""
    return canonical_json(
        {
            "type": CHECKPOINT_TYPE,
            "seq": seq,
            "head_hash": head_hash,
            "tree_size": tree_size,
            "root_hash": root_hash,
            "at": at,
        }
    )


MERKLE_EMPTY_ROOT = hashlib.sha256(b"").digest()
"""MTH of the empty tree: SHA-256 of the empty string."""


def merkle_leaf(data: bytes) -> bytes:
    """RFC 9162 2.1.1 leaf hash: SHA-256(0x00 || data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def merkle_node(left: bytes, right: bytes) -> bytes:
    """RFC 9162 2.1.1 interior node hash: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def merkle_split(n: int) -> int:
    """The largest power of two smaller than `n` (n >= 2): where RFC 9162 2.1.1 splits D[n]."""
    return 1 << ((n - 1).bit_length() - 1)


# --- status rules --------------------------------------------------------------------------------
#
# steps.jsonl holds one record per (target, tier): the reference store's records first (no `target`),
# then each other target's (its name in `target`, targets in name order), tiers in cascade order. A
# repeated or reordered record is refused, never resolved by "the last one wins".
#
# The status of one record, with the summed residue of the probes of its tier:
# - step status `exception` or `erasedWithExceptions`           -> erasedWithExceptions
# - step status `skipped`, after_count 0 or null, residue 0      -> skipped
# - step status `erased`, after_count 0, residue 0               -> erased
# - anything else                                               -> notErased
# Tier status, from every record of the tier (one per target): no record -> notErased; else the worst
# of its records' (notErased, then erasedWithExceptions), skipped only when every record is skipped,
# else erased. Its before/after counts are the sums over its records (null when none has one).
# Overall status:
# - no probe at all, a tier notErased, or residue > 0 in a probe that is not of an
#   erasedWithExceptions tier (probes of no tier, e.g. a byte scan, included) -> notErased
# - else a tier erasedWithExceptions, or verification exceptions            -> erasedWithExceptions
# - else all_clear true -> erased; else notErased
# `all_clear: true` further requires at least one probe, every probe's residue 0, and every step's
# after_count 0 (or null for a skipped step) unless its status is an exception status.


def step_order(rec: Mapping[str, Any]) -> tuple[int, str, int]:
    """Where a record belongs in steps.jsonl; records must come in strictly increasing order."""
    target, tier = rec.get("target"), TIERS.index(str(rec["step"]))
    return (0, "", tier) if target is None else (1, str(target), tier)


def record_status(rec: Mapping[str, Any], residue: int) -> str:
    """The status of one step record, given its tier's summed probe residue."""
    status, after = rec.get("status"), rec.get("after_count")
    if status in EXCEPTION_STEP:
        return WITH_EXCEPTIONS
    if status == "skipped" and after in (0, None) and residue == 0:
        return SKIPPED
    if status == "erased" and after == 0 and residue == 0:
        return ERASED
    return NOT_ERASED


def combined_status(statuses: Sequence[str]) -> str:
    """A tier's status from its records' (one per target): the worst; skipped only if all are."""
    if not statuses or NOT_ERASED in statuses:
        return NOT_ERASED
    if WITH_EXCEPTIONS in statuses:
        return WITH_EXCEPTIONS
    return SKIPPED if all(st == SKIPPED for st in statuses) else ERASED


def _sum(values: Sequence[Any]) -> int | None:
    counts = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return sum(counts) if counts else None


def tiers_table(steps: Sequence[Mapping[str, Any]], probes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """`{tier: {"status", "before", "after", "residue"}}` for the nine tiers, in cascade order."""
    records: dict[str, list[Mapping[str, Any]]] = {}
    for rec in steps:
        records.setdefault(str(rec["step"]), []).append(rec)
    residue: dict[str, int] = {}
    for p in probes:
        residue[str(p["tier"])] = residue.get(str(p["tier"]), 0) + int(p["residue"])
    table: dict[str, dict[str, Any]] = {}
    for tier in TIERS:
        mine, res = records.get(tier, []), residue.get(tier, 0)
        table[tier] = {
            "status": combined_status([record_status(r, res) for r in mine]),
            "before": _sum([r.get("before_count") for r in mine]),
            "after": _sum([r.get("after_count") for r in mine]),
            "residue": res,
        }
    return table


def overall_status(
    tiers: Mapping[str, Mapping[str, Any]],
    probes: Sequence[Mapping[str, Any]],
    all_clear: bool,
    exceptions: Sequence[Any],
) -> str:
    """The pack's status: erased, erasedWithExceptions or notErased."""
    excepted = {t for t, row in tiers.items() if row["status"] == WITH_EXCEPTIONS}
    if not probes or any(row["status"] == NOT_ERASED for row in tiers.values()):
        return NOT_ERASED
    if any(int(p["residue"]) > 0 and p["tier"] not in excepted for p in probes):
        return NOT_ERASED
    if excepted or exceptions:
        return WITH_EXCEPTIONS
    return ERASED if all_clear else NOT_ERASED


def all_clear_problems(steps: Sequence[Mapping[str, Any]], probes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why `all_clear: true` would be false for these records (tier names and counts only)."""
    problems: list[str] = []
    if not probes:
        problems.append("no probe ran")
    problems += [
        f"probe {p['tier']}/{p['method']} found residue {p['residue']}" for p in probes if int(p["residue"]) != 0
    ]
    for rec in steps:
        after, status = rec.get("after_count"), rec.get("status")
        if status in EXCEPTION_STEP or after == 0 or (status == "skipped" and after is None):
            continue
        problems.append(f"step {rec['step']} ends with after_count {after}")
    return problems


def followup_name(pack_name: str) -> str:
    """The follow-up statement's file name beside the pack named `pack_name`: each pack its own, so a
    statement once made is never written over by the next pack's."""
    stem = pack_name.removesuffix(".tar.gz")
    return FOLLOWUP_FILE if stem == "proof" else f"{stem}.{FOLLOWUP_FILE}"
