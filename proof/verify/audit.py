"""Check 7, audit-log (`AuditLogError`): the audit-log redaction evidence, audit-log-redaction.json.

Format audit-log-redaction/v3 (or v2; v1, which carried the whole hash-chain segment, is refused and
the line says so). The checkpoint key: --audit-key pins it; the command line requires it or
--no-audit-key, else the key the document names, covered by the engine's signature, and the OK line
says the key was NOT pinned. Both checkpoints' Ed25519 signatures over `wire.checkpoint_statement`
({"type": "audit-checkpoint/v2", seq, head_hash, tree_size, root_hash, at}, canonical JSON),
tree_size == seq, before <= after; the consistency proof from before.tree_size to after.tree_size
verifies (RFC 9162 2.1.4.2; equal sizes: empty proof, equal roots; size 0: empty proof, the empty
tree's root). Each entry (ascending seq, within the after tree) is seq, at, event, actor, fields and
prev_hash, the last only where entry seq-1 is not one of them (then it is that entry's hash); its hash
is recomputed from prev_hash and its body (`wire.audit_entry_hash`); one multiproof puts them all in
the after tree: leaf seq-1 = sha256(0x00 || entry hash bytes), node = sha256(0x01 || l || r), and the
proof is the root of every maximal subtree of the RFC 9162 2.1.1 split that holds no entry, left to
right, each used once, giving after.root_hash. Checkpoint heads agree with the entries. Each redacted
(seq, field), sorted and unique, names an included entry's field holding exactly {"commit": 64 hex};
every other included entry is the one erasure.audit_redaction entry with before.tree_size < seq <=
after.tree_size (check 8 binds its request id), whose fields.redacted equals the number of redacted
items; nothing left in the vault. (v2: every entry also carries entry_hash, prev_hash and its own
RFC 9162 2.1.3.2 inclusion path, and each redacted item the commitment.) A home whose targets hold no
reference store writes audit-log-redaction/none/v1 (format, reason, request_id): then no step record
may be the reference's (check 8).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from proof.verify.envelopes import MAX_KEY_BYTES
from proof.verify.errors import AuditLogError, fail, printable
from proof.verify.merkle import verify_consistency, verify_inclusion, verify_multiproof
from proof.verify.strict_json import count, is_int, json_object, parse_json, utc_time
from wire.format import (
    AUDIT,
    AUDIT_ENTRY_KEYS,
    AUDIT_FORMAT,
    AUDIT_NONE_FORMAT,
    AUDIT_REDACTION_EVENT,
    AUDIT_V1_FORMAT,
    AUDIT_V2_FORMAT,
    GENESIS,
    MERKLE_EMPTY_ROOT,
    audit_entry_hash,
    checkpoint_statement,
    keyid_of,
    merkle_leaf,
)

MAX_AUDIT_SEQ = 2**63 - 1
"""No audit log has more entries than a (signed 64-bit) SQLite integer counts."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _checkpoint_ok(key: Ed25519PublicKey, cp: Mapping[str, Any]) -> bool:
    try:
        statement = checkpoint_statement(cp["seq"], cp["head_hash"], cp["tree_size"], cp["root_hash"], cp["at"])
        key.verify(base64.b64decode(str(cp["signature"]), validate=True), statement)
    except (InvalidSignature, binascii.Error, ValueError, KeyError, UnicodeEncodeError):
        return False
    return True


def _audit_key(doc: Mapping[str, Any]) -> Ed25519PublicKey:
    ck = json_object(doc.get("checkpoint_key"), "checkpoint_key", AuditLogError)
    if ck.get("algorithm") != "ed25519":
        fail(AuditLogError, "the checkpoint key is not declared ed25519")
    pem = ck.get("public_key_pem")
    if not isinstance(pem, str) or len(pem) > MAX_KEY_BYTES:
        fail(AuditLogError, "the checkpoint key is not a PEM public key")
    try:
        key = serialization.load_pem_public_key(pem.encode("ascii"))
    except (ValueError, TypeError, UnicodeEncodeError, UnsupportedAlgorithm):
        fail(AuditLogError, "the checkpoint key is not a PEM public key of a supported algorithm")
    if not isinstance(key, Ed25519PublicKey):
        fail(AuditLogError, "the checkpoint key is not an Ed25519 key")
    if ck.get("key_id") != keyid_of(key):
        fail(AuditLogError, "the checkpoint key_id is not the sha256 of the key's DER")
    return key


def _entry_hash(e: Mapping[str, Any], seq: int) -> str:
    try:
        return audit_entry_hash(e["prev_hash"], {k: e.get(k) for k in AUDIT_ENTRY_KEYS})
    except UnicodeEncodeError:
        fail(AuditLogError, f"entry {seq} holds a lone UTF-16 surrogate (not Unicode text)")
    except (RecursionError, ValueError):
        fail(AuditLogError, f"entry {seq} cannot be serialised canonically")


def _hashes(v: Any, what: str) -> list[bytes]:
    """A list of 64-hex-digit hashes, as bytes."""
    if not isinstance(v, list) or not all(isinstance(h, str) and _HEX64.fullmatch(h) for h in v):
        fail(AuditLogError, f"{what} is not a list of 64-hex-digit hashes")
    return [bytes.fromhex(h) for h in v]


@dataclass(frozen=True)
class _Checkpoint:
    seq: int
    head: str
    root: bytes


def _audit_checkpoint(doc: Mapping[str, Any], which: str, key: Ed25519PublicKey) -> _Checkpoint:
    cp = json_object(doc.get(which), f"{which} checkpoint", AuditLogError)
    seq = count(cp.get("seq"), f"{which}.seq", AuditLogError)
    size = count(cp.get("tree_size"), f"{which}.tree_size", AuditLogError)
    assert seq is not None
    for name in ("head_hash", "root_hash"):
        if not isinstance(cp.get(name), str) or not _HEX64.fullmatch(cp[name]):
            fail(AuditLogError, f"the {which} checkpoint's {name} is not 64 hex digits")
    if utc_time(cp.get("at")) is None:
        fail(AuditLogError, f"the {which} checkpoint's at is not a UTC time (YYYY-MM-DDTHH:MM:SS[.ffffff]Z)")
    if size != seq:
        fail(AuditLogError, f"the {which} checkpoint's tree_size is not its seq")
    if seq > MAX_AUDIT_SEQ:  # the store's seq is a 64-bit integer; proofs then recurse at most 63 deep
        fail(AuditLogError, f"the {which} checkpoint's seq is larger than any 64-bit seq an audit log can have")
    if not _checkpoint_ok(key, cp):
        fail(AuditLogError, f"the {which} checkpoint signature does not verify")
    if seq == 0 and (cp["head_hash"] != GENESIS or bytes.fromhex(cp["root_hash"]) != MERKLE_EMPTY_ROOT):
        fail(
            AuditLogError,
            f"the {which} checkpoint of the empty log does not name the genesis hash and the empty tree's root",
        )
    return _Checkpoint(seq, cp["head_hash"], bytes.fromhex(cp["root_hash"]))


@dataclass
class AuditSummary:
    """What check 8 needs from the audit-log evidence: the request id that the one
    `erasure.audit_redaction` entry between the before and after checkpoints names."""

    redaction_request: str | None = None
    no_audit_log_for: str | None = None
    """The request id of an `audit-log-redaction/none/v1` document (no reference store, no audit log)."""
    checkpoint_times: tuple[str, str] | None = None
    """The before and after checkpoints' `at`: check 8 bounds them by the run's own times."""


def _redacted_item(raw: Any, v2: bool) -> tuple[int, str, str | None]:
    r = json_object(raw, "a redacted item", AuditLogError)
    seq, fname, commit = r.get("seq"), r.get("field"), r.get("commitment")
    if v2 and (not isinstance(commit, str) or not _HEX64.fullmatch(commit)):
        fail(AuditLogError, "a redacted commitment is not 64 hex digits")
    if not v2 and set(r) != {"seq", "field"}:
        fail(AuditLogError, "a redacted item holds exactly seq and field (its commitment is the entry's)")
    n = count(seq, "a redacted seq", AuditLogError)
    if n is None or not isinstance(fname, str):
        fail(AuditLogError, "a redacted item has no seq or field")
    return n, fname, commit


_V3_ENTRY_KEYS = frozenset(AUDIT_ENTRY_KEYS)


def _audit_entries(
    doc: Mapping[str, Any], before: _Checkpoint, after: _Checkpoint, v2: bool
) -> dict[int, dict[str, Any]]:
    """The entries, by seq: shape, order, recomputed hash, inclusion in the after tree (v3: one
    multiproof for all of them; v2: a path in each), and the links and checkpoint heads they reach."""
    raw = doc.get("entries")
    if not isinstance(raw, list):
        fail(AuditLogError, "entries is not a list")
    by_seq: dict[int, dict[str, Any]] = {}
    digests: dict[int, str] = {}
    last = 0
    for i, item in enumerate(raw):
        e = json_object(item, f"entries[{i}]", AuditLogError)
        seq = count(e.get("seq"), f"entries[{i}].seq", AuditLogError)
        assert seq is not None
        if seq <= last:
            fail(AuditLogError, f"the entries are not in ascending seq order, or repeat (at seq {seq})")
        if not 1 <= seq <= after.seq:
            fail(AuditLogError, f"entry {seq} lies outside the after checkpoint's tree")
        follows = seq - 1 in digests
        if v2:
            well_formed = isinstance(e.get("entry_hash"), str)
        else:  # the predecessor's hash is spelled out only when the predecessor is not an entry here
            well_formed = set(e) == (_V3_ENTRY_KEYS if follows else _V3_ENTRY_KEYS | {"prev_hash"}) and all(
                isinstance(e[k], str) for k in ("at", "event", "actor")
            )
            if follows:
                e = {**e, "prev_hash": digests[seq - 1]}
        if (
            not well_formed
            or not isinstance(e.get("prev_hash"), str)
            or not _HEX64.fullmatch(e["prev_hash"])
            or not isinstance(e.get("fields"), dict)
        ):
            fail(AuditLogError, f"entry {seq} is malformed")
        digest = _entry_hash(e, seq)
        if v2:
            if e["entry_hash"] != digest:
                fail(AuditLogError, f"entry {seq} hash does not recompute")
            path = _hashes(e.get("inclusion"), f"entry {seq}'s inclusion proof")
            if not verify_inclusion(merkle_leaf(bytes.fromhex(digest)), seq - 1, after.seq, path, after.root):
                fail(
                    AuditLogError, f"entry {seq}'s inclusion proof does not verify against the after checkpoint's root"
                )
        if seq == 1 and e["prev_hash"] != GENESIS:
            fail(AuditLogError, "the first entry does not link to the genesis hash")
        if v2 and follows and e["prev_hash"] != digests[seq - 1]:
            fail(AuditLogError, f"broken chain link at seq {seq}")
        for which, cp in (("before", before), ("after", after)):
            if seq == cp.seq and digest != cp.head:
                fail(AuditLogError, f"the {which} checkpoint's head is not the hash of entry {seq}")
        by_seq[seq], digests[seq], last = e, digest, seq
    if not v2:
        leaves = {seq - 1: merkle_leaf(bytes.fromhex(d)) for seq, d in digests.items()}
        if not verify_multiproof(leaves, after.seq, _hashes(doc.get("multiproof"), "the multiproof"), after.root):
            fail(AuditLogError, "the entries' multiproof does not verify against the after checkpoint's root")
    return by_seq


def check_audit_log(data: bytes, pinned: Ed25519PublicKey | None = None) -> AuditSummary:
    """Check 7: the audit-log redaction evidence (see the module docstring). The checkpoint key is
    the one the document names, covered by the engine's signature; `pinned` (the store's checkpoint
    key, known to the verifier) must then be that key."""
    doc = json_object(parse_json(data, AUDIT, AuditLogError), AUDIT, AuditLogError)
    fmt = doc.get("format")
    if fmt == AUDIT_NONE_FORMAT:
        if (
            set(doc) != {"format", "reason", "request_id"}
            or not isinstance(doc.get("request_id"), str)
            or not isinstance(doc.get("reason"), str)
        ):
            fail(AuditLogError, f"a {AUDIT_NONE_FORMAT} document holds exactly format, reason and request_id")
        return AuditSummary(no_audit_log_for=doc["request_id"])
    if fmt == AUDIT_V1_FORMAT:
        fail(
            AuditLogError,
            f"{AUDIT_V1_FORMAT} is no longer accepted: it carries a hash-chain segment that"
            f" grows with the log; packs carry {AUDIT_FORMAT} (Merkle inclusion and"
            " consistency proofs)",
        )
    if fmt not in (AUDIT_FORMAT, AUDIT_V2_FORMAT):
        fail(AuditLogError, f"format is not {AUDIT_FORMAT} (nor {AUDIT_V2_FORMAT})")
    v2 = fmt == AUDIT_V2_FORMAT
    key = _audit_key(doc)
    if pinned is not None and keyid_of(pinned) != keyid_of(key):
        fail(AuditLogError, "the checkpoints are signed by another key than the audit key given")
    before, after = _audit_checkpoint(doc, "before", key), _audit_checkpoint(doc, "after", key)
    if before.seq > after.seq:
        fail(AuditLogError, "the before checkpoint is later than the after checkpoint")
    if not verify_consistency(
        before.seq, after.seq, before.root, after.root, _hashes(doc.get("consistency"), "the consistency proof")
    ):
        fail(
            AuditLogError,
            "the consistency proof does not verify: the after checkpoint's tree does not"
            " extend the before checkpoint's",
        )
    entries = _audit_entries(doc, before, after, v2)
    items = doc.get("redacted")
    if not isinstance(items, list):
        fail(AuditLogError, "redacted is not a list")
    holding: set[int] = set()
    last: tuple[int, str] | None = None
    for item in items:
        seq, fname, commit = _redacted_item(item, v2)
        if last is not None and (seq, fname) <= last:
            fail(AuditLogError, "the redacted items are not sorted by seq and field, or repeat")
        last = (seq, fname)
        if seq not in entries:
            fail(AuditLogError, f"redacted entry {seq} is not among the entries")
        held = entries[seq]["fields"].get(fname)
        if not v2 and isinstance(held, dict):  # v3 names the field; the commitment is the entry's
            commit = held.get("commit")
        if not (isinstance(commit, str) and _HEX64.fullmatch(commit) and held == {"commit": commit}):
            fail(AuditLogError, f"entry {seq}: a redacted field does not hold its commitment")
        holding.add(seq)
    redactions = [
        e for seq, e in entries.items() if e.get("event") == AUDIT_REDACTION_EVENT and before.seq < seq <= after.seq
    ]
    for seq, e in entries.items():
        if seq not in holding and not any(e is r for r in redactions):
            fail(
                AuditLogError,
                f"entry {seq} holds no redacted commitment and is not the request's"
                f" {AUDIT_REDACTION_EVENT} entry: the evidence carries only those",
            )
    if len(redactions) > 1:
        fail(AuditLogError, f"more than one {AUDIT_REDACTION_EVENT} entry between the checkpoints")
    if doc.get("vault_remaining_for_subject") != 0:
        fail(AuditLogError, "the audit vault still holds values of the subject")
    if redactions:
        said = redactions[0]["fields"].get("redacted")
        if not is_int(said) or said != len(items):
            fail(
                AuditLogError,
                f"the evidence lists {len(items)} redacted item(s), but the log's own"
                f" {AUDIT_REDACTION_EVENT} entry says {printable(str(said))}: an entry is hidden"
                " or added",
            )
    rid = redactions[0]["fields"].get("request_id") if redactions else None
    return AuditSummary(
        redaction_request=rid if isinstance(rid, str) else None,
        checkpoint_times=(doc["before"]["at"], doc["after"]["at"]),
    )
