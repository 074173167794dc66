"""The verification of a pack, step by step: each check returns what the next needs or raises its
`PackError`; the first that fails ends the verification.

 0 keys           KeyArgumentError  the trusted keys given (`envelopes`): ECDSA P-256 or Ed25519 PEM
 1 archive        ArchiveError      one gzip member, one ustar stream as the writer writes it, exactly
                                    the files manifest.json lists (`archive`)
 2 signature      SignatureError    each envelope in canonical form, signed by the GIVEN key over the
                                    DSSE PAE (`envelopes`); with a keyring, the key the envelope names,
                                    of its role, valid at the statement's signing time (`keyring`)
 3 statement      StatementError    in-toto Statement v1, our predicate types, well-formed predicates
                                    naming the given keys (`envelopes`)
 4 subjects       SubjectError      the statements cover exactly the files, by sha256 (`digests`)
 5 checksums      ChecksumError     manifest.json and SHA256SUMS agree with the files (`digests`)
 6 distinct-keys  SameKeyError      the engine key and the DPO key differ
 7 audit-log      AuditLogError     the audit-log redaction evidence: signed checkpoints, Merkle
                                    consistency and inclusion, only the subject's redactions (`audit`)
 8 consistency    ConsistencyError  the claims follow from the step records and the probes by the
                                    wire's status rules (`consistency`)
 9 timestamp      TimestampError    with a pinned TSA root: each envelope's RFC 3161 token covers its
                                    signature, chains to the root, and its time lies within the run
                                    (`timestamp`); without one, tokens are NOT checked, and the result
                                    says so
10 reverify       ReverifyError     re-verification statements given beside the pack: signed by the
                                    engine key, naming this pack, all clear, one chain without a gap
                                    (`reverify`; run by the command line after 1-9)

Trusted public keys come from the caller (single keys, or a keyring), never from the pack. Without a
DPO key (`require_dpo=False`), a DPO envelope in the pack is NOT checked and the result says so.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from proof.verify.archive import MAX_PACK_BYTES, Unpacked, check_file_set, unpack
from proof.verify.audit import check_audit_log
from proof.verify.consistency import check_consistency
from proof.verify.digests import check_checksums, check_subjects
from proof.verify.envelopes import (
    DPO_FIELDS,
    ENGINE_FIELDS,
    PublicKey,
    check_signature,
    check_statement,
    load_public_key,
    unverified_payload,
)
from proof.verify.errors import (
    ArchiveError,
    AuditLogError,
    ChecksumError,
    ConsistencyError,
    KeyArgumentError,
    SameKeyError,
    SignatureError,
    StatementError,
    SubjectError,
    TimestampError,
    checking,
    fail,
)
from proof.verify.files import open_regular
from proof.verify.keyring import Keyring, check_validity, keys_for, parse_keyring
from proof.verify.timestamp import check_timestamps, load_roots
from wire.explain import exception_line
from wire.format import (
    AUDIT,
    DPO_ENVELOPE,
    DPO_PREDICATE,
    ENGINE_ENVELOPE,
    ERASURE_PREDICATE,
    MANIFEST,
    PACK_FILE,
    SIGNATURES_DIR,
    keyid_of,
    sha256_hex,
)


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
    timestamps: str = "engine clock"
    """Check 9: `verified` (RFC 3161 tokens checked against the pinned TSA root), `not checked` (tokens
    in the pack, no TSA root given) or `engine clock` (no token: the pack's times are the engine's own)."""
    engine_timestamp: str | None = None
    dpo_timestamp: str | None = None
    """The genTimes of the engine's and the DPO's tokens (YYYY-MM-DDTHH:MM:SS[.ffffff]Z) once verified."""
    exceptions: tuple[str, ...] = ()
    """The pack's open exceptions, one `tier: kind (item): sentence` each (`explain.exception_line`)."""
    previous_pack: str | None = None
    """A rerun's pack names the request's pack before it (manifest.json `previous_pack`: that pack's
    name); None for a request's first pack."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        d = asdict(self)
        d["checks"] = list(self.checks)
        return d

    def line(self) -> str:
        """The one line `main` prints for a pack that verified."""
        notes = []
        if self.dpo_attestation == "not checked":
            notes.append(
                "engine signature and contents; the DPO attestation in the pack was NOT checked:"
                " give --dpo-key to check it"
            )
        if not self.audit_key_pinned:
            notes.append("the audit checkpoint key was NOT pinned: give --audit-key to check it")
        if self.previous_pack is not None:
            notes.append(f"a rerun's pack: it follows the request's earlier pack {self.previous_pack[:16]}...")
        if self.timestamps == "not checked":
            notes.append("the RFC 3161 timestamps were NOT checked: give --tsa-root to check them")
        said = "OK" + (f" ({'; '.join(notes)})" if notes else "")
        if self.exceptions:  # the status the signatures vouch for, and what each exception means
            said += f": status {self.status}, {len(self.exceptions)} exception(s): " + " | ".join(self.exceptions)
        return said


def _run(
    raw: IO[bytes],
    engine_key: PublicKey | None,
    dpo_key: PublicKey | None,
    require_dpo: bool,
    audit_key: Ed25519PublicKey | None = None,
    ring: Keyring | None = None,
    tsa_roots: list[x509.Certificate] | None = None,
) -> VerifyResult:
    with checking(ArchiveError):
        pack = unpack(raw)
    if ring is None:
        return _checks(pack, [], engine_key, dpo_key, require_dpo, audit_key, tsa_roots)
    envelopes = {n: pack.files[n].data for n in (ENGINE_ENVELOPE, DPO_ENVELOPE) if n in pack.files}
    with checking(SignatureError):  # 2 signature, with a keyring: the keys the envelopes name
        engine_entry, dpo_entry = keys_for(ring, envelopes, require_dpo)
    result = _checks(
        pack, [], engine_entry.key, dpo_entry.key if dpo_entry else None, require_dpo, audit_key, tsa_roots
    )
    with checking(SignatureError):  # ... each valid at its statement's signing time
        check_validity(engine_entry, envelopes[ENGINE_ENVELOPE], ENGINE_ENVELOPE)
        if dpo_entry is not None:
            check_validity(dpo_entry, envelopes[DPO_ENVELOPE], DPO_ENVELOPE)
    return replace(result, checks=(*result.checks, KEY_VALIDITY_CHECK))


def _checks(
    pack: Unpacked,
    checks: list[str],
    engine_key: PublicKey | None,
    dpo_key: PublicKey | None,
    require_dpo: bool,
    audit_key: Ed25519PublicKey | None,
    tsa_roots: list[x509.Certificate] | None = None,
) -> VerifyResult:
    files = pack.files
    # 1 archive (completeness: its safety part ran while unpacking)
    with checking(ArchiveError):
        manifest = check_file_set(
            pack.top, set(files), files[MANIFEST].data if MANIFEST in files else None, require_dpo=require_dpo
        )
    previous = _previous_pack(manifest)
    checks.append(ArchiveError.check)
    # 2 signature (without an engine key: the payload only, for showing a pack)
    has_dpo = DPO_ENVELOPE in files
    with checking(SignatureError):
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
            fail(KeyArgumentError, "no DPO key was given to check the DPO's attestation")
    if engine_key is not None:
        checks.append(SignatureError.check)
    # 3 statement
    with checking(StatementError):
        statement = check_statement(e_type, e_payload, ENGINE_ENVELOPE, ERASURE_PREDICATE, ENGINE_FIELDS)
        predicate = statement["predicate"]
        if predicate["engine_keyid"] != engine_keyid:
            fail(StatementError, "the engine statement names another engine key")
        dpo_statement = dpo_predicate = None
        dpo_keyid = keyid_of(dpo_key) if dpo_key is not None and d_payload is not None else None
        if d_payload is not None:
            dpo_statement = check_statement(*d_payload, DPO_ENVELOPE, DPO_PREDICATE, DPO_FIELDS)
            dpo_predicate = dpo_statement["predicate"]
            if dpo_predicate["dpo_keyid"] != dpo_keyid or dpo_predicate["engine_keyid"] != engine_keyid:
                fail(StatementError, "the DPO statement names other keys than the ones given")
    checks.append(StatementError.check)
    # 4 subjects
    with checking(SubjectError):
        digests = {name: blob.sha256 for name, blob in files.items()}
        covered = {p for p in files if not p.startswith(SIGNATURES_DIR)}
        check_subjects(statement, digests, covered, ENGINE_ENVELOPE)
        if dpo_statement is not None:
            check_subjects(dpo_statement, digests, covered | {ENGINE_ENVELOPE}, DPO_ENVELOPE)
    checks.append(SubjectError.check)
    # 5 checksums
    with checking(ChecksumError):
        check_checksums(manifest, files, engine_keyid)
    checks.append(ChecksumError.check)
    # 6 distinct-keys
    if dpo_keyid is not None:
        if dpo_keyid == engine_keyid:
            fail(SameKeyError, "the DPO attestation is signed with the engine's key")
        checks.append(SameKeyError.check)
    # 7 audit-log
    with checking(AuditLogError):
        audit = check_audit_log(files[AUDIT].data, audit_key)
    checks.append(AuditLogError.check)
    # 8 consistency
    with checking(ConsistencyError):
        check_consistency(lambda name: files[name].data, manifest, predicate, dpo_predicate, audit)
    checks.append(ConsistencyError.check)
    # 9 timestamp
    with checking(TimestampError):
        stamps = check_timestamps({n: b.data for n, b in files.items()}, manifest, tsa_roots, predicate, dpo_predicate)
    if stamps.state == "verified":
        checks.append(TimestampError.check)
    attestation = "verified" if dpo_predicate is not None else ("not checked" if has_dpo else "absent")
    return VerifyResult(
        request_id=predicate["request_id"],
        status=predicate["status"],
        all_clear=predicate["all_clear"],
        engine_keyid=engine_keyid,
        dpo_keyid=dpo_keyid,
        files=len(files),
        checks=tuple(checks),
        signatures_verified=engine_key is not None,
        dpo_attestation=attestation,
        attested_at=dpo_predicate["attested_at"] if dpo_predicate is not None else None,
        pack_name=sha256_hex(e_payload),
        audit_key_pinned=audit_key is not None or audit.no_audit_log_for is not None,
        timestamps=stamps.state,
        engine_timestamp=stamps.engine_time,
        dpo_timestamp=stamps.dpo_time,
        exceptions=tuple(exception_line(e) for e in predicate["exceptions"]),
        previous_pack=previous,
    )


def _previous_pack(manifest: dict[str, Any]) -> str | None:
    """The name of the pack before this one, as manifest.json gives it (check 1: well-formed or absent)."""
    if "previous_pack" not in manifest:
        return None
    prev = manifest["previous_pack"]
    name = prev.get("pack_name") if isinstance(prev, dict) else None
    if (
        not isinstance(prev, dict)
        or set(prev) != {"file", "pack_name"}
        or not isinstance(prev["file"], str)
        or PACK_FILE.fullmatch(prev["file"]) is None
        or not isinstance(name, str)
        or len(name) != 64
        or any(c not in "0123456789abcdef" for c in name)
    ):
        fail(ArchiveError, "manifest.json names its previous pack in a form the writer never writes")
    return name


KEY_VALIDITY_CHECK = "key-validity"
"""The name a keyring's validity check adds to `VerifyResult.checks` (its failures are `signature`)."""


def _keyring(data: bytes | None, engine_pub_pem: bytes | None, dpo_pub_pem: bytes | None) -> Keyring | None:
    """The keyring given, if any: never together with single keys; without it an engine key is needed."""
    if data is None:
        if engine_pub_pem is None:
            fail(KeyArgumentError, "no engine key and no keyring was given")
        return None
    if engine_pub_pem is not None or dpo_pub_pem is not None:
        fail(KeyArgumentError, "give either a keyring or single engine and DPO keys, not both")
    with checking(KeyArgumentError):
        return parse_keyring(data)


def _keys(
    engine_pub_pem: bytes | None, dpo_pub_pem: bytes | None, audit_pub_pem: bytes | None
) -> tuple[PublicKey | None, PublicKey | None, Ed25519PublicKey | None]:
    with checking(KeyArgumentError):
        engine_key = load_public_key(engine_pub_pem, "engine") if engine_pub_pem is not None else None
        dpo_key = load_public_key(dpo_pub_pem, "DPO") if dpo_pub_pem is not None else None
        audit_key = load_public_key(audit_pub_pem, "audit") if audit_pub_pem is not None else None
    if audit_key is not None and not isinstance(audit_key, Ed25519PublicKey):
        fail(KeyArgumentError, "the audit key is not an Ed25519 key")
    if dpo_key is not None and engine_key is not None and keyid_of(dpo_key) == keyid_of(engine_key):
        fail(SameKeyError, "the engine key and the DPO key given are the same key")
    return engine_key, dpo_key, audit_key


def _tsa_roots(tsa_root_pem: bytes | None) -> list[x509.Certificate] | None:
    if tsa_root_pem is None:
        return None
    with checking(KeyArgumentError):
        return load_roots(tsa_root_pem)


def verify_bytes(
    data: bytes,
    engine_pub_pem: bytes | None,
    dpo_pub_pem: bytes | None,
    *,
    require_dpo: bool = True,
    audit_pub_pem: bytes | None = None,
    keyring: bytes | None = None,
    tsa_root_pem: bytes | None = None,
) -> VerifyResult:
    """`verify_pack` on the bytes of a pack."""
    ring = _keyring(keyring, engine_pub_pem, dpo_pub_pem)
    engine_key, dpo_key, audit_key = _keys(engine_pub_pem, dpo_pub_pem, audit_pub_pem)
    roots = _tsa_roots(tsa_root_pem)
    return _run(io.BytesIO(data), engine_key, dpo_key, require_dpo, audit_key, ring, roots)


def verify_pack(
    pack_path: str | Path,
    engine_pub_pem: bytes | None,
    dpo_pub_pem: bytes | None,
    *,
    require_dpo: bool = True,
    audit_pub_pem: bytes | None = None,
    keyring: bytes | None = None,
    tsa_root_pem: bytes | None = None,
) -> VerifyResult:
    """Run checks 1-9 on `proof.tar.gz` with the trusted keys given; raise the first `PackError`.
    The file is read as a stream (never whole into memory). With `require_dpo=False` a pack not yet
    attested passes on its engine signature alone; `audit_pub_pem` pins the store's audit checkpoint
    key (else the one in the pack is used). `keyring` (a keyring file's bytes) replaces the engine
    and DPO keys: each envelope's key is taken from it by keyid and must have been valid when it signed.
    `tsa_root_pem` pins the TSA root(s) the RFC 3161 tokens must chain to (without it they are not
    checked)."""
    ring = _keyring(keyring, engine_pub_pem, dpo_pub_pem)
    engine_key, dpo_key, audit_key = _keys(engine_pub_pem, dpo_pub_pem, audit_pub_pem)
    roots = _tsa_roots(tsa_root_pem)
    fh = open_regular(pack_path, MAX_PACK_BYTES, "the pack", ArchiveError)
    with fh:
        try:
            return _run(fh, engine_key, dpo_key, require_dpo, audit_key, ring, roots)
        except OSError as exc:
            raise ArchiveError(f"cannot read the pack: {exc.strerror}") from exc


def verify_contents(data: bytes) -> VerifyResult:
    """Every check that needs no key (1, 3, 4, 5, 7, 8) on the bytes of a pack: it is whole and
    consistent, but its origin is NOT established. For showing a pack; never a verdict."""
    return _run(io.BytesIO(data), None, None, False)
