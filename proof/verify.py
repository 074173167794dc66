"""Offline verifier of an erasure proof pack: the Python standard library and `cryptography` only.

    python -m proof.verify proof.tar.gz --engine-key engine.pub.pem --dpo-key dpo.pub.pem [--json]

This file also runs on its own (`python verify.py ...`): it imports nothing else of this project.
Trusted public keys come from the command line, never from the pack. The checks, in order; the
first that fails raises its error, a `PackError` subclass whose `check` names it:

 1 archive        ArchiveError      Safe extraction, in memory: a gzipped tar of regular files and
                                    directories only (no symlinks, hard links, devices, fifos), no
                                    absolute path, no `..`, one top directory named after the
                                    request, at most 256 entries, 1 GiB per file, 2 GiB in all.
                                    Then the files are exactly those manifest.json lists, plus
                                    manifest.json, SHA256SUMS, signatures/engine.intoto.json and
                                    signatures/dpo.intoto.json (the last one optional only when the
                                    DPO's attestation is not required).
 2 signature      SignatureError    Each DSSE envelope has a signature whose keyid is the sha256 of
                                    the GIVEN key's SubjectPublicKeyInfo DER and which verifies
                                    over PAE(payloadType, payload) with that key.
 3 statement      StatementError    payloadType is application/vnd.in-toto+json; the payload is an
                                    in-toto Statement v1 with our predicateType (erasure proof for
                                    the engine, DPO attestation for the DPO); the predicates are
                                    well formed and name the given keys.
 4 subjects       SubjectError      Every subject digest matches its file and every file is a
                                    subject (engine: all but signatures/*; DPO: those plus the
                                    engine's envelope).
 5 checksums      ChecksumError     manifest.json (sizes, sha256, engine keyid) and SHA256SUMS agree
                                    with the files and with each other.
 6 distinct-keys  SameKeyError      The engine key and the DPO key differ.
 7 audit-log      AuditLogError     audit-log-redaction.json: checkpoint signatures (by the audit
                                    key given with --audit-key, else the key the document names),
                                    chain links, recomputed entry hashes, before/after heads,
                                    redacted fields hold commitments, nothing left in the vault.
 8 consistency    ConsistencyError  One request id throughout; the predicate repeats the records;
                                    all_clear, every tier's status and the overall status follow
                                    from the step records and the probes (rules below).

Check 8 rules. Tier status, from the tier's LAST step record and its probes' summed residue:
no record -> notErased; step status exception|erasedWithExceptions -> erasedWithExceptions;
skipped with after_count 0|null and residue 0 -> skipped; erased with after_count 0 and residue 0
-> erased; else notErased. Overall: no probe, a tier notErased, or residue in a probe not of an
erasedWithExceptions tier -> notErased; else an erasedWithExceptions tier or any exception ->
erasedWithExceptions; else erased if all_clear, notErased if not. all_clear true requires at least
one probe, every probe residue 0, every step after_count 0 (null for a skipped one) unless its
status is an exception status. A verification.json without `exceptions` has none.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import gzip
import hashlib
import io
import json
import re
import sys
import tarfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
ERASURE_PREDICATE = "https://erasure-cascade.dev/erasure-proof/v1"
DPO_PREDICATE = "https://erasure-cascade.dev/dpo-attestation/v1"
ENGINE_ENVELOPE = "signatures/engine.intoto.json"
DPO_ENVELOPE = "signatures/dpo.intoto.json"
MANIFEST, SUMS = "manifest.json", "SHA256SUMS"
EVIDENCE = ("request.json", "steps.jsonl", "verification.json", "subprocessor-receipts.jsonl",
            "audit-log-redaction.json", "attestation.txt")
TIERS = ("working", "episodic", "semantic", "vectors", "fine_tune", "uploads", "derivatives",
         "subprocessors", "audit_log")
STATUSES = ("erased", "erasedWithExceptions", "notErased")
EXCEPTION_STEP = ("exception", "erasedWithExceptions")
AUDIT_FORMAT, CHECKPOINT_TYPE, GENESIS = "audit-log-redaction/v1", "audit-checkpoint/v1", "0" * 64

MAX_ENTRIES = 256
# The audit-log redaction evidence carries the hash-chain segment from the subject's first entry to the
# head (about 530 bytes an entry): about 100 MB for a 1M-frame store. The limits leave room for ten
# times that; inclusion proofs over a Merkle tree of the log would make it O(log n) instead.
MAX_FILE_BYTES = 1024 * 1024 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024

_HEX64 = re.compile(r"[0-9a-f]{64}")
_SUMS_LINE = re.compile(r"([0-9a-f]{64})  ([^\n]+)")

PublicKey = ec.EllipticCurvePublicKey | Ed25519PublicKey


# --- errors --------------------------------------------------------------------------------------

class PackError(Exception):
    """The pack failed a check. `check` names it; `str(err)` says why, in one line."""

    check = "pack"


class KeyArgumentError(PackError):
    """A public key given to the verifier is unusable."""

    check = "keys"


class ArchiveError(PackError):
    """Check 1: unsafe or malformed archive, or files missing or extra against the manifest."""

    check = "archive"


class SignatureError(PackError):
    """Check 2: no valid signature by the given key."""

    check = "signature"


class StatementError(PackError):
    """Check 3: wrong payload type, statement type, predicate type or predicate shape."""

    check = "statement"


class SubjectError(PackError):
    """Check 4: a file does not match the signed digests, or is not covered by them."""

    check = "subjects"


class ChecksumError(PackError):
    """Check 5: manifest.json, SHA256SUMS and the files disagree."""

    check = "checksums"


class SameKeyError(PackError):
    """Check 6: the engine and the DPO used the same key."""

    check = "distinct-keys"


class AuditLogError(PackError):
    """Check 7: the audit-log redaction evidence does not hold."""

    check = "audit-log"


class ConsistencyError(PackError):
    """Check 8: the claims contradict the step records or the probes."""

    check = "consistency"


@dataclass(frozen=True)
class VerifyResult:
    """What a pack that passed every check says. `dpo_keyid` is None when no DPO key was checked."""

    request_id: str
    status: str
    all_clear: bool
    engine_keyid: str
    dpo_keyid: str | None
    files: int
    checks: tuple[str, ...]
    signatures_verified: bool = True

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        d = asdict(self)
        d["checks"] = list(self.checks)
        return d


# --- small helpers -------------------------------------------------------------------------------

def sha256_hex(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def canonical_json(obj: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8 (what checkpoints and entry hashes are computed over)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 " + str(len(t)).encode() + b" " + t + b" " + str(len(body)).encode() + b" " + body


def keyid_of(key: PublicKey) -> str:
    """sha256 hex of the key's SubjectPublicKeyInfo DER."""
    return sha256_hex(key.public_bytes(serialization.Encoding.DER,
                                       serialization.PublicFormat.SubjectPublicKeyInfo))


def load_public_key(pem: bytes, role: str) -> PublicKey:
    """A trusted public key from PEM: ECDSA P-256 or Ed25519, else `KeyArgumentError`."""
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError as exc:
        raise KeyArgumentError(f"the {role} key is not a PEM public key") from exc
    if isinstance(key, Ed25519PublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise KeyArgumentError(f"the {role} key is neither ECDSA P-256 nor Ed25519")


def _fail(cls: type[PackError], why: str) -> NoReturn:
    raise cls(why)


def _json(data: bytes, name: str, cls: type[PackError]) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        _fail(cls, f"{name} is not valid UTF-8 JSON")


def _jsonl(data: bytes, name: str, cls: type[PackError]) -> list[Any]:
    try:
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    except (UnicodeDecodeError, ValueError):
        _fail(cls, f"{name} is not valid JSON Lines")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _count(v: Any, what: str, cls: type[PackError], *, nullable: bool = False) -> int | None:
    if v is None and nullable:
        return None
    if not _is_int(v) or v < 0:
        _fail(cls, f"{what} is not a non-negative integer")
    return int(v)


def _obj(v: Any, what: str, cls: type[PackError]) -> dict[str, Any]:
    if not isinstance(v, dict):
        _fail(cls, f"{what} is not a JSON object")
    return v


# --- 1 archive -----------------------------------------------------------------------------------

def _member_name(member: tarfile.TarInfo) -> str:
    name = member.name
    if not name or "\x00" in name or "\\" in name:
        _fail(ArchiveError, "an entry has an empty or malformed name")
    if name.startswith("/"):
        _fail(ArchiveError, f"absolute path in archive: {name!r}")
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        _fail(ArchiveError, f"path with '..' in archive: {name!r}")
    if any(p in ("", ".") for p in parts):
        _fail(ArchiveError, f"non-normal path in archive: {name!r}")
    return "/".join(parts)


def _member_kind(member: tarfile.TarInfo, name: str) -> str:
    if member.issym():
        _fail(ArchiveError, f"symlink in archive: {name!r}")
    if member.islnk():
        _fail(ArchiveError, f"hard link in archive: {name!r}")
    if member.isdir():
        return "dir"
    if member.isreg() and not member.issparse():
        return "file"
    _fail(ArchiveError, f"device, fifo or other special entry in archive: {name!r}")


class _Capped(io.RawIOBase):
    """A reader that stops a decompression bomb: at most `cap` bytes, headers included."""

    def __init__(self, inner: gzip.GzipFile, cap: int) -> None:
        self._inner, self._left = inner, cap

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        chunk = self._inner.read(size if size >= 0 else self._left + 1)
        self._left -= len(chunk)
        if self._left < 0:
            _fail(ArchiveError, f"the archive unpacks to more than {MAX_TOTAL_BYTES} bytes")
        return chunk


def extract(data: bytes) -> tuple[str, dict[str, bytes]]:
    """Check 1, safety part: read the pack in memory; return (top directory, {relative path: bytes})."""
    if len(data) > MAX_TOTAL_BYTES:
        _fail(ArchiveError, f"the pack is larger than {MAX_TOTAL_BYTES} bytes")
    top: str | None = None
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    seen: set[str] = set()
    total = count = 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as gz, \
                tarfile.open(fileobj=_Capped(gz, MAX_TOTAL_BYTES + 1024 * (MAX_ENTRIES + 2)), mode="r|") as tar:
            for member in tar:
                count += 1
                if count > MAX_ENTRIES:
                    _fail(ArchiveError, f"more than {MAX_ENTRIES} entries")
                name = _member_name(member)
                kind = _member_kind(member, name)
                head, _, rel = name.partition("/")
                if top is None:
                    top = head
                elif head != top:
                    _fail(ArchiveError, f"more than one top-level directory ({top!r}, {head!r})")
                if name in seen:
                    _fail(ArchiveError, f"duplicate entry in archive: {name!r}")
                seen.add(name)
                if kind == "dir":
                    dirs.add(name)
                    continue
                if not rel:
                    _fail(ArchiveError, f"file outside the top directory: {name!r}")
                if member.size > MAX_FILE_BYTES:
                    _fail(ArchiveError, f"{rel} is larger than {MAX_FILE_BYTES} bytes")
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    _fail(ArchiveError, f"the files exceed {MAX_TOTAL_BYTES} bytes in all")
                fh = tar.extractfile(member)
                body = fh.read() if fh is not None else b""
                if len(body) != member.size:
                    _fail(ArchiveError, f"{rel} is truncated")
                files[rel] = body
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise ArchiveError(f"not a readable tar.gz: {type(exc).__name__}") from exc
    if top is None or not files:
        _fail(ArchiveError, "the archive holds no files")
    parents = {f"{top}/{'/'.join(rel.split('/')[:i])}" for rel in files for i in range(1, rel.count("/") + 1)}
    stray = sorted(dirs - parents - {top})
    if stray:
        _fail(ArchiveError, f"unexpected directory in archive: {stray[0]!r}")
    return top, files


def _manifest_paths(manifest: Any) -> list[str]:
    entries = _obj(manifest, MANIFEST, ArchiveError).get("files")
    if not isinstance(entries, list):
        _fail(ArchiveError, "manifest.json has no file list")
    paths: list[str] = []
    for e in entries:
        path = e.get("path") if isinstance(e, dict) else None
        if not isinstance(path, str) or not path:
            _fail(ArchiveError, "manifest.json lists an entry without a path")
        if path in (MANIFEST, SUMS) or path.startswith("signatures/") or path.startswith("/") \
                or ".." in path.split("/"):
            _fail(ArchiveError, f"manifest.json lists a path it may not list: {path!r}")
        paths.append(path)
    if len(set(paths)) != len(paths):
        _fail(ArchiveError, "manifest.json lists a path twice")
    return paths


def check_file_set(top: str, files: Mapping[str, bytes], *, require_dpo: bool) -> dict[str, Any]:
    """Check 1, completeness part: the files are exactly what the manifest says. Returns the manifest."""
    if MANIFEST not in files:
        _fail(ArchiveError, "missing file manifest.json")
    manifest = _json(files[MANIFEST], MANIFEST, ArchiveError)
    listed = _manifest_paths(manifest)
    absent = [p for p in EVIDENCE if p not in listed]
    if absent:
        _fail(ArchiveError, f"manifest.json does not list {absent[0]}")
    expected = {*listed, MANIFEST, SUMS, ENGINE_ENVELOPE} | ({DPO_ENVELOPE} if require_dpo else set())
    allowed = expected | {DPO_ENVELOPE}
    missing, extra = sorted(expected - files.keys()), sorted(files.keys() - allowed)
    if missing:
        _fail(ArchiveError, f"missing file {missing[0]}" + (f" (and {len(missing) - 1} more)" if missing[1:] else ""))
    if extra:
        _fail(ArchiveError, f"unexpected file {extra[0]}" + (f" (and {len(extra) - 1} more)" if extra[1:] else ""))
    if manifest.get("request_id") != top:
        _fail(ArchiveError, "the top directory is not named after the manifest's request id")
    return dict(manifest)


# --- 2 signature ---------------------------------------------------------------------------------

def _envelope(data: bytes, name: str) -> tuple[dict[str, Any], bytes]:
    env = _obj(_json(data, name, SignatureError), name, SignatureError)
    if not isinstance(env.get("payloadType"), str) or not isinstance(env.get("payload"), str) \
            or not isinstance(env.get("signatures"), list):
        _fail(SignatureError, f"{name} is not a DSSE envelope")
    try:
        payload = base64.b64decode(env["payload"], validate=True)
    except (binascii.Error, ValueError):
        _fail(SignatureError, f"{name}: payload is not base64")
    return env, payload


def _verify_sig(key: PublicKey, sig: bytes, message: bytes) -> bool:
    try:
        if isinstance(key, Ed25519PublicKey):
            key.verify(sig, message)
        else:
            key.verify(sig, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def check_signature(data: bytes, name: str, key: PublicKey, role: str) -> tuple[str, bytes]:
    """Check 2 for one envelope: returns (payloadType, payload) once a signature by `key` verifies."""
    env, payload = _envelope(data, name)
    kid = keyid_of(key)
    mine = [s for s in env["signatures"] if isinstance(s, dict) and s.get("keyid") == kid]
    if not mine:
        _fail(SignatureError, f"{name} has no signature by the given {role} key (keyid {kid[:16]}...)")
    message = pae(env["payloadType"], payload)
    for s in mine:
        try:
            sig = base64.b64decode(str(s.get("sig", "")), validate=True)
        except (binascii.Error, ValueError):
            continue
        if _verify_sig(key, sig, message):
            return env["payloadType"], payload
    _fail(SignatureError, f"{name}: the {role} signature does not verify")


def unverified_payload(data: bytes, name: str) -> tuple[str, bytes, str | None]:
    """(payloadType, payload, first keyid) of an envelope WITHOUT checking its signature."""
    env, payload = _envelope(data, name)
    sigs = [s for s in env["signatures"] if isinstance(s, dict)]
    kid = sigs[0].get("keyid") if sigs else None
    return env["payloadType"], payload, kid if isinstance(kid, str) else None


# --- 3 statement ---------------------------------------------------------------------------------

_ENGINE_FIELDS: dict[str, Callable[[Any], bool]] = {
    "request_id": lambda v: isinstance(v, str), "legal_basis": lambda v: isinstance(v, str),
    "received_at": lambda v: isinstance(v, str), "verified_at": lambda v: isinstance(v, str),
    "all_clear": lambda v: isinstance(v, bool), "status": lambda v: v in STATUSES,
    "tiers": lambda v: isinstance(v, dict), "exceptions": lambda v: isinstance(v, list),
    "out_of_scope": lambda v: isinstance(v, list), "engine_keyid": lambda v: isinstance(v, str),
}
_DPO_FIELDS: dict[str, Callable[[Any], bool]] = {
    "request_id": lambda v: isinstance(v, str), "attested_at": lambda v: isinstance(v, str),
    "dpo_keyid": lambda v: isinstance(v, str), "statement": lambda v: isinstance(v, str) and bool(v),
    "engine_keyid": lambda v: isinstance(v, str),
}


def check_statement(payload_type: str, payload: bytes, name: str, predicate_type: str,
                    fields: Mapping[str, Callable[[Any], bool]]) -> dict[str, Any]:
    """Check 3 for one envelope: returns the Statement."""
    if payload_type != PAYLOAD_TYPE:
        _fail(StatementError, f"{name}: payloadType is not {PAYLOAD_TYPE}")
    st = _obj(_json(payload, f"{name} payload", StatementError), f"{name} payload", StatementError)
    if st.get("_type") != STATEMENT_TYPE:
        _fail(StatementError, f"{name}: _type is not {STATEMENT_TYPE}")
    if st.get("predicateType") != predicate_type:
        _fail(StatementError, f"{name}: predicateType is not {predicate_type}")
    if not isinstance(st.get("subject"), list):
        _fail(StatementError, f"{name}: no subject list")
    pred = _obj(st.get("predicate"), f"{name} predicate", StatementError)
    for field, ok in fields.items():
        if field not in pred or not ok(pred[field]):
            _fail(StatementError, f"{name}: predicate field {field!r} is missing or malformed")
    return st


# --- 4 subjects ----------------------------------------------------------------------------------

def check_subjects(statement: Mapping[str, Any], files: Mapping[str, bytes], covered: set[str],
                   name: str) -> None:
    """Check 4: the subjects are exactly `covered`, each with the sha256 of its file."""
    seen: set[str] = set()
    for s in statement["subject"]:
        path = s.get("name") if isinstance(s, dict) else None
        digest = s.get("digest") if isinstance(s, dict) else None
        want = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(path, str) or not isinstance(want, str):
            _fail(SubjectError, f"{name}: a subject has no name or sha256 digest")
        if path in seen:
            _fail(SubjectError, f"{name}: subject {path} is listed twice")
        seen.add(path)
        if path not in covered:
            _fail(SubjectError, f"{name}: subject {path} is not a file it may cover")
        if sha256_hex(files[path]) != want:
            _fail(SubjectError, f"{path} does not match its digest in {name}")
    missing = sorted(covered - seen)
    if missing:
        _fail(SubjectError, f"{missing[0]} is not a subject of {name}")


# --- 5 checksums ---------------------------------------------------------------------------------

def check_checksums(manifest: Mapping[str, Any], files: Mapping[str, bytes], engine_keyid: str) -> None:
    """Check 5: manifest entries and SHA256SUMS lines match the files and each other."""
    listed: set[str] = set()
    for e in manifest["files"]:
        path = e["path"]
        listed.add(path)
        if e.get("size") != len(files[path]):
            _fail(ChecksumError, f"manifest.json gives the wrong size for {path}")
        if e.get("sha256") != sha256_hex(files[path]):
            _fail(ChecksumError, f"manifest.json gives the wrong sha256 for {path}")
        if not isinstance(e.get("role"), str):
            _fail(ChecksumError, f"manifest.json gives no role for {path}")
    if manifest.get("engine_keyid") != engine_keyid:
        _fail(ChecksumError, "manifest.json names another engine key")
    try:
        lines = files[SUMS].decode("ascii").splitlines()
    except UnicodeDecodeError:
        _fail(ChecksumError, "SHA256SUMS is not ASCII")
    summed: dict[str, str] = {}
    for line in lines:
        m = _SUMS_LINE.fullmatch(line)
        if m is None:
            _fail(ChecksumError, "SHA256SUMS has a line not in `sha256sum` format")
        digest, path = m.group(1), m.group(2)
        if path in summed:
            _fail(ChecksumError, f"SHA256SUMS lists {path} twice")
        summed[path] = digest
    if set(summed) != listed | {MANIFEST}:
        odd = sorted(set(summed) ^ (listed | {MANIFEST}))
        _fail(ChecksumError, f"SHA256SUMS and manifest.json disagree on the file list ({odd[0]})")
    for path, digest in summed.items():
        if sha256_hex(files[path]) != digest:
            _fail(ChecksumError, f"SHA256SUMS gives the wrong sha256 for {path}")


# --- 7 audit log ---------------------------------------------------------------------------------

def _checkpoint_ok(key: Ed25519PublicKey, cp: Mapping[str, Any]) -> bool:
    statement = canonical_json({"type": CHECKPOINT_TYPE, "seq": cp["seq"], "head_hash": cp["head_hash"],
                                "at": cp["at"]})
    try:
        key.verify(base64.b64decode(str(cp["signature"]), validate=True), statement)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def _audit_key(doc: Mapping[str, Any]) -> Ed25519PublicKey:
    ck = _obj(doc.get("checkpoint_key"), "checkpoint_key", AuditLogError)
    if ck.get("algorithm") != "ed25519":
        _fail(AuditLogError, "the checkpoint key is not declared ed25519")
    try:
        key = serialization.load_pem_public_key(str(ck.get("public_key_pem", "")).encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        _fail(AuditLogError, "the checkpoint key is not a PEM public key")
    if not isinstance(key, Ed25519PublicKey):
        _fail(AuditLogError, "the checkpoint key is not an Ed25519 key")
    if ck.get("key_id") != keyid_of(key):
        _fail(AuditLogError, "the checkpoint key_id is not the sha256 of the key's DER")
    return key


def _audit_entries(entries: Any) -> dict[int, dict[str, Any]]:
    """Recompute every entry hash and link; returns entries by seq."""
    if not isinstance(entries, list):
        _fail(AuditLogError, "entries is not a list")
    by_seq: dict[int, dict[str, Any]] = {}
    prev: dict[str, Any] | None = None
    for i, raw in enumerate(entries):
        e = _obj(raw, f"entries[{i}]", AuditLogError)
        seq = _count(e.get("seq"), f"entries[{i}].seq", AuditLogError)
        assert seq is not None
        if not isinstance(e.get("prev_hash"), str) or not isinstance(e.get("fields"), dict):
            _fail(AuditLogError, f"entry {seq} is malformed")
        if prev is not None and seq != prev["seq"] + 1:
            _fail(AuditLogError, f"entries are not consecutive at seq {seq}")
        if prev is not None and e["prev_hash"] != prev["entry_hash"]:
            _fail(AuditLogError, f"broken chain link at seq {seq}")
        if prev is None and seq == 1 and e["prev_hash"] != GENESIS:
            _fail(AuditLogError, "the first entry does not link to the genesis hash")
        body = {k: e.get(k) for k in ("seq", "at", "event", "actor", "fields")}
        recomputed = sha256_hex(e["prev_hash"].encode("ascii", "replace") + b"\n" + canonical_json(body))
        if e.get("entry_hash") != recomputed:
            _fail(AuditLogError, f"entry {seq} hash does not recompute")
        by_seq[seq] = e
        prev = e
    return by_seq


def check_audit_log(data: bytes, pinned: Ed25519PublicKey | None = None) -> None:
    """Check 7: the audit-log redaction evidence (see the module docstring). The checkpoint key is
    the one the document names, covered by the engine's signature; `pinned` (the store's checkpoint
    key, known to the verifier) must then be that key."""
    doc = _obj(_json(data, "audit-log-redaction.json", AuditLogError), "audit-log-redaction.json",
               AuditLogError)
    if doc.get("format") != AUDIT_FORMAT:
        _fail(AuditLogError, f"format is not {AUDIT_FORMAT}")
    key = _audit_key(doc)
    if pinned is not None and keyid_of(pinned) != keyid_of(key):
        _fail(AuditLogError, "the checkpoints are signed by another key than the audit key given")
    cps: dict[str, dict[str, Any]] = {}
    for which in ("before", "after"):
        cp = _obj(doc.get(which), f"{which} checkpoint", AuditLogError)
        _count(cp.get("seq"), f"{which}.seq", AuditLogError)
        if not isinstance(cp.get("head_hash"), str) or not _HEX64.fullmatch(cp["head_hash"]) \
                or not isinstance(cp.get("at"), str):
            _fail(AuditLogError, f"the {which} checkpoint is malformed")
        if not _checkpoint_ok(key, cp):
            _fail(AuditLogError, f"the {which} checkpoint signature does not verify")
        cps[which] = cp
    before, after = cps["before"], cps["after"]
    if before["seq"] > after["seq"]:
        _fail(AuditLogError, "the before checkpoint is later than the after checkpoint")
    by_seq = _audit_entries(doc.get("entries"))
    if after["seq"] > 0 and (not by_seq or max(by_seq) != after["seq"]):
        _fail(AuditLogError, "the entries do not end at the after checkpoint")
    first = min(by_seq) if by_seq else after["seq"] + 1
    for which, cp in (("before", before), ("after", after)):
        seq = cp["seq"]
        if seq in by_seq:
            head = by_seq[seq]["entry_hash"]
        elif seq == 0:
            head = GENESIS
        elif seq == first - 1:
            head = by_seq[first]["prev_hash"]
        else:
            _fail(AuditLogError, f"the entries do not reach the {which} checkpoint")
        if head != cp["head_hash"]:
            _fail(AuditLogError, f"the {which} checkpoint's head is not the chain's hash at seq {seq}")
    redacted = doc.get("redacted")
    if not isinstance(redacted, list):
        _fail(AuditLogError, "redacted is not a list")
    for r in redacted:
        r = _obj(r, "a redacted item", AuditLogError)
        seq, field, commit = r.get("seq"), r.get("field"), r.get("commitment")
        if not isinstance(commit, str) or not _HEX64.fullmatch(commit):
            _fail(AuditLogError, "a redacted commitment is not 64 hex digits")
        if not _is_int(seq) or seq not in by_seq:
            _fail(AuditLogError, "a redacted entry is not among the entries")
        if not isinstance(field, str) or by_seq[seq]["fields"].get(field) != {"commit": commit}:
            _fail(AuditLogError, f"entry {seq}: a redacted field does not hold its commitment")
    if doc.get("vault_remaining_for_subject") != 0:
        _fail(AuditLogError, "the audit vault still holds values of the subject")


# --- 8 consistency -------------------------------------------------------------------------------

def _records(files: Mapping[str, bytes]) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    C = ConsistencyError
    request = _obj(_json(files["request.json"], "request.json", C), "request.json", C)
    steps = [_obj(s, "a step record", C) for s in _jsonl(files["steps.jsonl"], "steps.jsonl", C)]
    verification = _obj(_json(files["verification.json"], "verification.json", C), "verification.json", C)
    _jsonl(files["subprocessor-receipts.jsonl"], "subprocessor-receipts.jsonl", C)
    for s in steps:
        if s.get("step") not in TIERS:
            _fail(C, "a step record names no known tier")
        if not isinstance(s.get("status"), str):
            _fail(C, f"step {s['step']} has no status")
        _count(s.get("before_count"), f"step {s['step']} before_count", C, nullable=True)
        _count(s.get("after_count"), f"step {s['step']} after_count", C, nullable=True)
    probes = verification.get("probes")
    if not isinstance(probes, list) or not isinstance(verification.get("all_clear"), bool) \
            or not isinstance(verification.setdefault("exceptions", []), list):
        _fail(C, "verification.json lacks probes or all_clear, or its exceptions are not a list")
    for p in probes:
        p = _obj(p, "a probe", C)
        if not isinstance(p.get("tier"), str) or not isinstance(p.get("method"), str):
            _fail(C, "a probe has no tier or method")
        _count(p.get("residue"), f"probe {p['tier']}/{p['method']} residue", C)
    return request, steps, verification


def _expected_tiers(steps: Sequence[Mapping[str, Any]],
                    probes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    last = {s["step"]: s for s in steps}
    residue: dict[str, int] = {}
    for p in probes:
        residue[p["tier"]] = residue.get(p["tier"], 0) + p["residue"]
    table: dict[str, dict[str, Any]] = {}
    for tier in TIERS:
        rec, res = last.get(tier), residue.get(tier, 0)
        if rec is None:
            status = "notErased"
        elif rec["status"] in EXCEPTION_STEP:
            status = "erasedWithExceptions"
        elif rec["status"] == "skipped" and rec.get("after_count") in (0, None) and res == 0:
            status = "skipped"
        elif rec["status"] == "erased" and rec.get("after_count") == 0 and res == 0:
            status = "erased"
        else:
            status = "notErased"
        table[tier] = {"status": status, "before": None if rec is None else rec.get("before_count"),
                       "after": None if rec is None else rec.get("after_count"), "residue": res}
    return table


def _expected_status(tiers: Mapping[str, Mapping[str, Any]], probes: Sequence[Mapping[str, Any]],
                     all_clear: bool, exceptions: Sequence[Any]) -> str:
    excepted = {t for t, row in tiers.items() if row["status"] == "erasedWithExceptions"}
    if not probes or any(row["status"] == "notErased" for row in tiers.values()) \
            or any(p["residue"] > 0 and p["tier"] not in excepted for p in probes):
        return "notErased"
    if excepted or exceptions:
        return "erasedWithExceptions"
    return "erased" if all_clear else "notErased"


def check_consistency(files: Mapping[str, bytes], manifest: Mapping[str, Any], predicate: Mapping[str, Any],
                      dpo_predicate: Mapping[str, Any] | None) -> None:
    """Check 8 (see the module docstring)."""
    C = ConsistencyError
    request, steps, verification = _records(files)
    rid = predicate["request_id"]
    ids = [("manifest.json", manifest.get("request_id")), ("request.json", request.get("request_id")),
           ("verification.json", verification.get("request_id"))]
    ids += [("steps.jsonl", s.get("request_id")) for s in steps]
    ids += [("the DPO attestation", dpo_predicate["request_id"])] if dpo_predicate is not None else []
    for where, other in ids:
        if other != rid:
            _fail(C, f"{where} names another request than the signed statement")
    for field, source, key in (("legal_basis", request, "legal_basis"), ("received_at", request, "received_at"),
                               ("verified_at", verification, "verified_at"),
                               ("all_clear", verification, "all_clear"),
                               ("exceptions", verification, "exceptions")):
        if predicate[field] != source.get(key):
            _fail(C, f"the statement's {field} differs from the records")
    probes = verification["probes"]
    all_clear = predicate["all_clear"]
    if all_clear:
        if not probes:
            _fail(C, "all_clear is true but no probe ran")
        for p in probes:
            if p["residue"] != 0:
                _fail(C, f"all_clear is true but probe {p['tier']}/{p['method']} found residue {p['residue']}")
        for tier, s in {s["step"]: s for s in steps}.items():
            after = s.get("after_count")
            if not (after == 0 or s["status"] in EXCEPTION_STEP or (s["status"] == "skipped" and after is None)):
                _fail(C, f"all_clear is true but step {tier} ends with after_count {after}")
    tiers = _expected_tiers(steps, probes)
    claimed = predicate["tiers"]
    if set(claimed) != set(TIERS):
        _fail(C, "the statement does not list exactly the nine tiers")
    for tier in TIERS:
        row = claimed[tier]
        if row != tiers[tier]:
            said = row.get("status") if isinstance(row, dict) else row
            _fail(C, f"tier {tier}: the statement says {said!r} where the records give"
                     f" {tiers[tier]['status']!r} (or other counts)")
    status = _expected_status(tiers, probes, all_clear, verification["exceptions"])
    if predicate["status"] != status:
        _fail(C, f"the statement says {predicate['status']}, the records give {status}")
    if manifest.get("status") != status or manifest.get("all_clear") != all_clear:
        _fail(C, "manifest.json states another status than the signed statement")


# --- the whole verification ----------------------------------------------------------------------

def _run(data: bytes, engine_key: PublicKey | None, dpo_key: PublicKey | None,
         require_dpo: bool, audit_key: Ed25519PublicKey | None = None) -> VerifyResult:
    checks: list[str] = []
    top, files = extract(data)
    manifest = check_file_set(top, files, require_dpo=require_dpo)
    checks.append(ArchiveError.check)
    has_dpo = DPO_ENVELOPE in files
    if engine_key is not None:
        e_type, e_payload = check_signature(files[ENGINE_ENVELOPE], ENGINE_ENVELOPE, engine_key, "engine")
        engine_keyid = keyid_of(engine_key)
    else:
        e_type, e_payload, claimed = unverified_payload(files[ENGINE_ENVELOPE], ENGINE_ENVELOPE)
        engine_keyid = claimed or ""
    d_payload: tuple[str, bytes] | None = None
    if has_dpo and dpo_key is not None:
        d_payload = check_signature(files[DPO_ENVELOPE], DPO_ENVELOPE, dpo_key, "DPO")
    elif require_dpo:
        _fail(KeyArgumentError, "no DPO key was given to check the DPO's attestation")
    if engine_key is not None:
        checks.append(SignatureError.check)
    statement = check_statement(e_type, e_payload, ENGINE_ENVELOPE, ERASURE_PREDICATE, _ENGINE_FIELDS)
    predicate = statement["predicate"]
    if predicate["engine_keyid"] != engine_keyid:
        _fail(StatementError, "the engine statement names another engine key")
    dpo_statement = dpo_predicate = None
    dpo_keyid = keyid_of(dpo_key) if dpo_key is not None and d_payload is not None else None
    if d_payload is not None:
        dpo_statement = check_statement(*d_payload, DPO_ENVELOPE, DPO_PREDICATE, _DPO_FIELDS)
        dpo_predicate = dpo_statement["predicate"]
        if dpo_predicate["dpo_keyid"] != dpo_keyid or dpo_predicate["engine_keyid"] != engine_keyid:
            _fail(StatementError, "the DPO statement names other keys than the ones given")
    checks.append(StatementError.check)
    covered = {p for p in files if not p.startswith("signatures/")}
    check_subjects(statement, files, covered, ENGINE_ENVELOPE)
    if dpo_statement is not None:
        check_subjects(dpo_statement, files, covered | {ENGINE_ENVELOPE}, DPO_ENVELOPE)
    checks.append(SubjectError.check)
    check_checksums(manifest, files, engine_keyid)
    checks.append(ChecksumError.check)
    if dpo_keyid is not None:
        if dpo_keyid == engine_keyid:
            _fail(SameKeyError, "the DPO attestation is signed with the engine's key")
        checks.append(SameKeyError.check)
    check_audit_log(files["audit-log-redaction.json"], audit_key)
    checks.append(AuditLogError.check)
    check_consistency(files, manifest, predicate, dpo_predicate)
    checks.append(ConsistencyError.check)
    return VerifyResult(request_id=predicate["request_id"], status=predicate["status"],
                        all_clear=predicate["all_clear"], engine_keyid=engine_keyid, dpo_keyid=dpo_keyid,
                        files=len(files), checks=tuple(checks), signatures_verified=engine_key is not None)


def read_pack(pack_path: str | Path) -> bytes:
    """The bytes of a pack file; `ArchiveError` if it cannot be read."""
    try:
        return Path(pack_path).read_bytes()
    except OSError as exc:
        raise ArchiveError(f"cannot read the pack: {exc.strerror}") from exc


def verify_bytes(data: bytes, engine_pub_pem: bytes, dpo_pub_pem: bytes | None, *,
                 require_dpo: bool = True, audit_pub_pem: bytes | None = None) -> VerifyResult:
    """`verify_pack` on the bytes of a pack."""
    engine_key = load_public_key(engine_pub_pem, "engine")
    dpo_key = load_public_key(dpo_pub_pem, "DPO") if dpo_pub_pem is not None else None
    audit_key = load_public_key(audit_pub_pem, "audit") if audit_pub_pem is not None else None
    if audit_key is not None and not isinstance(audit_key, Ed25519PublicKey):
        _fail(KeyArgumentError, "the audit key is not an Ed25519 key")
    if dpo_key is not None and keyid_of(dpo_key) == keyid_of(engine_key):
        _fail(SameKeyError, "the engine key and the DPO key given are the same key")
    return _run(data, engine_key, dpo_key, require_dpo, audit_key)


def verify_pack(pack_path: str | Path, engine_pub_pem: bytes, dpo_pub_pem: bytes | None, *,
                require_dpo: bool = True, audit_pub_pem: bytes | None = None) -> VerifyResult:
    """Run checks 1-8 on `proof.tar.gz` with the trusted keys given; raise the first `PackError`.
    With `require_dpo=False` a pack not yet attested passes on its engine signature alone;
    `audit_pub_pem` pins the store's audit checkpoint key (else the one in the pack is used)."""
    return verify_bytes(read_pack(pack_path), engine_pub_pem, dpo_pub_pem, require_dpo=require_dpo,
                        audit_pub_pem=audit_pub_pem)


def verify_contents(data: bytes) -> VerifyResult:
    """Every check that needs no key (1, 3, 4, 5, 7, 8) on the bytes of a pack: it is whole and
    consistent, but its origin is NOT established. For showing a pack; never a verdict."""
    return _run(data, None, None, False)


# --- command line --------------------------------------------------------------------------------

def _read_key(path: str, role: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise KeyArgumentError(f"cannot read the {role} key {path}: {exc.strerror}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m proof.verify PACK --engine-key PUB --dpo-key PUB [--json]`: prints OK or
    `FAIL: <check>: <why>`; exit 0 when the pack verifies, 1 when it does not, 2 on bad usage."""
    parser = argparse.ArgumentParser(prog="python -m proof.verify", description=__doc__.split("\n\n")[0])
    parser.add_argument("pack", help="the proof.tar.gz to verify")
    parser.add_argument("--engine-key", required=True, help="the engine's trusted public key (PEM)")
    parser.add_argument("--dpo-key", help="the DPO's trusted public key (PEM); required unless --no-dpo")
    parser.add_argument("--no-dpo", action="store_true",
                        help="accept a pack the DPO has not attested yet (its engine signature only)")
    parser.add_argument("--audit-key", help="the store's audit checkpoint public key (PEM), to pin it")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of one line")
    args = parser.parse_args(argv)
    if args.dpo_key is None and not args.no_dpo:
        parser.error("--dpo-key is required (or --no-dpo to check a pack awaiting attestation)")
    try:
        engine = _read_key(args.engine_key, "engine")
        dpo = _read_key(args.dpo_key, "DPO") if args.dpo_key else None
        audit = _read_key(args.audit_key, "audit") if args.audit_key else None
        result = verify_pack(args.pack, engine, dpo, require_dpo=not args.no_dpo, audit_pub_pem=audit)
    except PackError as exc:
        if args.json:
            print(json.dumps({"ok": False, "check": exc.check, "error": str(exc)}, sort_keys=True))
        else:
            print(f"FAIL: {exc.check}: {exc}")
        return 1
    if args.json:
        print(json.dumps({"ok": True, **result.as_dict()}, sort_keys=True))
    else:
        print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
