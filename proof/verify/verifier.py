"""The verification of a pack, step by step: `Verifier(trust)` runs the numbered steps of `STEPS` in
order over one `_State`; each step reads what the steps before it left, adds its own, and returns or
raises its `PackError`; the first that fails ends the verification (the error's `step` says which).

 0 keys             KeyArgumentError  the trust itself (`Trust.from_pem`, before any step): ECDSA P-256
                                      or Ed25519 PEM keys or a keyring, never both; a DPO key when the
                                      DPO's attestation is required
 1 archive          ArchiveError      one gzip member, one ustar stream as the writer writes it, exactly
                                      the files manifest.json lists (`archive`)
 2 signature        SignatureError    each envelope in canonical form, signed by the GIVEN key over the
                                      DSSE PAE (`envelopes`); with a keyring, the key the envelope names,
                                      of its role (`keyring`)
 3 statement        StatementError    in-toto Statement v1, our predicate types, well-formed predicates
                                      naming the given keys (`envelopes`)
 4 subjects         SubjectError      the statements cover exactly the files, by sha256 (`digests`)
 5 checksums        ChecksumError     manifest.json and SHA256SUMS agree with the files (`digests`)
 6 distinct-keys    SameKeyError      the engine key and the DPO key differ
 7 audit-log        AuditLogError     the audit-log redaction evidence: signed checkpoints, Merkle
                                      consistency and inclusion, only the subject's redactions (`audit`)
 8 consistency      ConsistencyError  the claims follow from the step records and the probes by the
                                      wire's status rules (`consistency`)
 9 timestamp        TimestampError    with a pinned TSA root: each envelope's RFC 3161 token covers its
                                      signature, chains to the root, and its time lies within the run
                                      (`timestamp`); without one, tokens are NOT checked, and the result
                                      says so
10 key-validity     SignatureError    with a keyring: each envelope's key was valid at its statement's
                                      signing time (`keyring`)
11 reverify         ReverifyError     re-verification statements given beside the pack: signed by the
                                      engine key, naming this pack, all clear, one chain without a gap
                                      (`reverify`)
12 backups-followup FollowupError     the backups follow-up statement given beside the pack: signed by
                                      the engine key, over this pack, no backup holds the subject
                                      (`backups`)

A step whose check ran in full adds its name to `VerifyResult.checks` (signature only with a trusted
key, distinct-keys only with a DPO key, timestamp only with a TSA root, key-validity only with a
keyring); steps 11 and 12 report apart (`reverified`, `followup`), as the command line always has.
Trusted public keys come from the caller (`Trust`: single keys, or a keyring), never from the pack.
Without a DPO key (`require_dpo=False`), a DPO envelope in the pack is NOT checked and the result says so.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from proof.verify import backups, reverify
from proof.verify.archive import MAX_PACK_BYTES, Blob, check_file_set, unpack
from proof.verify.audit import AuditSummary, check_audit_log
from proof.verify.backups import FollowupError
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
    PackError,
    ReverifyError,
    SameKeyError,
    SignatureError,
    StatementError,
    SubjectError,
    TimestampError,
    checking,
    fail,
)
from proof.verify.files import open_regular
from proof.verify.keyring import KeyEntry, Keyring, check_validity, followup_key, keys_for, parse_keyring
from proof.verify.reverify import Reverified
from proof.verify.timestamp import Timestamps, check_timestamps, load_roots
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
    reverified: tuple[Reverified, ...] = ()
    """Step 11: the re-verification statements given, in chain order (reported apart: `reverify.as_dict`)."""
    followup: str | None = None
    """Step 12: the note of the backups follow-up given, when one was (reported apart)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (of checks 1-10: steps 11 and 12 are reported apart)."""
        d = asdict(self)
        d["checks"] = list(self.checks)
        del d["reverified"], d["followup"]
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


@dataclass(frozen=True)
class Trust:
    """What the verifier trusts, given by its caller and never taken from a pack: the engine and DPO
    keys, or a keyring instead of both; the audit checkpoint key (None: the one the pack names, NOT
    pinned); the TSA root(s) (None: timestamps NOT checked); whether the DPO's attestation is required.
    Build it once (`from_pem`, which checks the keys: check 0) and verify any number of packs with it.
    With neither engine key nor keyring (`CONTENTS_ONLY`) no signature is checked."""

    engine_key: PublicKey | None = None
    dpo_key: PublicKey | None = None
    keyring: Keyring | None = None
    audit_key: Ed25519PublicKey | None = None
    tsa_roots: tuple[x509.Certificate, ...] | None = None
    require_dpo: bool = True

    @classmethod
    def from_pem(
        cls,
        engine_pub_pem: bytes | None,
        dpo_pub_pem: bytes | None,
        *,
        require_dpo: bool = True,
        audit_pub_pem: bytes | None = None,
        keyring: bytes | None = None,
        tsa_root_pem: bytes | None = None,
    ) -> Trust:
        """The trust from PEM (and keyring file) bytes; `KeyArgumentError` (or `SameKeyError` for one key
        given twice) when they are unusable. `keyring` replaces the engine and DPO keys."""
        ring = _keyring(keyring, engine_pub_pem, dpo_pub_pem)
        engine_key, dpo_key, audit_key = _keys(engine_pub_pem, dpo_pub_pem, audit_pub_pem)
        if require_dpo and ring is None and dpo_key is None:
            fail(KeyArgumentError, "no DPO key was given to check the DPO's attestation")
        roots = None if tsa_root_pem is None else tuple(_tsa_roots(tsa_root_pem))
        return cls(engine_key, dpo_key, ring, audit_key, roots, require_dpo)


CONTENTS_ONLY = Trust(require_dpo=False)
"""No key at all: every check that needs none (1, 3, 4, 5, 7, 8). For showing a pack; never a verdict."""


@dataclass
class _State:
    """What the steps of one verification share: the input, then what each step established."""

    trust: Trust
    raw: IO[bytes]
    pack_path: Path | None = None
    statements: Sequence[str | Path] = ()
    followup_path: Path | None = None
    checks: list[str] = field(default_factory=list)
    top: str = ""
    files: dict[str, Blob] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    previous: str | None = None
    engine_entry: KeyEntry | None = None
    dpo_entry: KeyEntry | None = None
    engine_key: PublicKey | None = None
    dpo_key: PublicKey | None = None
    engine_keyid: str = ""
    e_type: str = ""
    e_payload: bytes = b""
    d_payload: tuple[str, bytes] | None = None
    statement: dict[str, Any] = field(default_factory=dict)
    predicate: dict[str, Any] = field(default_factory=dict)
    dpo_statement: dict[str, Any] | None = None
    dpo_predicate: dict[str, Any] | None = None
    dpo_keyid: str | None = None
    audit: AuditSummary | None = None
    stamps: Timestamps | None = None
    beside_key: PublicKey | None = None
    reverified: tuple[Reverified, ...] = ()
    followup: str | None = None

    def result(self) -> VerifyResult:
        """The result of a verification whose every step passed."""
        assert self.audit is not None and self.stamps is not None
        has_dpo = DPO_ENVELOPE in self.files
        attestation = "verified" if self.dpo_predicate is not None else ("not checked" if has_dpo else "absent")
        return VerifyResult(
            request_id=self.predicate["request_id"],
            status=self.predicate["status"],
            all_clear=self.predicate["all_clear"],
            engine_keyid=self.engine_keyid,
            dpo_keyid=self.dpo_keyid,
            files=len(self.files),
            checks=tuple(self.checks),
            signatures_verified=self.engine_key is not None,
            dpo_attestation=attestation,
            attested_at=self.dpo_predicate["attested_at"] if self.dpo_predicate is not None else None,
            pack_name=sha256_hex(self.e_payload),
            audit_key_pinned=self.trust.audit_key is not None or self.audit.no_audit_log_for is not None,
            timestamps=self.stamps.state,
            engine_timestamp=self.stamps.engine_time,
            dpo_timestamp=self.stamps.dpo_time,
            exceptions=tuple(exception_line(e) for e in self.predicate["exceptions"]),
            previous_pack=self.previous,
            reverified=self.reverified,
            followup=self.followup,
        )


def _archive(s: _State) -> bool:
    """1: unpack (its safety part), then the file set against the manifest."""
    pack = unpack(s.raw)
    s.top, s.files = pack.top, pack.files
    data = s.files[MANIFEST].data if MANIFEST in s.files else None
    s.manifest = check_file_set(s.top, set(s.files), data, require_dpo=s.trust.require_dpo)
    s.previous = _previous_pack(s.manifest)
    return True


def _signature(s: _State) -> bool:
    """2: each envelope's signature by its trusted key (with a keyring: the key it names); without an
    engine key, the payload only (for showing a pack)."""
    files, trust = s.files, s.trust
    if trust.keyring is not None:
        envelopes = {n: files[n].data for n in (ENGINE_ENVELOPE, DPO_ENVELOPE) if n in files}
        s.engine_entry, s.dpo_entry = keys_for(trust.keyring, envelopes, trust.require_dpo)
        s.engine_key, s.dpo_key = s.engine_entry.key, s.dpo_entry.key if s.dpo_entry else None
    else:
        s.engine_key, s.dpo_key = trust.engine_key, trust.dpo_key
    if s.engine_key is not None:
        s.e_type, s.e_payload = check_signature(files[ENGINE_ENVELOPE].data, ENGINE_ENVELOPE, s.engine_key, "engine")
        s.engine_keyid = keyid_of(s.engine_key)
    else:
        s.e_type, s.e_payload, claimed = unverified_payload(files[ENGINE_ENVELOPE].data, ENGINE_ENVELOPE)
        s.engine_keyid = claimed or ""
    if DPO_ENVELOPE in files and s.dpo_key is not None:
        s.d_payload = check_signature(files[DPO_ENVELOPE].data, DPO_ENVELOPE, s.dpo_key, "DPO")
    elif trust.require_dpo:  # only a Trust built by hand gets here (`from_pem` and `keys_for` refuse sooner)
        fail(KeyArgumentError, "no DPO key was given to check the DPO's attestation")
    return s.engine_key is not None


def _statement(s: _State) -> bool:
    """3: the statements' types and predicates, naming the keys given."""
    s.statement = check_statement(s.e_type, s.e_payload, ENGINE_ENVELOPE, ERASURE_PREDICATE, ENGINE_FIELDS)
    s.predicate = s.statement["predicate"]
    if s.predicate["engine_keyid"] != s.engine_keyid:
        fail(StatementError, "the engine statement names another engine key")
    s.dpo_keyid = keyid_of(s.dpo_key) if s.dpo_key is not None and s.d_payload is not None else None
    if s.d_payload is not None:
        s.dpo_statement = check_statement(*s.d_payload, DPO_ENVELOPE, DPO_PREDICATE, DPO_FIELDS)
        s.dpo_predicate = s.dpo_statement["predicate"]
        if s.dpo_predicate["dpo_keyid"] != s.dpo_keyid or s.dpo_predicate["engine_keyid"] != s.engine_keyid:
            fail(StatementError, "the DPO statement names other keys than the ones given")
    return True


def _subjects(s: _State) -> bool:
    """4: the statements cover exactly the files."""
    digests = {name: blob.sha256 for name, blob in s.files.items()}
    covered = {p for p in s.files if not p.startswith(SIGNATURES_DIR)}
    check_subjects(s.statement, digests, covered, ENGINE_ENVELOPE)
    if s.dpo_statement is not None:
        check_subjects(s.dpo_statement, digests, covered | {ENGINE_ENVELOPE}, DPO_ENVELOPE)
    return True


def _checksums(s: _State) -> bool:
    """5: manifest.json and SHA256SUMS against the files."""
    check_checksums(s.manifest, s.files, s.engine_keyid)
    return True


def _distinct_keys(s: _State) -> bool:
    """6: the DPO did not sign with the engine's key (checked when a DPO key was)."""
    if s.dpo_keyid is None:
        return False
    if s.dpo_keyid == s.engine_keyid:
        fail(SameKeyError, "the DPO attestation is signed with the engine's key")
    return True


def _audit_log(s: _State) -> bool:
    """7: the audit-log redaction evidence."""
    s.audit = check_audit_log(s.files[AUDIT].data, s.trust.audit_key)
    return True


def _consistency(s: _State) -> bool:
    """8: the claims follow from the records."""
    assert s.audit is not None
    files = s.files
    check_consistency(lambda name: files[name].data, s.manifest, s.predicate, s.dpo_predicate, s.audit)
    return True


def _timestamp(s: _State) -> bool:
    """9: the RFC 3161 tokens, against the pinned TSA root(s) when there are any."""
    roots = None if s.trust.tsa_roots is None else list(s.trust.tsa_roots)
    data = {n: b.data for n, b in s.files.items()}
    s.stamps = check_timestamps(data, s.manifest, roots, s.predicate, s.dpo_predicate)
    return s.stamps.state == "verified"


def _key_validity(s: _State) -> bool:
    """10: with a keyring, each envelope's key was valid at its statement's signing time."""
    if s.engine_entry is None:
        return False
    check_validity(s.engine_entry, s.files[ENGINE_ENVELOPE].data, ENGINE_ENVELOPE)
    if s.dpo_entry is not None:
        check_validity(s.dpo_entry, s.files[DPO_ENVELOPE].data, DPO_ENVELOPE)
    return True


def _key_beside(s: _State) -> PublicKey:
    """The engine key of what is given beside the pack: the pack's own, or with a keyring the key that
    signed the backups follow-up, when one is given (it may be signed long after the pack, by a later
    engine key, valid at its `stated_at`: else `SignatureError`)."""
    if s.beside_key is None:
        entry = None
        if s.trust.keyring is not None and s.followup_path is not None:
            entry = followup_key(s.trust.keyring, s.followup_path)
        key = entry.key if entry is not None else s.engine_key
        if key is None:
            fail(KeyArgumentError, "no engine key and no keyring was given")
        s.beside_key = key
    return s.beside_key


def _reverify(s: _State) -> bool:
    """11: the re-verification statements given, one chain from this pack."""
    if not s.statements:
        return False
    key = _key_beside(s)
    given = reverify.read_statements(s.statements)
    out = reverify.check_reverifications(given, key, s.predicate["request_id"], sha256_hex(s.e_payload))
    s.reverified = tuple(out)
    return False


def _backups_followup(s: _State) -> bool:
    """12: the backups follow-up statement given, over this pack's file."""
    if s.followup_path is None or s.pack_path is None:
        return False
    pem = _key_beside(s).public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    try:
        pred = backups.verify_followup(s.pack_path, s.followup_path, pem)
    except (OSError, ValueError) as exc:
        raise FollowupError(str(exc)) from exc
    s.followup = backups.note(pred)
    return False


@dataclass(frozen=True)
class Step:
    """One numbered check: `run` reads and extends the state, returns whether its check ran in full
    (its name then goes into `VerifyResult.checks`), or raises `error` (its safety net's class)."""

    number: int
    name: str
    error: type[PackError]
    run: Callable[[_State], bool]


STEPS: tuple[Step, ...] = (
    Step(1, ArchiveError.check, ArchiveError, _archive),
    Step(2, SignatureError.check, SignatureError, _signature),
    Step(3, StatementError.check, StatementError, _statement),
    Step(4, SubjectError.check, SubjectError, _subjects),
    Step(5, ChecksumError.check, ChecksumError, _checksums),
    Step(6, SameKeyError.check, SameKeyError, _distinct_keys),
    Step(7, AuditLogError.check, AuditLogError, _audit_log),
    Step(8, ConsistencyError.check, ConsistencyError, _consistency),
    Step(9, TimestampError.check, TimestampError, _timestamp),
    Step(10, "key-validity", SignatureError, _key_validity),
    Step(11, ReverifyError.check, ReverifyError, _reverify),
    Step(12, FollowupError.check, FollowupError, _backups_followup),
)
"""Every check after the trust's (check 0, `Trust.from_pem`), in the order it runs."""

KEY_VALIDITY_CHECK = STEPS[9].name
"""The name a keyring's validity check adds to `VerifyResult.checks` (its failures are `signature`)."""


@dataclass(frozen=True)
class Verifier:
    """Verifies packs against one `Trust`: `Verifier(trust).verify(pack)`; the trust is checked once,
    when it is built, and serves any number of packs."""

    trust: Trust

    def verify(
        self, pack_path: str | Path, *, statements: Sequence[str | Path] = (), followup: str | Path | None = None
    ) -> VerifyResult:
        """Run every step on the pack file (read as a stream, never whole into memory), with the
        re-verification statement files and the backups follow-up file given beside it (none: steps 11
        and 12 check nothing); raise the first step's `PackError`."""
        fh = open_regular(pack_path, MAX_PACK_BYTES, "the pack", ArchiveError)
        with fh:
            try:
                return self._run(fh, Path(pack_path), statements, None if followup is None else Path(followup))
            except OSError as exc:
                raise ArchiveError(f"cannot read the pack: {exc.strerror}") from exc

    def verify_bytes(self, data: bytes, *, statements: Sequence[str | Path] = ()) -> VerifyResult:
        """`verify` on the bytes of a pack (no backups follow-up: it is over a pack's file)."""
        return self._run(io.BytesIO(data), None, statements, None)

    def _run(
        self, raw: IO[bytes], pack_path: Path | None, statements: Sequence[str | Path], followup: Path | None
    ) -> VerifyResult:
        s = _State(self.trust, raw, pack_path, statements, followup)
        for step in STEPS:
            try:
                with checking(step.error):
                    if step.run(s):
                        s.checks.append(step.name)
            except PackError as exc:
                exc.step = step.number
                raise
        return s.result()


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


def _tsa_roots(tsa_root_pem: bytes) -> list[x509.Certificate]:
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
    trust = Trust.from_pem(
        engine_pub_pem,
        dpo_pub_pem,
        require_dpo=require_dpo,
        audit_pub_pem=audit_pub_pem,
        keyring=keyring,
        tsa_root_pem=tsa_root_pem,
    )
    return Verifier(trust).verify_bytes(data)


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
    """Checks 0-10 on `proof.tar.gz` with the trusted keys given (`Trust.from_pem`), by `Verifier.verify`;
    raise the first `PackError`. With `require_dpo=False` a pack not yet attested passes on its engine
    signature alone; `audit_pub_pem` pins the store's audit checkpoint key (else the one in the pack is
    used). `keyring` (a keyring file's bytes) replaces the engine and DPO keys: each envelope's key is
    taken from it by keyid and must have been valid when it signed. `tsa_root_pem` pins the TSA root(s)
    the RFC 3161 tokens must chain to (without it they are not checked)."""
    trust = Trust.from_pem(
        engine_pub_pem,
        dpo_pub_pem,
        require_dpo=require_dpo,
        audit_pub_pem=audit_pub_pem,
        keyring=keyring,
        tsa_root_pem=tsa_root_pem,
    )
    return Verifier(trust).verify(pack_path)


def verify_contents(data: bytes) -> VerifyResult:
    """Every check that needs no key (1, 3, 4, 5, 7, 8) on the bytes of a pack: it is whole and
    consistent, but its origin is NOT established. For showing a pack; never a verdict."""
    return Verifier(CONTENTS_ONLY).verify_bytes(data)
