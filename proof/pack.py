"""The proof pack: write and sign it (engine) and attest it (DPO); `proof.review` summarises it for the DPO.

`write_pack` adds to `evidence/erasure/<request_id>/`: attestation.txt, manifest.json, SHA256SUMS
and signatures/engine.intoto.json, then packs everything into a reproducible proof.tar.gz.
`attest` adds signatures/dpo.intoto.json and rewrites proof.tar.gz. Every pack is checked with the
offline verifier (`proof.verify`) before it is written.

Trusted time: with a timestamp authority (`ERASURE_TSA_URL`, `proof.tsa`), manifest.json says
`time_source: rfc3161` and each envelope gets an RFC 3161 token over its signature beside it
(signatures/engine.tsr, signatures/dpo.tsr); without one it says `engine-clock`: the pack's times are
the engine's own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from erasure.errors import ConfigError, InputError, NotFound
from erasure.evidence_runs import current_run_dir
from proof import verify
from proof.attestation import render
from proof.dsse import sign_envelope
from proof.errors import AlreadyAttested, EvidenceInvalid, PackRejected, SameKeyRefused
from proof.evidence import EVIDENCE_ROLES, Evidence, load_evidence, scan_identifiers
from proof.history import PACK_NAME as PACK_NAME
from proof.history import next_target, run_of, sealed_again
from proof.keyring import check_signing_key, read_beside
from proof.keys import PrivateKey, algorithm_of, keyid, load_private_key, load_public_key, public_key_pem
from proof.statement import dpo_statement, erasure_statement, subjects
from proof.tarball import tar_gz_bytes, write_atomic
from proof.tsa import TimestampAuthority
from proof.verify.envelopes import check_signature
from proof.verify.signer import signing_request
from proof.verify.timestamp import TIMESTAMP_FILES, envelope_signature, parse_response
from wire.format import (
    ATTESTATION,
    AUDIT,
    AUDIT_NONE_FORMAT,
    DPO_ENVELOPE,
    DPO_PREDICATE,
    DPO_TSR,
    ENGINE_ENVELOPE,
    ENGINE_TSR,
    ERASURE_PREDICATE,
    MANIFEST,
    SIGNATURES_DIR,
    STATEMENT_TYPE,
    SUMS,
    TIME_SOURCE_ENGINE,
    TIME_SOURCE_RFC3161,
    all_clear_problems,
    envelope_bytes,
    overall_status,
    sha256_hex,
    tiers_table,
)

_CLOCK_SKEW = timedelta(minutes=5)
"""How far in the future a DPO's own clock may put their signing time."""
MANIFEST_FORMAT = "erasure-proof-manifest/v1"
DEFAULT_OUT_OF_SCOPE: tuple[str, ...] = (
    "backups and snapshots of the store taken before the erasure (they expire on their own schedule)",
    "replicas and copies not listed in the store configuration or the subprocessor inventory",
    "weights of models trained on the subject's data (flagged in the fine_tune tier, not retrained)",
    "data held by subprocessors beyond what their deletion receipts cover",
    "the storage medium under removed files: blob, corpus and session files are unlinked, not overwritten"
    " (on SSDs and journaling or copy-on-write filesystems an overwrite is not reliable); database pages are"
    " rebuilt and freed pages zeroed",
    "the engine's request vault, which keeps the identifiers named in the request as evidence of the"
    " request itself, for its retention period",
)


def tool_version() -> str:
    """The installed version of erasure-cascade (recorded in the manifest and the certificate)."""
    try:
        return metadata.version("erasure-cascade")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_predicate(ev: Evidence, engine_keyid: str, out_of_scope: Sequence[str]) -> dict[str, Any]:
    """The erasure-proof predicate, derived from the records (by the status rules of `wire.format`)."""
    probes, exceptions = ev.verification["probes"], ev.verification.get("exceptions", [])
    tiers = tiers_table(ev.steps, probes)
    all_clear = bool(ev.verification["all_clear"])
    status = overall_status(tiers, probes, all_clear, exceptions)
    return {
        "request_id": ev.request_id,
        "legal_basis": ev.request["legal_basis"],
        "received_at": ev.request["received_at"],
        "verified_at": ev.verification["verified_at"],
        "all_clear": all_clear,
        "status": status,
        "tiers": tiers,
        "exceptions": exceptions,
        "out_of_scope": list(out_of_scope),
        "engine_keyid": engine_keyid,
        "mentions": mentions_summary(ev.steps, exceptions),
    }


def mentions_summary(steps: Sequence[Mapping[str, Any]], exceptions: Sequence[Any]) -> dict[str, Any]:
    """Mentions of the subject in other people's items: redacted per tier (from the step records'
    `mentions_redacted`) and reported (open `mention_reported` exceptions). Counts only."""
    redacted: dict[str, int] = {}
    for s in steps:
        n = (s.get("detail") or {}).get("mentions_redacted", 0)
        if isinstance(n, int) and n > 0:
            redacted[str(s["step"])] = n
    reported = sorted(
        {str(e.get("tier")) for e in exceptions if isinstance(e, Mapping) and e.get("kind") == "mention_reported"}
    )
    return {"redacted": redacted, "reported_tiers": reported}


def _manifest(
    files: Mapping[str, bytes],
    predicate: Mapping[str, Any],
    algorithm: str,
    audit_format: Any,
    timestamped: bool,
    previous: Mapping[str, Any] | None = None,
) -> bytes:
    roles = {**EVIDENCE_ROLES, ATTESTATION: "attestation"}
    times: dict[str, Any] = (
        {"time_source": TIME_SOURCE_RFC3161, "timestamps": TIMESTAMP_FILES}
        if timestamped
        else {"time_source": TIME_SOURCE_ENGINE}
    )
    doc = {
        **times,
        "format": MANIFEST_FORMAT,
        "request_id": predicate["request_id"],
        "status": predicate["status"],
        "all_clear": predicate["all_clear"],
        "engine_keyid": predicate["engine_keyid"],
        "engine_key_algorithm": algorithm,
        "files": [
            {"path": name, "size": len(files[name]), "sha256": sha256_hex(files[name]), "role": roles[name]}
            for name in sorted(files)
        ],
        **({"previous_pack": dict(previous)} if previous is not None else {}),
        "signatures": {"engine": ENGINE_ENVELOPE, "dpo": DPO_ENVELOPE},
        "versions": {
            "tool": "erasure-cascade",
            "tool_version": tool_version(),
            "manifest": MANIFEST_FORMAT,
            "statement": STATEMENT_TYPE,
            "predicate": ERASURE_PREDICATE,
            "dpo_predicate": DPO_PREDICATE,
            "envelope": "DSSEv1",
            "audit_log_redaction": audit_format,
        },
    }
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode("utf-8")


def _sums(files: Mapping[str, bytes]) -> bytes:
    return "".join(f"{sha256_hex(files[n])}  {n}\n" for n in sorted(files)).encode("ascii")


def seal_files(
    evidence_files: Mapping[str, bytes],
    predicate: Mapping[str, Any],
    key: PrivateKey,
    *,
    timestamped: bool = False,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, bytes]:
    """Every file of an engine-signed pack from the evidence files and a predicate: adds the
    certificate, manifest.json, SHA256SUMS and the engine's envelope. Checks nothing. `timestamped`:
    the manifest says the envelopes get RFC 3161 tokens (the caller adds them). `previous`: the pack
    before this one (`proof.history`), named in the manifest."""
    files = dict(evidence_files)
    audit = json.loads(files[AUDIT]).get("format")
    files[ATTESTATION] = render(
        predicate, tool_version=tool_version(), timestamped=timestamped, audited=audit != AUDIT_NONE_FORMAT
    ).encode("utf-8")
    files[MANIFEST] = _manifest(files, predicate, algorithm_of(key), audit, timestamped, previous)
    files[SUMS] = _sums(files)
    files[ENGINE_ENVELOPE] = envelope_bytes(sign_envelope(erasure_statement(files, predicate), key))
    return files


def _keep_dpo(evidence_dir: Path, files: Mapping[str, bytes]) -> bytes | None:
    """A DPO envelope already in the dir, if it still covers exactly these files (a rerun that
    produced identical bytes); otherwise None: a stale attestation is dropped, never carried over."""
    path = evidence_dir / DPO_ENVELOPE
    if not path.is_file():
        return None
    data = path.read_bytes()
    try:
        _, payload, _ = verify.unverified_payload(data, DPO_ENVELOPE)
        subjects = json.loads(payload)["subject"]
        named = {s["name"]: s["digest"]["sha256"] for s in subjects}
    except (verify.PackError, ValueError, KeyError, TypeError):
        return None
    covered = {n: sha256_hex(b) for n, b in files.items() if not n.startswith(SIGNATURES_DIR) or n == ENGINE_ENVELOPE}
    return data if named == covered else None


def _kept_token(evidence_dir: Path, name: str, envelope: bytes) -> bytes | None:
    """A token already in the dir over this envelope's signature (a rerun that signed identical bytes
    keeps the earlier, truthful time); None otherwise."""
    path = evidence_dir / name
    if not path.is_file():
        return None
    data = path.read_bytes()
    try:
        token = parse_response(data)
    except (ValueError, IndexError):
        return None
    digest = hashlib.sha256(envelope_signature(envelope)).digest()
    return data if token.status in (0, 1) and token.imprint == digest else None


def _self_check(
    tar: bytes,
    engine_pem: bytes | None,
    dpo_pem: bytes | None,
    keyring: bytes | None = None,
    tsa: TimestampAuthority | None = None,
) -> None:
    root = tsa.root if tsa else None
    try:
        if engine_pem is not None:
            verify.verify_bytes(tar, engine_pem, dpo_pem, require_dpo=dpo_pem is not None, tsa_root_pem=root)
        if keyring is not None:  # and as a regulator who pinned the keyring will check it
            verify.verify_bytes(tar, None, None, require_dpo=dpo_pem is not None, keyring=keyring, tsa_root_pem=root)
    except verify.PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc


def write_pack(
    evidence_dir: Path,
    engine_key_path: Path,
    *,
    passphrase: str | bytes | None = None,
    out: Path | None = None,
    forbidden: Sequence[str] = (),
    out_of_scope: Sequence[str] = DEFAULT_OUT_OF_SCOPE,
    keyring: bytes | None = None,
    tsa: TimestampAuthority | Literal["env"] | None = "env",
) -> Path:
    """Derive the status per tier, sign with the engine key, write the request's next pack in its folder
    `evidence_dir` (`proof.history.next_target`: `proof.tar.gz`, or beside the sealed ones
    `proof-<n>.tar.gz`, never over them) from the loose files of its run (`proof.history.run_of`: the
    folder itself for the first, `run-<n>/` after), and the pack's loose files there too; or, with
    `out`, the pack at `out` from the files in `evidence_dir`. Returns the tar's path.

    `tsa` (default: the one `ERASURE_TSA_URL` names, if any) timestamps the engine's signature: its
    token goes beside the envelope; `TimestampFailed` if it cannot (no pack is written without it).

    `forbidden` are the subject's identifiers (in memory, from the vault): if any file would hold
    one, `IdentifierInPack` is raised before anything is written. `EvidenceInvalid` when evidence is
    missing or contradicts itself (e.g. all_clear with residue); `ConfigError` for an unusable key.
    With a keyring (`keyring`, else the one beside the key file) the key must be its current engine
    key, valid at verified_at (the statement's signing time), or `RetiredKey`; the pack is then also
    checked against the keyring before it is written.
    """
    evidence_dir = Path(evidence_dir)
    key = load_private_key(engine_key_path, passphrase)
    target, previous = (Path(out), None) if out is not None else next_target(evidence_dir)
    # The evidence is the current run's (`erasure.evidence_runs`); the pack's loose files go to the
    # folder of the run that writes this pack (`proof.history.run_of`), with a copy of the evidence
    # when that is a new one: a sealed run's folder is never written to again.
    run = evidence_dir if out is not None else run_of(target)
    ev = load_evidence(evidence_dir if out is not None else current_run_dir(evidence_dir))
    if ev.verification["all_clear"]:
        problems = all_clear_problems(ev.steps, ev.verification["probes"])
        if problems:
            raise EvidenceInvalid(f"verification.json says all clear, but {problems[0]}: pack not written")
    predicate = build_predicate(ev, keyid(key), out_of_scope)
    if ev.verification["all_clear"] and predicate["status"] == "notErased":
        bad = [t for t, row in predicate["tiers"].items() if row["status"] == "notErased"]
        raise EvidenceInvalid(f"verification.json says all clear, but tier {bad[0]} is not erased: pack not written")
    ring = keyring if keyring is not None else read_beside(Path(engine_key_path).parent)
    verified_at = verify.utc_time(ev.verification["verified_at"])
    if ring is not None and verified_at is None:
        raise EvidenceInvalid("verification.json: verified_at is not a UTC time: pack not written")
    check_signing_key(ring, key, "engine", verified_at or datetime.now(UTC))
    authority = TimestampAuthority.from_env() if tsa == "env" else tsa
    if out is None:

        def statement_for(prev: Mapping[str, Any] | None) -> bytes:
            built = seal_files(ev.files, predicate, key, timestamped=authority is not None, previous=prev)
            return erasure_statement(built, predicate)

        if (standing := sealed_again(evidence_dir, target, statement_for)) is not None:
            return standing  # an identical rerun: the sealed pack stands as it is
    files = seal_files(ev.files, predicate, key, timestamped=authority is not None, previous=previous)
    scan_identifiers({**files, "(signed statement)": erasure_statement(files, predicate)}, forbidden)
    if authority is not None:
        files[ENGINE_TSR] = _kept_token(run, ENGINE_TSR, files[ENGINE_ENVELOPE]) or authority.timestamp(
            envelope_signature(files[ENGINE_ENVELOPE])
        )
    dpo = _keep_dpo(run, files)
    dpo_token = _kept_token(run, DPO_TSR, dpo) if dpo is not None and authority is not None else None
    if dpo is not None and (authority is None or dpo_token is not None):
        files[DPO_ENVELOPE] = dpo
        if dpo_token is not None:
            files[DPO_TSR] = dpo_token
    tar = tar_gz_bytes(ev.request_id, files)
    _self_check(tar, public_key_pem(key.public_key()), None, ring, authority)
    for name, data in ev.files.items():  # a new run folder gets the evidence it was built from
        if not (run / name).is_file():
            write_atomic(run / name, data)
    for name in (ATTESTATION, MANIFEST, SUMS, ENGINE_ENVELOPE):
        write_atomic(run / name, files[name])
    for name in (ENGINE_TSR, DPO_ENVELOPE, DPO_TSR):
        if name in files:
            write_atomic(run / name, files[name])
        else:
            (run / name).unlink(missing_ok=True)  # the unsealed run's own stale signature, never a sealed run's
    write_atomic(target, tar)
    return target


def read_pack(pack_path: Path) -> bytes:
    """The pack file's bytes, read by the verifier's rules (`NotFound`, `PackRejected`)."""
    if not pack_path.is_file():
        raise NotFound(f"no proof pack at {pack_path}")
    try:
        return verify.read_pack(pack_path)
    except verify.PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def attest(
    pack_path: Path,
    dpo_key_path: Path,
    *,
    engine_pub: bytes | Path | None = None,
    passphrase: str | bytes | None = None,
    attested_at: str | None = None,
    force: bool = False,
    keyring: bytes | None = None,
    tsa: TimestampAuthority | Literal["env"] | None = "env",
) -> Path:
    """Sign the DPO's attestation over a pack and rewrite `pack_path` with it; return the path.

    A pack whose manifest says its times are RFC 3161 timestamps needs a timestamp authority (`tsa`,
    default the one `ERASURE_TSA_URL` names) for the DPO's signature too (`ConfigError` without one);
    a pack of the engine's clock gets no DPO token.

    With `engine_pub` (PEM bytes or a file) the pack must first verify under that engine key;
    without it, only its contents are checked. Refuses the engine's own key (`SameKeyRefused`) and
    an already attested pack unless `force` (`AlreadyAttested`). When `pack_path` sits in its
    evidence dir, signatures/dpo.intoto.json is written there too.

    With `keyring` (a keyring file's bytes) the pack is checked against it instead (or as well), and the
    DPO key must be the keyring's current DPO key, valid at `attested_at`; without it, a keyring beside
    the DPO key's file is used for that check (`RetiredKey` otherwise).
    """
    pack_path = Path(pack_path)
    key = load_private_key(dpo_key_path, passphrase)
    data = read_pack(pack_path)
    engine_pem = public_key_pem(load_public_key(engine_pub)) if engine_pub is not None else None
    try:
        result = (
            _engine_checked(data, engine_pem, keyring)
            if engine_pem is not None or keyring is not None
            else verify.verify_contents(data)
        )
    except verify.PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc
    dpo_keyid = keyid(key)
    if dpo_keyid == result.engine_keyid:
        raise SameKeyRefused(
            f"the DPO key {dpo_keyid[:16]}... is the engine's key: the DPO must attest with a key of their own"
        )
    top, files = verify.extract(data)
    when = attested_at or _now()
    at = verify.utc_time(when)
    verified = verify.utc_time(predicate_of(files[ENGINE_ENVELOPE], ENGINE_ENVELOPE).get("verified_at"))
    if at is None:
        raise InputError(f"attested_at {verify.printable(when)!r} is not a UTC time (YYYY-MM-DDTHH:MM:SSZ)")
    if verified is not None and at < verified.replace(microsecond=0):
        raise InputError(f"attested_at {when} is earlier than the verification the DPO attests")
    if DPO_ENVELOPE in files and not force:
        raise AlreadyAttested(f"{pack_path} is already attested: pass --force to replace the attestation")
    check_signing_key(keyring if keyring is not None else read_beside(Path(dpo_key_path).parent), key, "dpo", at)
    statement = dpo_statement(
        files,
        request_id=result.request_id,
        attested_at=when,
        dpo_keyid=dpo_keyid,
        engine_keyid=result.engine_keyid,
        status=result.status,
    )
    files[DPO_ENVELOPE] = envelope_bytes(sign_envelope(statement, key))
    authority = _stamp_dpo(files, tsa)
    tar = tar_gz_bytes(top, files)
    if engine_pem is not None or keyring is not None:
        _self_check(tar, engine_pem, public_key_pem(key.public_key()), keyring, authority)
    _write_attested(pack_path, tar, files)
    return pack_path


def _stamp_dpo(files: dict[str, bytes], tsa: TimestampAuthority | Literal["env"] | None) -> TimestampAuthority | None:
    """Give the DPO's new envelope its RFC 3161 token when the pack's manifest says its times are
    timestamps (`ConfigError` without a TSA); returns the TSA used, None for a pack of the engine's
    clock. A replaced attestation's token is dropped: it covers the old signature."""
    files.pop(DPO_TSR, None)
    if json.loads(files[MANIFEST]).get("time_source") != TIME_SOURCE_RFC3161:
        return None
    authority = TimestampAuthority.from_env() if tsa == "env" else tsa
    if authority is None:
        raise ConfigError(
            "this pack's times are RFC 3161 timestamps: set ERASURE_TSA_URL (the timestamp authority)"
            " to timestamp the DPO's signature too"
        )
    files[DPO_TSR] = authority.timestamp(envelope_signature(files[DPO_ENVELOPE]))
    return authority


def _write_attested(pack_path: Path, tar: bytes, files: Mapping[str, bytes]) -> None:
    write_atomic(pack_path, tar)
    beside = run_of(pack_path)
    if (beside / MANIFEST).is_file() and (beside / MANIFEST).read_bytes() == files[MANIFEST]:
        write_atomic(beside / DPO_ENVELOPE, files[DPO_ENVELOPE])
        if DPO_TSR in files:
            write_atomic(beside / DPO_TSR, files[DPO_TSR])
        else:
            (beside / DPO_TSR).unlink(missing_ok=True)


def _engine_checked(data: bytes, engine_pem: bytes | None, keyring: bytes | None) -> verify.VerifyResult:
    """The pack verified with the engine's key, or against the keyring (`PackError` otherwise)."""
    if engine_pem is None and keyring is None:
        raise InputError("the engine's public key or the keyring is needed to check the pack")
    if engine_pem is not None:
        return verify.verify_bytes(data, engine_pem, None, require_dpo=False)
    return verify.verify_bytes(data, None, None, require_dpo=False, keyring=keyring)


def signing_request_of(pack_path: Path, engine_pub: bytes | Path | None, *, keyring: bytes | None = None) -> str:
    """The line the DPO's standalone signer signs (`proof.verify.signer`): the pack's request id,
    engine key id, status and the subjects of the DPO's statement. The pack must verify first (with
    the engine's key, or against `keyring`)."""
    data = read_pack(Path(pack_path))
    engine_pem = public_key_pem(load_public_key(engine_pub)) if engine_pub is not None else None
    try:
        result = _engine_checked(data, engine_pem, keyring)
    except verify.PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc
    _top, files = verify.extract(data)
    covered = {k: v for k, v in files.items() if not k.startswith(SIGNATURES_DIR) or k == ENGINE_ENVELOPE}
    return signing_request(
        result.request_id, result.engine_keyid, result.status, subjects(covered), files[ENGINE_ENVELOPE]
    )


def attach_attestation(
    pack_path: Path,
    envelope: str,
    *,
    engine_pub: bytes | Path | None,
    dpo_pub: bytes | Path,
    keyring: bytes | None = None,
    tsa: TimestampAuthority | Literal["env"] | None = "env",
) -> Path:
    """Put the DPO's envelope, signed elsewhere (`proof.verify.signer`), into the pack: it must be the
    DPO's statement over exactly this pack, signed by the pinned `dpo_pub`, at a time after the
    verification and not in the future; then the whole pack must verify with both keys. `InputError`
    for an envelope that is not one; `PackRejected` for one that does not verify. With `keyring`, the
    pack is checked against it (the engine's key may be given too), `dpo_pub` must be the keyring's
    current DPO key, valid at the envelope's attested_at (`RetiredKey`), and so must the result. A
    pack of trusted time gets the DPO's RFC 3161 token here (`tsa`, default `ERASURE_TSA_URL`)."""
    pack_path = Path(pack_path)
    engine_pem = public_key_pem(load_public_key(engine_pub)) if engine_pub is not None else None
    dpo_key = load_public_key(dpo_pub)
    data = read_pack(pack_path)
    try:
        signed = envelope_bytes(json.loads(envelope))
    except (ValueError, TypeError) as exc:
        raise InputError("the DPO's answer is not the one-line envelope erasure-dpo-sign prints") from exc
    try:
        result = _engine_checked(data, engine_pem, keyring)
        # The signature first: nothing of a payload the pinned key did not sign is read.
        _type, payload = check_signature(signed, DPO_ENVELOPE, dpo_key, "DPO")
        when = json.loads(payload)["predicate"]["attested_at"]
    except verify.PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc
    except (ValueError, TypeError, KeyError) as exc:
        raise PackRejected("statement", "the DPO's signed statement is not a DPO statement") from exc
    top, files = verify.extract(data)
    if keyid(dpo_key) == result.engine_keyid:
        raise SameKeyRefused("the pinned DPO key is the engine's key: the DPO must attest with a key of their own")
    at = verify.utc_time(when) if isinstance(when, str) else None
    verified = verify.utc_time(predicate_of(files[ENGINE_ENVELOPE], ENGINE_ENVELOPE).get("verified_at"))
    late = at is not None and at > datetime.now(UTC) + _CLOCK_SKEW
    if at is None or late or (verified is not None and at < verified.replace(microsecond=0)):
        raise InputError(
            f"the DPO's attested_at {verify.printable(str(when))!r} is not between the verification and now"
        )
    expected = dpo_statement(
        files,
        request_id=result.request_id,
        attested_at=when,
        dpo_keyid=keyid(dpo_key),
        engine_keyid=result.engine_keyid,
        status=result.status,
    )
    if payload != expected:
        raise PackRejected(
            "statement", "the DPO's envelope is not the DPO's statement over this pack by the pinned key"
        )
    check_signing_key(keyring, dpo_key, "dpo", at)
    files[DPO_ENVELOPE] = signed
    authority = _stamp_dpo(files, tsa)
    tar = tar_gz_bytes(top, files)
    _self_check(tar, engine_pem, public_key_pem(dpo_key), keyring, authority)
    _write_attested(pack_path, tar, files)
    return pack_path


def predicate_of(envelope: bytes, name: str) -> dict[str, Any]:
    """The predicate of a pack's envelope (its signature not checked here); {} when it has none."""
    _, payload, _ = verify.unverified_payload(envelope, name)
    pred = json.loads(payload).get("predicate")
    return pred if isinstance(pred, dict) else {}
