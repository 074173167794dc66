"""Offline verifier of an erasure proof pack: the Python standard library and `cryptography` only.

    python -m proof.verify proof.tar.gz --engine-key engine.pub.pem --dpo-key dpo.pub.pem \
        --audit-key audit.pub.pem [--json]

A pack's name is the sha256 of the engine's signed statement (`VerifyResult.pack_name`), never of
its container bytes.

This file also runs on its own (`python verify.py ...`): it imports nothing else of this project.
Trusted public keys come from the command line, never from the pack. Every input ends in one line,
`OK` (exit 0) or `FAIL: <check>: <why>` (exit 1; 2 for bad usage), never a traceback; every character
outside printable ASCII in it is written as a \\x, \\u or \\U escape, so nothing taken from a pack can
act on a terminal. The checks, in order; the first that fails raises its error, a `PackError` subclass
whose `check` names it (anything else a hostile input breaks inside a check ends as that check's
failure, "refused: the input broke this check (<error type>)"; the tests require a named reason for
every input they know):

 0 keys           KeyArgumentError  Each key file is read up to 64 KiB and holds an ECDSA P-256 or
                                    Ed25519 public key (PEM); any other key (RSA, SM2, secp112r1...)
                                    is refused.
 1 archive        ArchiveError      Read as a stream in steps of 64 KiB, every size checked before
                                    anything is allocated. The pack (at most 17 MiB) is exactly ONE
                                    gzip member: deflate, no optional header field (the writer sets
                                    none), mtime 0, XFL 0, OS 255, CRC-32 and length right, no byte
                                    after it. It unpacks to at
                                    most 16 MiB holding exactly ONE POSIX ustar stream: every
                                    header has a valid checksum, the ustar magic, zero-padded octal
                                    numbers, NUL-padded names, no link name; mode 0644 (files) or 0755
                                    (directories), uid/gid/mtime 0, no user or group name, no device
                                    numbers, type '0' or '5', the name split into prefix/name only as
                                    the writer splits it; entries are regular files
                                    and directories only (no pax or GNU header, link, device, fifo or
                                    sparse file); data padding is zero; the stream ends with two zero
                                    blocks and nothing but zero bytes follows them. At most 256
                                    entries; names relative and normal, parts of A-Z a-z 0-9 . _ -
                                    starting with a letter or digit, at most three parts
                                    (top/signatures/file), no duplicate; one top directory named like a
                                    request id. Sizes, from the header: every file at most 4 MiB,
                                    all of them 8 MiB together. Then
                                    the files are exactly those manifest.json lists, plus
                                    manifest.json, SHA256SUMS, signatures/engine.intoto.json and
                                    signatures/dpo.intoto.json (the last one optional only when the
                                    DPO's attestation is not required).
 2 signature      SignatureError    Each DSSE envelope is in the writer's canonical form (sorted keys,
                                    two-space indent, ASCII, one final newline: no signature covers
                                    the DPO's envelope, so its bytes may not vary), holds only
                                    payloadType, payload and ONE signature (keyid, sig), whose keyid
                                    is the sha256 of the GIVEN key's SubjectPublicKeyInfo DER and
                                    which verifies over PAE(payloadType, payload) with that key;
                                    payload and sig in canonical base64; an ECDSA sig in DER with
                                    s <= n/2 (low-s: (r, n - s) would be a second valid encoding).
 3 statement      StatementError    payloadType is application/vnd.in-toto+json; the payload is an
                                    in-toto Statement v1 with our predicateType (erasure proof for
                                    the engine, DPO attestation for the DPO); the predicates are
                                    well formed (the DPO's attested_at a UTC time
                                    YYYY-MM-DDTHH:MM:SS[.ffffff]Z) and name the given keys.
 4 subjects       SubjectError      Every subject digest matches its file and every file is a
                                    subject (engine: all but signatures/*; DPO: those plus the
                                    engine's envelope).
 5 checksums      ChecksumError     manifest.json (sizes, sha256, engine keyid) and SHA256SUMS agree
                                    with the files and with each other.
 6 distinct-keys  SameKeyError      The engine key and the DPO key differ.
 7 audit-log      AuditLogError     audit-log-redaction.json, format audit-log-redaction/v3 (or v2;
                                    v1, which carried the whole hash-chain segment, is refused and the
                                    line says so): the checkpoint key (--audit-key pins it; the command
                                    line requires it or --no-audit-key, else the key the document
                                    names, covered by the engine's signature, and the OK line says the
                                    key was NOT pinned); both
                                    checkpoints' Ed25519 signatures over {"type":
                                    "audit-checkpoint/v2", seq, head_hash, tree_size, root_hash, at}
                                    (canonical JSON), tree_size == seq, before <= after; the
                                    consistency proof from before.tree_size to after.tree_size
                                    verifies (RFC 9162 2.1.4.2; equal sizes: empty proof, equal
                                    roots; size 0: empty proof, the empty tree's root). Each entry
                                    (ascending seq, within the after tree) is seq, at, event, actor,
                                    fields and prev_hash, the last only where entry seq-1 is not one
                                    of them (then it is that entry's hash); its hash is recomputed
                                    from prev_hash and its body; one multiproof puts them all in the
                                    after tree: leaf seq-1 = sha256(0x00 || entry hash bytes), node =
                                    sha256(0x01 || l || r), and the proof is the root of every
                                    maximal subtree of the RFC 9162 2.1.1 split that holds no entry,
                                    left to right, each used once, giving after.root_hash. Checkpoint
                                    heads agree with the entries. Each redacted (seq, field), sorted
                                    and unique, names an included entry's field holding exactly
                                    {"commit": 64 hex}; every other included entry is the one
                                    erasure.audit_redaction entry with before.tree_size < seq <=
                                    after.tree_size (check 8 binds its request id), whose
                                    fields.redacted equals the number of redacted items; nothing left
                                    in the vault. (v2: every entry also carries entry_hash, prev_hash
                                    and its own RFC 9162 2.1.3.2 inclusion path, and each redacted
                                    item the commitment.) A home whose targets hold no reference
                                    store writes audit-log-redaction/none/v1 (format, reason,
                                    request_id): then no step record may be the reference's.
 8 consistency    ConsistencyError  One request id throughout: manifest, request, every step record,
                                    verification, every receipt, the DPO's statement, and the audit
                                    chain (rules below); the predicate repeats the records; all_clear,
                                    every tier's status and the overall status follow from the step
                                    records and the probes; receipts, the DPO's statement text and
                                    attested_at agree with them.

JSON, in every check: UTF-8, no duplicate key, no NaN or Infinity, no lone UTF-16 surrogate, at most
65,536 arrays and objects in a file, nesting as deep as Python's parser goes (deeper is refused).

Check 8 rules. steps.jsonl holds at most one record per (target, tier): the reference store's
records first (no `target`), then each other target's (its name in `target`, in name order), tiers
in cascade order; a repeated or reordered record is refused (no "last one wins"). A record's status,
with its tier's summed probe residue: step status exception|erasedWithExceptions ->
erasedWithExceptions; skipped with after_count 0|null and residue 0 -> skipped; erased with
after_count 0 and residue 0 -> erased; else notErased. Tier status: no record -> notErased; else the
worst of its records' (notErased, then erasedWithExceptions), skipped only when all are skipped,
else erased; its before/after are the sums of its records' counts (null when none has one). Overall:
no probe, a tier notErased, or residue in a probe not of an erasedWithExceptions tier -> notErased;
else an erasedWithExceptions tier or any exception -> erasedWithExceptions; else erased if
all_clear, notErased if not. all_clear true requires at least one probe, every probe residue 0,
every step after_count 0 (null for a skipped one) unless its status is an exception status. A
verification.json without `exceptions` has none; verified_at is a UTC time. Each receipt of
subprocessor-receipts.jsonl names this request, a processor (once) and a status done|pending|failed;
a receipt not done means the subprocessors tier is neither erased nor skipped. The audit evidence's
`erasure.audit_redaction` entry between its before and after checkpoints has fields.request_id this
request (the store's checkpoint key signs that binding: the entry is in the after checkpoint's tree).
The checkpoints were taken during the run: received_at - 5 min <= before.at <= after.at <= verified_at
(after.at to the second). The DPO's
statement text is "I have reviewed the evidence in this pack for erasure request <id>, signed by the
engine key <engine keyid>, and attest that it records the outcome of the request as stated:
<status>." with the pack's status; attested_at is not before verified_at (to the second) and not
more than a day ahead of this machine's clock.

Without --dpo-key (--no-dpo), a DPO envelope in the pack is NOT checked and the result says so
(`OK (... NOT checked ...)`); with --no-dpo and --dpo-key it is checked when present.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import bisect
import hashlib
import json
import re
import struct
import sys
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, NoReturn

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
ERASURE_PREDICATE = "https://erasure-cascade.dev/erasure-proof/v1"
DPO_PREDICATE = "https://erasure-cascade.dev/dpo-attestation/v1"
ENGINE_ENVELOPE = "signatures/engine.intoto.json"
DPO_ENVELOPE = "signatures/dpo.intoto.json"
MANIFEST, SUMS, AUDIT = "manifest.json", "SHA256SUMS", "audit-log-redaction.json"
EVIDENCE = ("request.json", "steps.jsonl", "verification.json", "subprocessor-receipts.jsonl", AUDIT,
            "attestation.txt")
TIERS = ("working", "episodic", "semantic", "vectors", "fine_tune", "uploads", "derivatives",
         "subprocessors", "audit_log")
STATUSES = ("erased", "erasedWithExceptions", "notErased")
EXCEPTION_STEP = ("exception", "erasedWithExceptions")
RECEIPT_STATUSES = ("done", "pending", "failed")
AUDIT_FORMAT, CHECKPOINT_TYPE, GENESIS = "audit-log-redaction/v3", "audit-checkpoint/v2", "0" * 64
AUDIT_V2_FORMAT = "audit-log-redaction/v2"
"""The format before v3: an inclusion proof in every entry, and every entry's hashes and redacted
commitments spelled out (a subject's entries cost about 2 KB each). Still verified: packs made with it
are in regulators' hands."""
AUDIT_V1_FORMAT = "audit-log-redaction/v1"
"""The format that carried the whole hash-chain segment: refused, with a line that says so."""
MERKLE_EMPTY_ROOT = hashlib.sha256(b"").digest()
AUDIT_NONE_FORMAT = "audit-log-redaction/none/v1"
"""A pack of a home whose targets include no reference store: it has no audit log of ours to redact;
check 8 then requires that every step record names another target."""
AUDIT_REDACTION_EVENT = "erasure.audit_redaction"
"""The audit entry the audit-log step appends after redacting; its fields name the request."""

MIB = 1024 * 1024
MAX_KEY_BYTES = 64 * 1024
MAX_FILE_BYTES = 4 * MIB
"""Every file, each: they are parsed in memory."""
MAX_FILES_BYTES = 8 * MIB
"""Every file, together."""
MAX_UNPACKED_BYTES = MAX_FILES_BYTES + 8 * MIB
"""The tar stream: the files, their headers and padding, and the zero blocks after the end."""
MAX_PACK_BYTES = MAX_UNPACKED_BYTES + MIB
"""The gzip member: deflate never grows data by more than a few bytes a 16 KiB block."""
MAX_ENTRIES = 256
MAX_DEPTH = 3
"""top/signatures/file: the pack's own layout is two levels deep below its top directory."""
MAX_JSON_CONTAINERS = 65_536
MAX_AUDIT_SEQ = 2**63 - 1
"""No audit log has more entries than a (signed 64-bit) SQLite integer counts."""
CLOCK_SKEW = timedelta(days=1)

WRITER_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
"""The only gzip header the writer writes: deflate, no flag, mtime 0, XFL 0, OS 255 (unknown)."""
WRITER_MODES = {"file": 0o644, "dir": 0o755}
"""The only member modes the writer writes (no setuid, setgid, sticky or group/other write bit)."""
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551

BLOCK = 512
_CHUNK = 64 * 1024
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SUMS_LINE = re.compile(r"([0-9a-f]{64})  ([^\n]+)")
_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""erasure.models.SAFE_TOKEN, copied (this file imports nothing of the project; a test keeps them equal)."""
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_UTC_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")
_LONE_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")

PublicKey = ec.EllipticCurvePublicKey | Ed25519PublicKey


# --- errors --------------------------------------------------------------------------------------

def printable(text: str) -> str:
    """`text` with every character outside printable ASCII written as an escape (\\x1b, \\u202e...):
    safe on any terminal and any output encoding."""
    if text.isascii() and text.isprintable():
        return text
    out = []
    for ch in text:
        o = ord(ch)
        if 0x20 <= o < 0x7F:
            out.append(ch)
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out)


class PackError(Exception):
    """The pack failed a check. `check` names it; `str(err)` says why, in one line of printable ASCII."""

    check = "pack"

    def __init__(self, why: str) -> None:
        super().__init__(printable(why))


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
    """What a pack that passed every check says. `dpo_keyid` is None when no DPO key was checked;
    `dpo_attestation` is `verified`, `absent` (no DPO envelope) or `not checked` (an envelope is
    present but no DPO key was given: it proves nothing)."""

    request_id: str
    status: str
    all_clear: bool
    engine_keyid: str
    dpo_keyid: str | None
    files: int
    checks: tuple[str, ...]
    signatures_verified: bool = True
    dpo_attestation: str = "absent"
    attested_at: str | None = None
    pack_name: str = ""
    audit_key_pinned: bool = False
    """The pack's name: sha256 hex of the engine's signed statement (the payload of
    signatures/engine.intoto.json). It names what is signed, so it never changes with the container
    (compression, tar or gzip headers, the DPO's attestation); the requester's email quotes it."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        d = asdict(self)
        d["checks"] = list(self.checks)
        return d

    def line(self) -> str:
        """The one line `main` prints for a pack that verified."""
        notes = []
        if self.dpo_attestation == "not checked":
            notes.append("engine signature and contents; the DPO attestation in the pack was NOT checked:"
                         " give --dpo-key to check it")
        if not self.audit_key_pinned:
            notes.append("the audit checkpoint key was NOT pinned: give --audit-key to check it")
        return "OK" + (f" ({'; '.join(notes)})" if notes else "")


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
    if len(pem) > MAX_KEY_BYTES:
        _fail(KeyArgumentError, f"the {role} key is larger than {MAX_KEY_BYTES} bytes: not a PEM public key")
    try:
        key = serialization.load_pem_public_key(pem)
    except UnsupportedAlgorithm:
        _fail(KeyArgumentError, f"the {role} key is of an algorithm or curve this verifier does not support")
    except (ValueError, TypeError):
        _fail(KeyArgumentError, f"the {role} key is not a PEM public key")
    if isinstance(key, Ed25519PublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    _fail(KeyArgumentError, f"the {role} key is neither ECDSA P-256 nor Ed25519")


def _fail(cls: type[PackError], why: str) -> NoReturn:
    raise cls(why)


class _JsonRefused(ValueError):
    """A JSON text that parses but that we refuse (a duplicate key, NaN)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _JsonRefused(f"repeats the key {k!r}")
        out[k] = v
    return out


def _constant(name: str) -> Any:
    raise _JsonRefused(f"holds {name}, which is not JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)


def _loads(text: str, name: str, cls: type[PackError]) -> Any:
    try:
        return _DECODER.decode(text)
    except RecursionError:
        _fail(cls, f"{name} nests too deeply")
    except _JsonRefused as exc:
        _fail(cls, f"{name} {exc}")
    except ValueError:
        _fail(cls, f"{name} is not valid JSON")


def _text(data: bytes, name: str, cls: type[PackError]) -> str:
    if data.count(b"[") + data.count(b"{") > MAX_JSON_CONTAINERS:
        _fail(cls, f"{name} holds more than {MAX_JSON_CONTAINERS} arrays and objects")
    if _LONE_SURROGATE.search(data):
        _fail(cls, f"{name} holds a lone UTF-16 surrogate (not Unicode text)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        _fail(cls, f"{name} is not valid UTF-8")


def _json(data: bytes, name: str, cls: type[PackError]) -> Any:
    return _loads(_text(data, name, cls), name, cls)


def _jsonl(data: bytes, name: str, cls: type[PackError]) -> list[Any]:
    return [_loads(line, f"{name} line {i}", cls)
            for i, line in enumerate(_text(data, name, cls).split("\n"), 1) if line.strip()]


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


def utc_time(v: Any) -> datetime | None:
    """The instant of a `YYYY-MM-DDTHH:MM:SS[.ffffff]Z` string, else None."""
    if not isinstance(v, str) or not _UTC_TIME.fullmatch(v):
        return None
    try:
        return datetime.fromisoformat(v[:-1]).replace(tzinfo=UTC)
    except ValueError:
        return None


# --- 1 archive: one gzip member ------------------------------------------------------------------

class _Gunzip:
    """Exactly one gzip member (RFC 1952) as the pack writer makes it, inflated at most `n` bytes a
    call; its trailer is checked, and nothing may follow it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._taken = 0
        self._unpacked = 0
        self._crc = 0
        self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        self._ended = False
        head = self._take_exact(10)
        if head[:2] != b"\x1f\x8b":
            _fail(ArchiveError, "not a readable tar.gz: not a gzip file")
        if len(head) < 10:
            _fail(ArchiveError, "not a readable tar.gz: the gzip header is truncated")
        if head[2] != 8:
            _fail(ArchiveError, "not a readable tar.gz: the gzip compression method is not deflate")
        if head[3] != 0:
            _fail(ArchiveError, "the gzip header carries optional fields (name, comment, extra field or header"
                                " CRC) that the pack writer never writes")
        if head != WRITER_GZIP_HEADER:
            what = "mtime" if head[4:8] != WRITER_GZIP_HEADER[4:8] else ("XFL (compression level)" if head[8]
                                                                          != WRITER_GZIP_HEADER[8] else "OS byte")
            _fail(ArchiveError, f"the gzip header has a {what} the pack writer never writes (it writes mtime 0,"
                                " XFL 0, OS 255)")

    def _take(self, n: int) -> bytes:
        data = self._raw.read(n)
        self._taken += len(data)
        if self._taken > MAX_PACK_BYTES:
            _fail(ArchiveError, f"the pack is larger than {MAX_PACK_BYTES} bytes")
        return data

    def _take_exact(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            part = self._take(left)
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def read(self, n: int) -> bytes:
        """Up to `n` unpacked bytes; b"" once the member has ended and its trailer checked out."""
        while not self._ended:
            if self._inflate.eof:
                self._trailer()
                break
            src = self._inflate.unconsumed_tail or self._take(_CHUNK)
            try:  # with no input left, zlib may still hold output: ask before calling it truncated
                out = self._inflate.decompress(src, n)
            except zlib.error:
                _fail(ArchiveError, "not a readable tar.gz: the deflate data is corrupt")
            if out:
                self._unpacked += len(out)
                if self._unpacked > MAX_UNPACKED_BYTES:
                    _fail(ArchiveError, f"the archive unpacks to more than {MAX_UNPACKED_BYTES} bytes")
                self._crc = zlib.crc32(out, self._crc)
                return out
            if not src and not self._inflate.eof:
                _fail(ArchiveError, "not a readable tar.gz: the gzip stream is truncated")
        return b""

    def _trailer(self) -> None:
        tail = self._inflate.unused_data
        if len(tail) < 8:
            tail += self._take_exact(8 - len(tail))
        if len(tail) < 8:
            _fail(ArchiveError, "not a readable tar.gz: the gzip trailer is truncated")
        crc, size = struct.unpack("<II", tail[:8])
        if crc != self._crc:
            _fail(ArchiveError, "the gzip CRC-32 does not match the unpacked bytes")
        if size != self._unpacked & 0xFFFFFFFF:
            _fail(ArchiveError, "the gzip trailer gives another length than the unpacked bytes")
        if tail[8:] or self._take(1):
            _fail(ArchiveError, "bytes after the gzip member (a second member or trailing data):"
                                " a pack is exactly one gzip member")
        self._ended = True

    def read_exact(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            part = self.read(min(left, _CHUNK))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)


# --- 1 archive: one ustar stream -----------------------------------------------------------------

@dataclass(frozen=True)
class Blob:
    """One file of the pack: its size, its sha256 and its bytes."""

    size: int
    sha256: str
    data: bytes


_NUMBERS = (("mode", 100, 8), ("uid", 108, 8), ("gid", 116, 8), ("size", 124, 12), ("mtime", 136, 12),
            ("devmajor", 329, 8), ("devminor", 337, 8))
_STRINGS = (("name", 0, 100), ("linkname", 157, 100), ("uname", 265, 32), ("gname", 297, 32),
            ("prefix", 345, 155))
_KINDS = {b"0": "file", b"\0": "file", b"5": "dir", b"1": "hard link", b"2": "symlink",
          b"3": "character device", b"4": "block device", b"6": "fifo", b"7": "contiguous file",
          b"x": "pax extended header", b"g": "pax global header", b"L": "GNU long name header",
          b"K": "GNU long link header", b"S": "GNU sparse file", b"V": "GNU volume header",
          b"M": "GNU multi-volume header", b"N": "GNU old long name header", b"D": "GNU dump directory"}


@dataclass(frozen=True)
class _Header:
    name: str
    kind: str
    size: int


def _field(block: bytes, what: str, start: int, width: int, at: int) -> bytes:
    raw = block[start:start + width]
    value, _, rest = raw.partition(b"\0")
    if rest.strip(b"\0"):
        _fail(ArchiveError, f"the tar header at byte {at} has bytes after the end of its {what}")
    return value


def _header(block: bytes, at: int) -> _Header:
    """One ustar header, every field checked (the writer's exact format)."""
    stored = block[148:156]
    if re.fullmatch(rb"[0-7]{6}\0 ", stored) is None or \
            int(stored[:6], 8) != sum(block[:148]) + 8 * 0x20 + sum(block[156:]):
        _fail(ArchiveError, f"a tar header with a bad checksum at byte {at}: a tar reader that skips it (GNU tar)"
                            " would read on")
    if block[257:265] != b"ustar\x0000":
        _fail(ArchiveError, f"the tar header at byte {at} is not POSIX ustar (a GNU or old tar header)")
    numbers = {}
    for what, start, width in _NUMBERS:
        raw = block[start:start + width]
        if what.startswith("dev") and not raw.strip(b"\0"):
            continue  # only devices carry device numbers; the writer leaves them empty
        if re.fullmatch(rb"[0-7]{%d}\0" % (width - 1), raw) is None:
            _fail(ArchiveError, f"the tar header at byte {at} has a {what} that is not zero-padded octal")
        numbers[what] = int(raw[:-1], 8)
    texts = {what: _field(block, what, start, width, at) for what, start, width in _STRINGS}
    if block[500:512].strip(b"\0"):
        _fail(ArchiveError, f"the tar header at byte {at} has bytes in its padding")
    name = texts["name"].decode("latin-1")
    if texts["prefix"]:
        name = texts["prefix"].decode("latin-1") + "/" + name
    kind = _KINDS.get(block[156:157], "entry of unknown type")
    if kind in ("file", "dir"):
        if texts["linkname"]:
            _fail(ArchiveError, f"a {kind} with a link name in archive: {name!r}")
        if kind == "dir" and numbers["size"]:
            _fail(ArchiveError, f"a directory with a size in archive: {name!r}")
        _writer_fields(block, kind, numbers, texts, name)
        return _Header(name, kind, numbers["size"])
    if kind.startswith("pax"):
        _fail(ArchiveError, f"a {kind} in archive (pax extensions are never written by the pack writer):"
                            f" {name!r}")
    _fail(ArchiveError, f"{kind} in archive: {name!r}")


def _writer_fields(block: bytes, kind: str, numbers: Mapping[str, int], texts: Mapping[str, bytes],
                   name: str) -> None:
    """Every header field the writer fixes holds what it writes: a pack's bytes (and a member's
    permissions once extracted) cannot vary while every other check passes."""
    mode = numbers["mode"]
    if mode != WRITER_MODES[kind]:
        _fail(ArchiveError, f"a {kind} with mode {mode:04o} in archive (the writer writes"
                            f" {WRITER_MODES[kind]:04o}; setuid, setgid or other bits are refused): {name!r}")
    for what in ("uid", "gid", "mtime"):
        if numbers[what]:
            _fail(ArchiveError, f"a {kind} with {what} {numbers[what]} in archive (the writer writes 0): {name!r}")
    for what in ("uname", "gname"):
        if texts[what]:
            _fail(ArchiveError, f"a {kind} with a {what} in archive (the writer writes none): {name!r}")
    if "devmajor" in numbers or "devminor" in numbers:
        _fail(ArchiveError, f"a {kind} with device numbers in archive (the writer writes none): {name!r}")
    if block[156:157] != (b"0" if kind == "file" else b"5"):
        _fail(ArchiveError, f"a {kind} with the old type flag NUL in archive (the writer writes '0'): {name!r}")
    if kind == "dir" and not name.endswith("/"):
        _fail(ArchiveError, f"a directory name without its final '/' in archive: {name!r}")
    if (texts["prefix"], texts["name"]) != _writer_split(name):
        _fail(ArchiveError, f"a name split between the prefix and name fields as the writer never splits it"
                            f" in archive: {name!r}")


def _writer_split(name: str) -> tuple[bytes, bytes]:
    """(prefix, name) fields as the writer (Python's tarfile, ustar) stores `name`: whole in the name
    field when it fits in 100 bytes, else split at the first '/' that fits both fields."""
    raw = name.encode("latin-1")
    if len(raw) <= 100:
        return b"", raw
    parts = raw.split(b"/")
    for i in range(1, len(parts)):
        prefix, rest = b"/".join(parts[:i]), b"/".join(parts[i:])
        if len(prefix) <= 155 and len(rest) <= 100:
            return prefix, rest
    return b"", b""  # never written: refused by the caller


def _member_name(raw: str, kind: str) -> str:
    name = raw[:-1] if kind == "dir" and raw.endswith("/") else raw
    if not name or "\x00" in name or "\\" in name:
        _fail(ArchiveError, "an entry has an empty or malformed name")
    if name.startswith("/"):
        _fail(ArchiveError, f"absolute path in archive: {name!r}")
    parts = name.split("/")
    if ".." in parts:
        _fail(ArchiveError, f"path with '..' in archive: {name!r}")
    if any(p in ("", ".") for p in parts):
        _fail(ArchiveError, f"non-normal path in archive: {name!r}")
    if not all(_PART.fullmatch(p) for p in parts):
        _fail(ArchiveError, f"a name with a character outside A-Z a-z 0-9 . _ - (or a part not starting with a"
                            f" letter or digit) in archive: {name!r}")
    if len(parts) > MAX_DEPTH:
        _fail(ArchiveError, f"a name nested deeper than the pack's layout (top/folder/file) in archive: {name!r}")
    return name


def _read_data(gz: _Gunzip, size: int) -> tuple[str, bytes]:
    """`size` bytes of member data and their sha256."""
    parts: list[bytes] = []
    left = size
    while left > 0:
        chunk = gz.read(min(left, _CHUNK))
        if not chunk:
            _fail(ArchiveError, "not a readable tar.gz: a file is truncated")
        parts.append(chunk)
        left -= len(chunk)
    data = b"".join(parts)
    return sha256_hex(data), data


@dataclass
class Unpacked:
    """The files of a pack that passed check 1's safety part, by path below the top directory."""

    top: str
    files: dict[str, Blob] = field(default_factory=dict)


def _end_of_archive(gz: _Gunzip, at: int) -> None:
    second = gz.read_exact(BLOCK)
    if len(second) < BLOCK or second.strip(b"\0"):
        _fail(ArchiveError, f"a lone zero block at byte {at} (the end-of-archive marker is two): a tar"
                            " reader that skips it would read on")
    while True:
        rest = gz.read(_CHUNK)
        if not rest:
            return
        if rest.strip(b"\0"):
            _fail(ArchiveError, "non-zero bytes after the end of the archive: a tar reader that goes on would"
                                " see more")


def unpack(raw: IO[bytes]) -> Unpacked:
    """Check 1, safety part: read a pack as a stream (see the module docstring for every rule)."""
    gz = _Gunzip(raw)
    out: Unpacked | None = None
    dirs: set[str] = set()
    seen: set[str] = set()
    total = at = count = 0
    while True:
        block = gz.read_exact(BLOCK)
        if not block:
            _fail(ArchiveError, "the tar stream ends without its end-of-archive marker")
        if len(block) < BLOCK:
            _fail(ArchiveError, "not a readable tar.gz: a tar header is truncated")
        if not block.strip(b"\0"):
            _end_of_archive(gz, at)
            break
        hdr = _header(block, at)
        count += 1
        if count > MAX_ENTRIES:
            _fail(ArchiveError, f"more than {MAX_ENTRIES} entries")
        name = _member_name(hdr.name, hdr.kind)
        head, _, rel = name.partition("/")
        if out is None:
            if not _REQUEST_ID.fullmatch(head):
                _fail(ArchiveError, f"the top directory is not named like a request id: {head!r}")
            out = Unpacked(head)
        elif head != out.top:
            _fail(ArchiveError, f"more than one top-level directory ({out.top!r}, {head!r})")
        if name in seen:
            _fail(ArchiveError, f"duplicate entry in archive: {name!r}")
        seen.add(name)
        at += BLOCK
        if hdr.kind == "dir":
            dirs.add(name)
            continue
        if not rel:
            _fail(ArchiveError, f"file outside the top directory: {name!r}")
        if hdr.size > MAX_FILE_BYTES:
            _fail(ArchiveError, f"{rel} is larger than {MAX_FILE_BYTES} bytes")
        total += hdr.size
        if total > MAX_FILES_BYTES:
            _fail(ArchiveError, f"the files exceed {MAX_FILES_BYTES} bytes together")
        digest, data = _read_data(gz, hdr.size)
        out.files[rel] = Blob(hdr.size, digest, data)
        pad = -hdr.size % BLOCK
        if gz.read_exact(pad).strip(b"\0"):
            _fail(ArchiveError, f"non-zero bytes in the block padding after {rel}")
        at += hdr.size + pad
    if out is None or not out.files:
        _fail(ArchiveError, "the archive holds no files")
    parents = {f"{out.top}/{'/'.join(rel.split('/')[:i])}"
               for rel in out.files for i in range(1, rel.count("/") + 1)}
    stray = sorted(dirs - parents - {out.top})
    if stray:
        _fail(ArchiveError, f"unexpected directory in archive: {stray[0]!r}")
    return out


def extract(data: bytes) -> tuple[str, dict[str, bytes]]:
    """Check 1's safety part on the bytes of a pack; return (top directory, {relative path: bytes})."""
    import io

    with _checking(ArchiveError):
        pack = unpack(io.BytesIO(data))
    return pack.top, {name: blob.data for name, blob in pack.files.items()}


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


def check_file_set(top: str, names: set[str], manifest_data: bytes | None, *,
                   require_dpo: bool) -> dict[str, Any]:
    """Check 1, completeness part: the files are exactly what the manifest says. Returns the manifest."""
    if manifest_data is None:
        _fail(ArchiveError, "missing file manifest.json")
    manifest = _json(manifest_data, MANIFEST, ArchiveError)
    listed = _manifest_paths(manifest)
    absent = [p for p in EVIDENCE if p not in listed]
    if absent:
        _fail(ArchiveError, f"manifest.json does not list {absent[0]}")
    expected = {*listed, MANIFEST, SUMS, ENGINE_ENVELOPE} | ({DPO_ENVELOPE} if require_dpo else set())
    allowed = expected | {DPO_ENVELOPE}
    missing, extra = sorted(expected - names), sorted(names - allowed)
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
    if (json.dumps(env, sort_keys=True, indent=2) + "\n").encode("ascii") != data:
        # No signature covers the DPO's envelope (nor the engine's without it): only a canonical form
        # keeps its bytes, and so the pack's digest, from changing while every check passes.
        _fail(SignatureError, f"{name} is not in the canonical form the writer writes (sorted keys, two-space"
                              " indent, ASCII, one final newline)")
    if not isinstance(env.get("payloadType"), str) or not isinstance(env.get("payload"), str) \
            or not isinstance(env.get("signatures"), list):
        _fail(SignatureError, f"{name} is not a DSSE envelope")
    sigs = env["signatures"]
    if set(env) != {"payloadType", "payload", "signatures"} or len(sigs) != 1 \
            or not isinstance(sigs[0], dict) or set(sigs[0]) != {"keyid", "sig"}:
        _fail(SignatureError, f"{name} is not an envelope as the writer writes it (payloadType, payload, and"
                              " exactly one signature of keyid and sig)")
    try:
        env["payloadType"].encode("utf-8")
    except UnicodeEncodeError:
        _fail(SignatureError, f"{name}: payloadType is not Unicode text")
    try:
        payload = base64.b64decode(env["payload"], validate=True)
    except (binascii.Error, ValueError):
        _fail(SignatureError, f"{name}: payload is not base64")
    if base64.b64encode(payload).decode("ascii") != env["payload"]:
        _fail(SignatureError, f"{name}: payload is not in canonical base64 (padding bits set)")
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


def _low_s_der(sig: bytes, name: str, role: str) -> None:
    """An ECDSA signature as the writer makes it: DER (one encoding of (r, s)) with s <= n/2. Either
    (r, s) or (r, n - s) verifies; accepting both would let anyone change the pack's bytes."""
    try:
        r, s = decode_dss_signature(sig)
    except ValueError:
        _fail(SignatureError, f"{name}: the {role} signature is not a DER-encoded ECDSA signature")
    if encode_dss_signature(r, s) != sig:
        _fail(SignatureError, f"{name}: the {role} signature is not in DER (another encoding of the same values)")
    if s > P256_ORDER // 2:
        _fail(SignatureError, f"{name}: the {role} signature is high-s (s > n/2): the writer signs low-s only")


def check_signature(data: bytes, name: str, key: PublicKey, role: str) -> tuple[str, bytes]:
    """Check 2 for one envelope: returns (payloadType, payload) once a signature by `key` verifies."""
    env, payload = _envelope(data, name)
    kid = keyid_of(key)
    mine = [s for s in env["signatures"] if isinstance(s, dict) and s.get("keyid") == kid]
    if not mine:
        _fail(SignatureError, f"{name} has no signature by the given {role} key (keyid {kid[:16]}...)")
    message = pae(env["payloadType"], payload)
    for s in mine:
        sig_text = s.get("sig")
        if not isinstance(sig_text, str):
            continue
        try:
            sig = base64.b64decode(sig_text, validate=True)
        except (binascii.Error, ValueError):
            continue
        if base64.b64encode(sig).decode("ascii") != sig_text:
            _fail(SignatureError, f"{name}: the {role} signature is not in canonical base64 (padding bits set)")
        if isinstance(key, ec.EllipticCurvePublicKey):
            _low_s_der(sig, name, role)
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
    "request_id": lambda v: isinstance(v, str), "attested_at": lambda v: utc_time(v) is not None,
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
    for fname, ok in fields.items():
        if fname not in pred or not ok(pred[fname]):
            _fail(StatementError, f"{name}: predicate field {fname!r} is missing or malformed")
    return st


# --- 4 subjects ----------------------------------------------------------------------------------

def check_subjects(statement: Mapping[str, Any], digests: Mapping[str, str], covered: set[str],
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
            _fail(SubjectError, f"{name}: subject {path!r} is listed twice")
        seen.add(path)
        if path not in covered:
            _fail(SubjectError, f"{name}: subject {path!r} is not a file it may cover")
        if digests[path] != want:
            _fail(SubjectError, f"{path} does not match its digest in {name}")
    missing = sorted(covered - seen)
    if missing:
        _fail(SubjectError, f"{missing[0]} is not a subject of {name}")


# --- 5 checksums ---------------------------------------------------------------------------------

def check_checksums(manifest: Mapping[str, Any], blobs: Mapping[str, Blob], engine_keyid: str) -> None:
    """Check 5: manifest entries and SHA256SUMS lines match the files and each other."""
    listed: set[str] = set()
    for e in manifest["files"]:
        path = e["path"]
        listed.add(path)
        if not _is_int(e.get("size")) or e["size"] != blobs[path].size:
            _fail(ChecksumError, f"manifest.json gives the wrong size for {path}")
        if e.get("sha256") != blobs[path].sha256:
            _fail(ChecksumError, f"manifest.json gives the wrong sha256 for {path}")
        if not isinstance(e.get("role"), str):
            _fail(ChecksumError, f"manifest.json gives no role for {path}")
    if manifest.get("engine_keyid") != engine_keyid:
        _fail(ChecksumError, "manifest.json names another engine key")
    try:
        lines = blobs[SUMS].data.decode("ascii").splitlines()
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
        if blobs[path].sha256 != digest:
            _fail(ChecksumError, f"SHA256SUMS gives the wrong sha256 for {path}")


# --- 7 audit log ---------------------------------------------------------------------------------

def merkle_leaf(data: bytes) -> bytes:
    """RFC 9162 2.1.1 leaf hash: SHA-256(0x00 || data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def merkle_node(left: bytes, right: bytes) -> bytes:
    """RFC 9162 2.1.1 interior node hash: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(leaf: bytes, index: int, size: int, path: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 2.1.3.2: does `path` prove leaf hash `leaf` at `index` in the tree of `size` with `root`?"""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = merkle_node(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = merkle_node(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_multiproof(leaves: Mapping[int, bytes], size: int, proof: Sequence[bytes], root: bytes) -> bool:
    """Do the leaf hashes `leaves` (index -> hash) and `proof` give `root` for the tree of `size`?

    `proof` is the MTH of every maximal subtree of the RFC 9162 2.1.1 decomposition of D[size] that
    holds none of the leaves, in left-to-right order (a batch of inclusion proofs that shares its
    nodes: about k * log2(size / k) hashes for k leaves instead of k * log2(size)). Every hash of it
    must be used, and no leaf may lie outside the tree. No leaves: the proof is empty (nothing is
    shown)."""
    indices = sorted(leaves)
    if not indices:
        return not proof
    if indices[0] < 0 or indices[-1] >= size:
        return False
    hashes = iter(proof)

    def mth(start: int, n: int, lo: int, hi: int) -> bytes:  # leaves indices[lo:hi] lie in [start, start + n)
        if lo == hi:
            return next(hashes)
        if n == 1:
            return leaves[start]
        k = 1 << ((n - 1).bit_length() - 1)
        mid = bisect.bisect_left(indices, start + k, lo, hi)
        return merkle_node(mth(start, k, lo, mid), mth(start + k, n - k, mid, hi))

    try:
        computed = mth(0, size, 0, len(indices))
    except StopIteration:
        return False
    return computed == root and next(hashes, None) is None


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """RFC 9162 2.1.4.2: does `proof` show the tree of `second` (root `second_root`) extends the tree of
    `first` (root `first_root`)? Equal sizes: the proof is empty and the roots equal; size 0: the
    proof is empty and `first_root` is the empty tree's hash."""
    if not 0 <= first <= second:
        return False
    if first == second:
        return not proof and first_root == second_root
    if first == 0:
        return not proof and first_root == MERKLE_EMPTY_ROOT
    if not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:  # a power of two: the first tree is a node of the second
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = merkle_node(c, fr), merkle_node(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = merkle_node(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == first_root and sr == second_root and sn == 0


def _checkpoint_ok(key: Ed25519PublicKey, cp: Mapping[str, Any]) -> bool:
    try:
        statement = canonical_json({"type": CHECKPOINT_TYPE, "seq": cp["seq"], "head_hash": cp["head_hash"],
                                    "tree_size": cp["tree_size"], "root_hash": cp["root_hash"], "at": cp["at"]})
        key.verify(base64.b64decode(str(cp["signature"]), validate=True), statement)
    except (InvalidSignature, binascii.Error, ValueError, KeyError, UnicodeEncodeError):
        return False
    return True


def _audit_key(doc: Mapping[str, Any]) -> Ed25519PublicKey:
    ck = _obj(doc.get("checkpoint_key"), "checkpoint_key", AuditLogError)
    if ck.get("algorithm") != "ed25519":
        _fail(AuditLogError, "the checkpoint key is not declared ed25519")
    pem = ck.get("public_key_pem")
    if not isinstance(pem, str) or len(pem) > MAX_KEY_BYTES:
        _fail(AuditLogError, "the checkpoint key is not a PEM public key")
    try:
        key = serialization.load_pem_public_key(pem.encode("ascii"))
    except (ValueError, TypeError, UnicodeEncodeError, UnsupportedAlgorithm):
        _fail(AuditLogError, "the checkpoint key is not a PEM public key of a supported algorithm")
    if not isinstance(key, Ed25519PublicKey):
        _fail(AuditLogError, "the checkpoint key is not an Ed25519 key")
    if ck.get("key_id") != keyid_of(key):
        _fail(AuditLogError, "the checkpoint key_id is not the sha256 of the key's DER")
    return key


def _entry_hash(e: Mapping[str, Any], seq: int) -> str:
    body = {k: e.get(k) for k in ("seq", "at", "event", "actor", "fields")}
    try:
        return sha256_hex(e["prev_hash"].encode("ascii") + b"\n" + canonical_json(body))
    except UnicodeEncodeError:
        _fail(AuditLogError, f"entry {seq} holds a lone UTF-16 surrogate (not Unicode text)")
    except (RecursionError, ValueError):
        _fail(AuditLogError, f"entry {seq} cannot be serialised canonically")


def _hashes(v: Any, what: str) -> list[bytes]:
    """A list of 64-hex-digit hashes, as bytes."""
    if not isinstance(v, list) or not all(isinstance(h, str) and _HEX64.fullmatch(h) for h in v):
        _fail(AuditLogError, f"{what} is not a list of 64-hex-digit hashes")
    return [bytes.fromhex(h) for h in v]


@dataclass(frozen=True)
class _Checkpoint:
    seq: int
    head: str
    root: bytes


def _audit_checkpoint(doc: Mapping[str, Any], which: str, key: Ed25519PublicKey) -> _Checkpoint:
    cp = _obj(doc.get(which), f"{which} checkpoint", AuditLogError)
    seq = _count(cp.get("seq"), f"{which}.seq", AuditLogError)
    size = _count(cp.get("tree_size"), f"{which}.tree_size", AuditLogError)
    assert seq is not None
    for name in ("head_hash", "root_hash"):
        if not isinstance(cp.get(name), str) or not _HEX64.fullmatch(cp[name]):
            _fail(AuditLogError, f"the {which} checkpoint's {name} is not 64 hex digits")
    if utc_time(cp.get("at")) is None:
        _fail(AuditLogError, f"the {which} checkpoint's at is not a UTC time (YYYY-MM-DDTHH:MM:SS[.ffffff]Z)")
    if size != seq:
        _fail(AuditLogError, f"the {which} checkpoint's tree_size is not its seq")
    if seq > MAX_AUDIT_SEQ:  # the store's seq is a 64-bit integer; proofs then recurse at most 63 deep
        _fail(AuditLogError, f"the {which} checkpoint's seq is larger than any 64-bit seq an audit log can have")
    if not _checkpoint_ok(key, cp):
        _fail(AuditLogError, f"the {which} checkpoint signature does not verify")
    if seq == 0 and (cp["head_hash"] != GENESIS or bytes.fromhex(cp["root_hash"]) != MERKLE_EMPTY_ROOT):
        _fail(AuditLogError, f"the {which} checkpoint of the empty log does not name the genesis hash and the"
                             " empty tree's root")
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
    r = _obj(raw, "a redacted item", AuditLogError)
    seq, fname, commit = r.get("seq"), r.get("field"), r.get("commitment")
    if v2 and (not isinstance(commit, str) or not _HEX64.fullmatch(commit)):
        _fail(AuditLogError, "a redacted commitment is not 64 hex digits")
    if not v2 and set(r) != {"seq", "field"}:
        _fail(AuditLogError, "a redacted item holds exactly seq and field (its commitment is the entry's)")
    n = _count(seq, "a redacted seq", AuditLogError)
    if n is None or not isinstance(fname, str):
        _fail(AuditLogError, "a redacted item has no seq or field")
    return n, fname, commit


_V3_ENTRY_KEYS = frozenset({"seq", "at", "event", "actor", "fields"})


def _audit_entries(doc: Mapping[str, Any], before: _Checkpoint, after: _Checkpoint,
                   v2: bool) -> dict[int, dict[str, Any]]:
    """The entries, by seq: shape, order, recomputed hash, inclusion in the after tree (v3: one
    multiproof for all of them; v2: a path in each), and the links and checkpoint heads they reach."""
    raw = doc.get("entries")
    if not isinstance(raw, list):
        _fail(AuditLogError, "entries is not a list")
    by_seq: dict[int, dict[str, Any]] = {}
    digests: dict[int, str] = {}
    last = 0
    for i, item in enumerate(raw):
        e = _obj(item, f"entries[{i}]", AuditLogError)
        seq = _count(e.get("seq"), f"entries[{i}].seq", AuditLogError)
        assert seq is not None
        if seq <= last:
            _fail(AuditLogError, f"the entries are not in ascending seq order, or repeat (at seq {seq})")
        if not 1 <= seq <= after.seq:
            _fail(AuditLogError, f"entry {seq} lies outside the after checkpoint's tree")
        follows = seq - 1 in digests
        if v2:
            well_formed = isinstance(e.get("entry_hash"), str)
        else:  # the predecessor's hash is spelled out only when the predecessor is not an entry here
            well_formed = set(e) == (_V3_ENTRY_KEYS if follows else _V3_ENTRY_KEYS | {"prev_hash"}) and all(
                isinstance(e[k], str) for k in ("at", "event", "actor"))
            if follows:
                e = {**e, "prev_hash": digests[seq - 1]}
        if not well_formed or not isinstance(e.get("prev_hash"), str) or not _HEX64.fullmatch(e["prev_hash"]) \
                or not isinstance(e.get("fields"), dict):
            _fail(AuditLogError, f"entry {seq} is malformed")
        digest = _entry_hash(e, seq)
        if v2:
            if e["entry_hash"] != digest:
                _fail(AuditLogError, f"entry {seq} hash does not recompute")
            path = _hashes(e.get("inclusion"), f"entry {seq}'s inclusion proof")
            if not verify_inclusion(merkle_leaf(bytes.fromhex(digest)), seq - 1, after.seq, path, after.root):
                _fail(AuditLogError, f"entry {seq}'s inclusion proof does not verify against the after checkpoint's"
                                     " root")
        if seq == 1 and e["prev_hash"] != GENESIS:
            _fail(AuditLogError, "the first entry does not link to the genesis hash")
        if v2 and follows and e["prev_hash"] != digests[seq - 1]:
            _fail(AuditLogError, f"broken chain link at seq {seq}")
        for which, cp in (("before", before), ("after", after)):
            if seq == cp.seq and digest != cp.head:
                _fail(AuditLogError, f"the {which} checkpoint's head is not the hash of entry {seq}")
        by_seq[seq], digests[seq], last = e, digest, seq
    if not v2:
        leaves = {seq - 1: merkle_leaf(bytes.fromhex(d)) for seq, d in digests.items()}
        if not verify_multiproof(leaves, after.seq, _hashes(doc.get("multiproof"), "the multiproof"), after.root):
            _fail(AuditLogError, "the entries' multiproof does not verify against the after checkpoint's root")
    return by_seq


def check_audit_log(data: bytes, pinned: Ed25519PublicKey | None = None) -> AuditSummary:
    """Check 7: the audit-log redaction evidence (see the module docstring). The checkpoint key is
    the one the document names, covered by the engine's signature; `pinned` (the store's checkpoint
    key, known to the verifier) must then be that key."""
    doc = _obj(_json(data, AUDIT, AuditLogError), AUDIT, AuditLogError)
    fmt = doc.get("format")
    if fmt == AUDIT_NONE_FORMAT:
        if set(doc) != {"format", "reason", "request_id"} or not isinstance(doc.get("request_id"), str) \
                or not isinstance(doc.get("reason"), str):
            _fail(AuditLogError, f"a {AUDIT_NONE_FORMAT} document holds exactly format, reason and request_id")
        return AuditSummary(no_audit_log_for=doc["request_id"])
    if fmt == AUDIT_V1_FORMAT:
        _fail(AuditLogError, f"{AUDIT_V1_FORMAT} is no longer accepted: it carries a hash-chain segment that"
                             f" grows with the log; packs carry {AUDIT_FORMAT} (Merkle inclusion and"
                             " consistency proofs)")
    if fmt not in (AUDIT_FORMAT, AUDIT_V2_FORMAT):
        _fail(AuditLogError, f"format is not {AUDIT_FORMAT} (nor {AUDIT_V2_FORMAT})")
    v2 = fmt == AUDIT_V2_FORMAT
    key = _audit_key(doc)
    if pinned is not None and keyid_of(pinned) != keyid_of(key):
        _fail(AuditLogError, "the checkpoints are signed by another key than the audit key given")
    before, after = _audit_checkpoint(doc, "before", key), _audit_checkpoint(doc, "after", key)
    if before.seq > after.seq:
        _fail(AuditLogError, "the before checkpoint is later than the after checkpoint")
    if not verify_consistency(before.seq, after.seq, before.root, after.root,
                              _hashes(doc.get("consistency"), "the consistency proof")):
        _fail(AuditLogError, "the consistency proof does not verify: the after checkpoint's tree does not"
                             " extend the before checkpoint's")
    entries = _audit_entries(doc, before, after, v2)
    items = doc.get("redacted")
    if not isinstance(items, list):
        _fail(AuditLogError, "redacted is not a list")
    holding: set[int] = set()
    last: tuple[int, str] | None = None
    for item in items:
        seq, fname, commit = _redacted_item(item, v2)
        if last is not None and (seq, fname) <= last:
            _fail(AuditLogError, "the redacted items are not sorted by seq and field, or repeat")
        last = (seq, fname)
        if seq not in entries:
            _fail(AuditLogError, f"redacted entry {seq} is not among the entries")
        held = entries[seq]["fields"].get(fname)
        if not v2 and isinstance(held, dict):  # v3 names the field; the commitment is the entry's
            commit = held.get("commit")
        if not (isinstance(commit, str) and _HEX64.fullmatch(commit) and held == {"commit": commit}):
            _fail(AuditLogError, f"entry {seq}: a redacted field does not hold its commitment")
        holding.add(seq)
    redactions = [e for seq, e in entries.items()
                  if e.get("event") == AUDIT_REDACTION_EVENT and before.seq < seq <= after.seq]
    for seq, e in entries.items():
        if seq not in holding and not any(e is r for r in redactions):
            _fail(AuditLogError, f"entry {seq} holds no redacted commitment and is not the request's"
                                 f" {AUDIT_REDACTION_EVENT} entry: the evidence carries only those")
    if len(redactions) > 1:
        _fail(AuditLogError, f"more than one {AUDIT_REDACTION_EVENT} entry between the checkpoints")
    if doc.get("vault_remaining_for_subject") != 0:
        _fail(AuditLogError, "the audit vault still holds values of the subject")
    if redactions:
        said = redactions[0]["fields"].get("redacted")
        if not _is_int(said) or said != len(items):
            _fail(AuditLogError, f"the evidence lists {len(items)} redacted item(s), but the log's own"
                                 f" {AUDIT_REDACTION_EVENT} entry says {printable(str(said))}: an entry is hidden"
                                 " or added")
    rid = redactions[0]["fields"].get("request_id") if redactions else None
    return AuditSummary(redaction_request=rid if isinstance(rid, str) else None,
                        checkpoint_times=(doc["before"]["at"], doc["after"]["at"]))


# --- 8 consistency -------------------------------------------------------------------------------

def _records(data: Callable[[str], bytes]) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any],
                                                     list[dict[str, Any]]]:
    C = ConsistencyError
    request = _obj(_json(data("request.json"), "request.json", C), "request.json", C)
    steps = [_obj(s, "a step record", C) for s in _jsonl(data("steps.jsonl"), "steps.jsonl", C)]
    verification = _obj(_json(data("verification.json"), "verification.json", C), "verification.json", C)
    receipts = [_obj(r, "a receipt", C) for r in _jsonl(data("subprocessor-receipts.jsonl"),
                                                          "subprocessor-receipts.jsonl", C)]
    order: tuple[int, str, int] | None = None
    for s in steps:
        if s.get("step") not in TIERS:
            _fail(C, "a step record names no known tier")
        target = s.get("target")
        if target is not None and (not isinstance(target, str) or not target):
            _fail(C, "a step record's target is not a name")
        here = (0, "", TIERS.index(s["step"])) if target is None else (1, target, TIERS.index(s["step"]))
        if order is not None and here == order:
            _fail(C, f"steps.jsonl repeats step {s['step']}" + (f" of target {target!r}" if target else "")
                     + " (one record per target and tier)")
        if order is not None and here < order:
            _fail(C, f"steps.jsonl lists step {s['step']} out of order (the reference store's records, then each"
                     " target's by name, tiers in cascade order)")
        order = here
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
    return request, steps, verification, receipts


def _record_status(rec: Mapping[str, Any], residue: int) -> str:
    if rec["status"] in EXCEPTION_STEP:
        return "erasedWithExceptions"
    if rec["status"] == "skipped" and rec.get("after_count") in (0, None) and residue == 0:
        return "skipped"
    if rec["status"] == "erased" and rec.get("after_count") == 0 and residue == 0:
        return "erased"
    return "notErased"


def _total(values: Sequence[Any]) -> int | None:
    counts = [v for v in values if _is_int(v)]
    return sum(counts) if counts else None


def _expected_tiers(steps: Sequence[Mapping[str, Any]],
                    probes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    records: dict[str, list[Mapping[str, Any]]] = {}
    for s in steps:  # one per target and tier: _records refuses repeats
        records.setdefault(s["step"], []).append(s)
    residue: dict[str, int] = {}
    for p in probes:
        residue[p["tier"]] = residue.get(p["tier"], 0) + p["residue"]
    table: dict[str, dict[str, Any]] = {}
    for tier in TIERS:
        mine, res = records.get(tier, []), residue.get(tier, 0)
        statuses = [_record_status(r, res) for r in mine]
        if not statuses or "notErased" in statuses:
            status = "notErased"
        elif "erasedWithExceptions" in statuses:
            status = "erasedWithExceptions"
        else:
            status = "skipped" if all(st == "skipped" for st in statuses) else "erased"
        table[tier] = {"status": status, "before": _total([r.get("before_count") for r in mine]),
                       "after": _total([r.get("after_count") for r in mine]), "residue": res}
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


def dpo_statement_text(request_id: str, engine_keyid: str, status: str) -> str:
    """What the DPO signs they attest (the pack writer's `proof.statement.dpo_statement` writes it)."""
    return (f"I have reviewed the evidence in this pack for erasure request {request_id}, "
            f"signed by the engine key {engine_keyid}, and attest that it records the "
            f"outcome of the request as stated: {status}.")


def _check_receipts(receipts: Sequence[Mapping[str, Any]], rid: str, tier_status: str) -> None:
    C = ConsistencyError
    processors: set[str] = set()
    for r in receipts:
        if r.get("request_id") != rid:
            _fail(C, "subprocessor-receipts.jsonl holds a receipt of another request (or of none)")
        proc, status = r.get("processor"), r.get("status")
        if not isinstance(proc, str) or not proc:
            _fail(C, "a receipt names no processor")
        if proc in processors:
            _fail(C, f"subprocessor-receipts.jsonl holds two receipts of processor {proc!r}")
        processors.add(proc)
        if status not in RECEIPT_STATUSES:
            _fail(C, f"the receipt of processor {proc!r} has status {status!r}, not one of"
                     f" {', '.join(RECEIPT_STATUSES)}")
        if status != "done" and tier_status in ("erased", "skipped"):
            _fail(C, f"the receipt of processor {proc!r} is {status}, yet the subprocessors tier is {tier_status}")


def _check_dpo(dpo: Mapping[str, Any], rid: str, engine_keyid: str, status: str, verified_at: datetime,
               now: datetime) -> None:
    C = ConsistencyError
    if dpo["statement"] != dpo_statement_text(rid, engine_keyid, status):
        _fail(C, f"the DPO's statement does not attest this request's outcome as the pack states it ({status})")
    attested = utc_time(dpo["attested_at"])
    assert attested is not None  # check 3
    if attested < verified_at.replace(microsecond=0):
        _fail(C, "the DPO attested before the verification ran (attested_at is earlier than verified_at)")
    if attested > now + CLOCK_SKEW:
        _fail(C, "the DPO's attested_at lies in the future")


RECEIVED_SKEW = timedelta(minutes=5)
"""How far in the future a request's received_at may be when it is submitted (erasure.models.CLOCK_SKEW)."""


def _check_checkpoint_times(times: tuple[str, str], received: Any, verified_at: datetime) -> None:
    """The audit checkpoints were taken during the run: received_at <= before <= after <= verified_at
    (received_at less the submit's clock skew; the verification is to the second)."""
    before, after = utc_time(times[0]), utc_time(times[1])
    start = utc_time(received)
    assert before is not None and after is not None  # check 7
    if start is None:
        _fail(ConsistencyError, "request.json's received_at is not a UTC time (YYYY-MM-DDTHH:MM:SS[.ffffff]Z)")
    if before < start - RECEIVED_SKEW:
        _fail(ConsistencyError, f"the before audit checkpoint ({times[0]}) is dated before the request was"
                                " received")
    if after < before:
        _fail(ConsistencyError, "the after audit checkpoint is dated before the before checkpoint")
    if after.replace(microsecond=0) > verified_at:
        _fail(ConsistencyError, f"the after audit checkpoint ({times[1]}) is dated after the verification")


def check_consistency(data: Callable[[str], bytes], manifest: Mapping[str, Any], predicate: Mapping[str, Any],
                      dpo_predicate: Mapping[str, Any] | None, audit: AuditSummary,
                      now: datetime | None = None) -> None:
    """Check 8 (see the module docstring). `data(name)` gives the bytes of a file of the pack."""
    C = ConsistencyError
    request, steps, verification, receipts = _records(data)
    rid = predicate["request_id"]
    ids = [("manifest.json", manifest.get("request_id")), ("request.json", request.get("request_id")),
           ("verification.json", verification.get("request_id"))]
    ids += [("steps.jsonl", s.get("request_id")) for s in steps]
    ids += [("the DPO attestation", dpo_predicate["request_id"])] if dpo_predicate is not None else []
    for where, other in ids:
        if other != rid:
            _fail(C, f"{where} names another request than the signed statement")
    if audit.no_audit_log_for is not None:
        if audit.no_audit_log_for != rid:
            _fail(C, f"{AUDIT} names another request than the signed statement")
        if any(s.get("target") is None for s in steps):
            _fail(C, f"{AUDIT} says there is no reference store, but steps.jsonl has records of one")
    elif audit.redaction_request != rid:
        _fail(C, f"{AUDIT} records no redaction for this request between its checkpoints"
                 f" (no {AUDIT_REDACTION_EVENT} entry naming it)")
    for fname, source, key in (("legal_basis", request, "legal_basis"), ("received_at", request, "received_at"),
                               ("verified_at", verification, "verified_at"),
                               ("all_clear", verification, "all_clear"),
                               ("exceptions", verification, "exceptions")):
        if predicate[fname] != source.get(key):
            _fail(C, f"the statement's {fname} differs from the records")
    verified_at = utc_time(predicate["verified_at"])
    if verified_at is None:
        _fail(C, "verified_at is not a UTC time (YYYY-MM-DDTHH:MM:SS[.ffffff]Z)")
    if audit.checkpoint_times is not None:
        _check_checkpoint_times(audit.checkpoint_times, request.get("received_at"), verified_at)
    probes = verification["probes"]
    all_clear = predicate["all_clear"]
    if all_clear:
        if not probes:
            _fail(C, "all_clear is true but no probe ran")
        for p in probes:
            if p["residue"] != 0:
                _fail(C, f"all_clear is true but probe {p['tier']}/{p['method']} found residue {p['residue']}")
        for s in steps:
            after = s.get("after_count")
            if not (after == 0 or s["status"] in EXCEPTION_STEP or (s["status"] == "skipped" and after is None)):
                _fail(C, f"all_clear is true but step {s['step']} ends with after_count {after}")
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
    _check_receipts(receipts, rid, tiers["subprocessors"]["status"])
    status = _expected_status(tiers, probes, all_clear, verification["exceptions"])
    if predicate["status"] != status:
        _fail(C, f"the statement says {predicate['status']}, the records give {status}")
    if manifest.get("status") != status or manifest.get("all_clear") != all_clear:
        _fail(C, "manifest.json states another status than the signed statement")
    if dpo_predicate is not None:
        _check_dpo(dpo_predicate, rid, predicate["engine_keyid"], status, verified_at, now or datetime.now(UTC))


# --- the whole verification ----------------------------------------------------------------------

@contextmanager
def _checking(cls: type[PackError]) -> Iterator[None]:
    """The safety net of one check: whatever a hostile input makes go wrong inside it ends as that
    check's failure, never as a traceback. (The tests require a named reason for every input they
    know; this catches what they do not.)"""
    try:
        yield
    except PackError:
        raise
    except RecursionError:
        raise cls("the input nests too deeply") from None
    except MemoryError:
        raise cls("the input needs more memory than this verifier allows") from None
    except Exception as exc:
        raise cls(f"refused: the input broke this check ({type(exc).__name__})") from exc


def _run(raw: IO[bytes], engine_key: PublicKey | None, dpo_key: PublicKey | None,
         require_dpo: bool, audit_key: Ed25519PublicKey | None = None) -> VerifyResult:
    with _checking(ArchiveError):
        pack = unpack(raw)
    return _checks(pack, [], engine_key, dpo_key, require_dpo, audit_key)


def _checks(pack: Unpacked, checks: list[str], engine_key: PublicKey | None, dpo_key: PublicKey | None,
            require_dpo: bool, audit_key: Ed25519PublicKey | None) -> VerifyResult:
    files = pack.files
    with _checking(ArchiveError):
        manifest = check_file_set(pack.top, set(files), files[MANIFEST].data if MANIFEST in files else None,
                                  require_dpo=require_dpo)
    checks.append(ArchiveError.check)
    has_dpo = DPO_ENVELOPE in files
    with _checking(SignatureError):
        if engine_key is not None:
            e_type, e_payload = check_signature(files[ENGINE_ENVELOPE].data, ENGINE_ENVELOPE, engine_key, "engine")
            engine_keyid = keyid_of(engine_key)
        else:
            e_type, e_payload, claimed = unverified_payload(files[ENGINE_ENVELOPE].data, ENGINE_ENVELOPE)
            engine_keyid = claimed or ""
        d_payload: tuple[str, bytes] | None = None
        if has_dpo and dpo_key is not None:
            d_payload = check_signature(files[DPO_ENVELOPE].data, DPO_ENVELOPE, dpo_key, "DPO")
        elif require_dpo:
            _fail(KeyArgumentError, "no DPO key was given to check the DPO's attestation")
    if engine_key is not None:
        checks.append(SignatureError.check)
    with _checking(StatementError):
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
    with _checking(SubjectError):
        digests = {name: blob.sha256 for name, blob in files.items()}
        covered = {p for p in files if not p.startswith("signatures/")}
        check_subjects(statement, digests, covered, ENGINE_ENVELOPE)
        if dpo_statement is not None:
            check_subjects(dpo_statement, digests, covered | {ENGINE_ENVELOPE}, DPO_ENVELOPE)
    checks.append(SubjectError.check)
    with _checking(ChecksumError):
        check_checksums(manifest, files, engine_keyid)
    checks.append(ChecksumError.check)
    if dpo_keyid is not None:
        if dpo_keyid == engine_keyid:
            _fail(SameKeyError, "the DPO attestation is signed with the engine's key")
        checks.append(SameKeyError.check)
    with _checking(AuditLogError):
        audit = check_audit_log(files[AUDIT].data, audit_key)
    checks.append(AuditLogError.check)
    with _checking(ConsistencyError):
        check_consistency(lambda name: files[name].data, manifest, predicate, dpo_predicate, audit)
    checks.append(ConsistencyError.check)
    attestation = "verified" if dpo_predicate is not None else ("not checked" if has_dpo else "absent")
    return VerifyResult(request_id=predicate["request_id"], status=predicate["status"],
                        all_clear=predicate["all_clear"], engine_keyid=engine_keyid, dpo_keyid=dpo_keyid,
                        files=len(files), checks=tuple(checks), signatures_verified=engine_key is not None,
                        dpo_attestation=attestation,
                        attested_at=dpo_predicate["attested_at"] if dpo_predicate is not None else None,
                        pack_name=sha256_hex(e_payload),
                        audit_key_pinned=audit_key is not None or audit.no_audit_log_for is not None)


def read_pack(pack_path: str | Path) -> bytes:
    """The bytes of a pack file (at most `MAX_PACK_BYTES`); `ArchiveError` if it cannot be read or is
    no gzip file at all (checked on its first bytes, so a device of endless bytes is refused at once)."""
    try:
        with open(pack_path, "rb") as fh:
            head = fh.read(2)
            if head != b"\x1f\x8b":
                _fail(ArchiveError, "not a readable tar.gz: not a gzip file")
            data = head + fh.read(MAX_PACK_BYTES - 1)
            if fh.read(1):
                _fail(ArchiveError, f"the pack is larger than {MAX_PACK_BYTES} bytes")
            return data
    except OSError as exc:
        raise ArchiveError(f"cannot read the pack: {exc.strerror}") from exc


def _keys(engine_pub_pem: bytes, dpo_pub_pem: bytes | None,
          audit_pub_pem: bytes | None) -> tuple[PublicKey, PublicKey | None, Ed25519PublicKey | None]:
    with _checking(KeyArgumentError):
        engine_key = load_public_key(engine_pub_pem, "engine")
        dpo_key = load_public_key(dpo_pub_pem, "DPO") if dpo_pub_pem is not None else None
        audit_key = load_public_key(audit_pub_pem, "audit") if audit_pub_pem is not None else None
    if audit_key is not None and not isinstance(audit_key, Ed25519PublicKey):
        _fail(KeyArgumentError, "the audit key is not an Ed25519 key")
    if dpo_key is not None and keyid_of(dpo_key) == keyid_of(engine_key):
        _fail(SameKeyError, "the engine key and the DPO key given are the same key")
    return engine_key, dpo_key, audit_key


def verify_bytes(data: bytes, engine_pub_pem: bytes, dpo_pub_pem: bytes | None, *,
                 require_dpo: bool = True, audit_pub_pem: bytes | None = None) -> VerifyResult:
    """`verify_pack` on the bytes of a pack."""
    import io

    engine_key, dpo_key, audit_key = _keys(engine_pub_pem, dpo_pub_pem, audit_pub_pem)
    return _run(io.BytesIO(data), engine_key, dpo_key, require_dpo, audit_key)


def verify_pack(pack_path: str | Path, engine_pub_pem: bytes, dpo_pub_pem: bytes | None, *,
                require_dpo: bool = True, audit_pub_pem: bytes | None = None) -> VerifyResult:
    """Run checks 1-8 on `proof.tar.gz` with the trusted keys given; raise the first `PackError`.
    The file is read as a stream (never whole into memory). With `require_dpo=False` a pack not yet
    attested passes on its engine signature alone; `audit_pub_pem` pins the store's audit checkpoint
    key (else the one in the pack is used)."""
    engine_key, dpo_key, audit_key = _keys(engine_pub_pem, dpo_pub_pem, audit_pub_pem)
    try:
        fh = open(pack_path, "rb")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise ArchiveError(f"cannot read the pack: {exc.strerror}") from exc
    with fh:
        try:
            return _run(fh, engine_key, dpo_key, require_dpo, audit_key)
        except OSError as exc:
            raise ArchiveError(f"cannot read the pack: {exc.strerror}") from exc


def verify_contents(data: bytes) -> VerifyResult:
    """Every check that needs no key (1, 3, 4, 5, 7, 8) on the bytes of a pack: it is whole and
    consistent, but its origin is NOT established. For showing a pack; never a verdict."""
    import io

    return _run(io.BytesIO(data), None, None, False)


# --- command line --------------------------------------------------------------------------------

def read_key(path: str | Path, role: str) -> bytes:
    """A key file's bytes, read up to `MAX_KEY_BYTES` (a device of endless bytes is refused)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise KeyArgumentError(f"cannot read the {role} key {path}: {exc.strerror}") from exc
    if len(data) > MAX_KEY_BYTES:
        _fail(KeyArgumentError, f"the {role} key {path} is larger than {MAX_KEY_BYTES} bytes: not a PEM public key")
    return data


def _say(line: str) -> None:
    sys.stdout.write(printable(line) + "\n")
    sys.stdout.flush()


def _backups_hook(pack: str, engine: bytes, json_out: bool) -> int | None:
    from proof.verify_backups import hook

    return hook(pack, engine, json_out)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m proof.verify PACK --engine-key PUB --dpo-key PUB [--json]`: prints OK or
    `FAIL: <check>: <why>`; exit 0 when the pack verifies, 1 when it does not, 2 on bad usage."""
    doc = __doc__ or "Offline verifier of an erasure proof pack."
    parser = argparse.ArgumentParser(prog="python -m proof.verify", description=doc.split("\n\n")[0])
    parser.add_argument("pack", help="the proof.tar.gz to verify")
    parser.add_argument("--engine-key", required=True, help="the engine's trusted public key (PEM)")
    parser.add_argument("--dpo-key", help="the DPO's trusted public key (PEM); required unless --no-dpo")
    parser.add_argument("--no-dpo", action="store_true",
                        help="accept a pack the DPO has not attested yet (its engine signature only)")
    parser.add_argument("--audit-key", help="the store's audit checkpoint public key (PEM; `erasure keys audit`"
                        " prints it, `erasure export` ships it as audit.pub.pem); required unless --no-audit-key")
    parser.add_argument("--no-audit-key", action="store_true",
                        help="check the audit checkpoints against the key the pack itself names (NOT pinned:"
                             " whoever re-signs the pack can re-sign the checkpoints too)")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of one line")
    args = parser.parse_args(argv)
    if args.dpo_key is None and not args.no_dpo:
        parser.error("--dpo-key is required (or --no-dpo to check a pack awaiting attestation)")
    if args.audit_key is None and not args.no_audit_key:
        parser.error("--audit-key is required: the store's audit checkpoint public key (or --no-audit-key to"
                     " accept the key the pack names, which pins nothing)")
    try:
        with _checking(KeyArgumentError):
            engine = read_key(args.engine_key, "engine")
            dpo = read_key(args.dpo_key, "DPO") if args.dpo_key else None
            audit = read_key(args.audit_key, "audit") if args.audit_key else None
        result = verify_pack(args.pack, engine, dpo, require_dpo=not args.no_dpo, audit_pub_pem=audit)
    except PackError as exc:
        if args.json:
            _say(json.dumps({"ok": False, "check": exc.check, "error": str(exc)}, sort_keys=True))
        else:
            _say(f"FAIL: {exc.check}: {exc}")
        return 1
    if (followup := _backups_hook(args.pack, engine, args.json)) is not None:  # hook (issue 26): follow-up
        return followup
    if args.json:
        _say(json.dumps({"ok": True, **result.as_dict()}, sort_keys=True))
    else:
        _say(result.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
