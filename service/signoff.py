"""The DPO's sign-off of a request awaiting attestation (`seal`, `reject`) and the requester's
notification: one implementation under `erasure attest` and the run's sign-off form in the UI."""

from __future__ import annotations

import contextlib
import os
import smtplib
from email.message import EmailMessage
from enum import StrEnum
from pathlib import Path
from typing import Any

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ConfigError, InputError, NotFound, RequestBlocked
from erasure.files import private_dirs
from erasure.sqlite import transaction
from erasure.states import RequestState
from proof.errors import PackRejected
from proof.history import current_pack
from proof.keyring import read_beside
from proof.keys import keyid, load_private_key, load_public_key, public_key_pem
from proof.pack import attach_attestation, signing_request_of
from proof.pack import attest as sign_attestation
from proof.review import summary
from proof.tarball import write_atomic
from service import dpo_answers


def pack_path(h: Home, request_id: str) -> Path:
    p = current_pack(h.evidence_dir(request_id))
    if not p.exists():
        raise NotFound(f"no proof pack for {request_id} at {p}: run `erasure request run {request_id}` first")
    return p


def _message(engine: Engine, request_id: str, pack_ref: str, verified_at: str) -> EmailMessage:
    with engine.lent() as conn:
        subject = request_records.load_envelope(conn, request_id).subject
    msg = EmailMessage()
    msg["Subject"] = f"Your erasure request {request_id} is complete"
    msg["From"] = os.environ.get("ERASURE_NOTIFY_FROM", "privacy@localhost")
    msg["To"] = subject.email or f"<requester of {request_id}>"
    msg.set_content(
        f"Your erasure request {request_id} was carried out and independently verified at "
        f"{verified_at}. Proof pack reference: sha256:{pack_ref}.\n"
    )
    return msg


def _outbox_fd(h: Home) -> int:
    """The outbox folder, opened (never through a symlink); `ConfigError` when it cannot take mail."""
    private_dirs(h.outbox_dir)
    if h.outbox_dir.is_symlink() or not h.outbox_dir.is_dir():
        raise ConfigError(f"the outbox {h.outbox_dir} is a symlink or not a folder: refused")
    try:
        return os.open(h.outbox_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"the outbox {h.outbox_dir} cannot be opened: {exc.strerror}") from exc


def _outbox_ready(h: Home) -> None:
    """Refuse an unusable outbox before anything is signed (SMTP: checked when sending)."""
    if not os.environ.get("ERASURE_SMTP_HOST"):
        os.close(_outbox_fd(h))


def _deliver(engine: Engine, h: Home, request_id: str, pack_ref: str, verified_at: str) -> Path | None:
    """Send (SMTP) or queue (outbox file) the requester's notification; records nothing."""
    msg = _message(engine, request_id, pack_ref, verified_at)
    host = os.environ.get("ERASURE_SMTP_HOST")
    if host:
        with smtplib.SMTP(host, int(os.environ.get("ERASURE_SMTP_PORT", "25")), timeout=30) as smtp:
            smtp.send_message(msg)
        return None
    # The message names the requester: written 0600, never through a symlink. The outbox folder
    # itself must not be a symlink; the file is written under a temporary name (O_EXCL | O_NOFOLLOW)
    # and renamed over `<id>.eml`, which replaces a symlink there instead of following it.
    dir_fd = _outbox_fd(h)
    try:
        name, tmp = f"{request_id}.eml", f".{request_id}.eml.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(bytes(msg))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)
    return h.outbox_dir / name


def _record_notified(engine: Any, request_id: str, pack_ref: str) -> None:
    request_records.set_state(engine, request_id, RequestState.notified)
    request_records.log_event(
        engine,
        request_id,
        "requester.notified",
        {"channel": "smtp" if os.environ.get("ERASURE_SMTP_HOST") else "outbox", "pack": pack_ref},
    )


def notify_requester(engine: Engine, h: Home, request_id: str, pack_ref: str, verified_at: str) -> Path | None:
    """Tell the requester the erasure is done: an outbox file by default (0600, the message itself must
    reach them, so it names them), SMTP when ERASURE_SMTP_HOST is set; then record the request as
    notified. `pack_ref` is the pack's name (the digest of its signed statement)."""
    out = _deliver(engine, h, request_id, pack_ref, verified_at)
    with engine.lent() as conn:
        _record_notified(conn, request_id, pack_ref)
    return out


def seal(
    engine: Engine,
    h: Home,
    request_id: str,
    dpo_key: Path | None = None,
    *,
    passphrase: str | None = None,
    envelope: str | None = None,
) -> dict[str, Any]:
    """The DPO's signature over a request awaiting attestation: with `dpo_key`, attest the pack here
    (refusing the engine's key); with `envelope`, the one line the DPO's standalone signer printed on
    their own machine, checked against the pinned keys/dpo.pub.pem and put into the pack. Then, for an
    all-clear pack, send or queue the requester's notification, and only then record the request as
    sealed (and notified) in one transaction. An outbox that cannot take the message is refused before
    anything is signed; if delivery fails later, the request stays awaiting attestation and the same
    call completes it (a pack this DPO key already attested is not signed again). Returns the sealed
    pack's summary, plus the outbox file when one was written."""
    if (dpo_key is None) == (envelope is None):
        raise InputError("give the DPO's key or the envelope they signed, not both")
    with engine.lent() as conn:
        row = request_records.get(conn, request_id)
    if row.state != RequestState.awaiting_attestation:
        raise RequestBlocked(f"request {request_id} is {row.state.value}, not awaiting attestation")
    pack = pack_path(h, request_id)
    ring = read_beside(h.keys_dir)  # with a keyring, every check is against it: keys rotate
    engine_pub = engine_pub_path(h) if ring is None else None
    dpo_pub = (
        public_key_pem(load_private_key(dpo_key, passphrase).public_key())
        if dpo_key is not None
        else pinned_dpo_pub(h).read_bytes()
    )
    before = summary(pack, engine_pub=engine_pub, keyring=ring)
    if before["all_clear"]:
        _outbox_ready(h)
    if ring is not None:  # the keyring checks a DPO envelope already there: is it this DPO key's?
        mine = before["dpo_attestation"] == "verified" and before["dpo_keyid"] == keyid(load_public_key(dpo_pub))
    else:
        mine = before["dpo_attestation"] == "not checked" and _attested_by(pack, engine_pub_path(h), dpo_pub)
    if not mine and dpo_key is not None:
        sign_attestation(pack, dpo_key, engine_pub=engine_pub, passphrase=passphrase, keyring=ring)
    elif not mine and envelope is not None:
        dpo_answers.check_attestation(envelope, request_id, signing_request(h, request_id), dpo_pub)
        attach_attestation(pack, envelope, engine_pub=engine_pub, dpo_pub=dpo_pub, keyring=ring)
    sealed = summary(pack, engine_pub=engine_pub, dpo_pub=dpo_pub if ring is None else None, keyring=ring)
    outbox = None
    if sealed["all_clear"]:
        outbox = _deliver(engine, h, request_id, sealed["pack_name"], sealed["verified_at"])
    with engine.lent() as conn, transaction(conn):
        request_records.set_state(conn, request_id, RequestState.sealed)
        request_records.log_event(
            conn, request_id, "pack.attested", {"dpo_keyid": sealed["dpo_keyid"], "pack": sealed["pack_name"]}
        )
        if sealed["all_clear"]:
            _record_notified(conn, request_id, sealed["pack_name"])
    return {**sealed, "pack": str(pack), "outbox": str(outbox) if outbox else None}


class RejectReason(StrEnum):
    """Why a DPO refuses to attest, as recorded in the request's log (the DPO's own words stay in their
    signed rejection, kept beside the pack): a known code, else `other`."""

    evidence_incomplete = "evidence_incomplete"
    scope_wrong = "scope_wrong"
    identity_unverified = "identity_unverified"
    legal_hold = "legal_hold"
    other = "other"


REJECT_REASONS = tuple(r.value for r in RejectReason)


def reject(engine: Engine, h: Home, request_id: str, envelope: str) -> dict[str, Any]:
    """The DPO refuses to attest, with their signed rejection (`service.dpo_answers`: signed by the
    pinned DPO key, for this request and its current pack). The request goes to `rejected` (an open
    exception the SLA table keeps watching), the refusal is logged with its reason code, the envelope
    is kept beside the pack, and nothing is sent to anyone. Without a valid signed rejection nothing
    changes (`InputError`)."""
    with engine.lent() as conn:
        row = request_records.get(conn, request_id)
    if row.state != RequestState.awaiting_attestation:
        raise RequestBlocked(f"request {request_id} is {row.state.value}, not awaiting attestation")
    pack = pack_path(h, request_id)
    digests = dpo_answers.pack_digests(pack, signing_request(h, request_id))
    rejection = dpo_answers.check_rejection(envelope, request_id, digests, pinned_dpo_pub(h).read_bytes())
    kept = h.evidence_dir(request_id) / f"dpo-rejection-{rejection.pack_sha256[:16]}.dsse.json"
    write_atomic(kept, rejection.envelope + b"\n", 0o644)
    code = rejection.reason if rejection.reason in REJECT_REASONS else RejectReason.other.value
    with engine.lent() as conn, transaction(conn):
        if request_records.get(conn, request_id).state != RequestState.awaiting_attestation:
            raise RequestBlocked(f"request {request_id} changed state while the rejection was checked")
        request_records.set_state(conn, request_id, RequestState.rejected, f"DPO: {code}")
        request_records.log_event(
            conn,
            request_id,
            "pack.rejected",
            {"reason": code, "envelope": kept.name, "at": rejection.rejected_at},
        )
    return {"request_id": request_id, "rejected": True, "reason": code, "envelope": str(kept)}


def signing_request(h: Home, request_id: str) -> str:
    """The line the DPO's standalone signer signs, for a request's pack."""
    ring = read_beside(h.keys_dir)
    return signing_request_of(pack_path(h, request_id), engine_pub_path(h) if ring is None else None, keyring=ring)


def pinned_dpo_pub(h: Home) -> Path:
    """The DPO's public key the team pinned (keys/dpo.pub.pem)."""
    pub = h.keys_dir / "dpo.pub.pem"
    if not pub.is_file():
        raise ConfigError(f"no DPO public key pinned at {pub}: put the DPO's dpo.pub.pem there")
    return pub


def _attested_by(pack: Path, engine_pub: Path, dpo_pub: bytes) -> bool:
    """Whether the pack's DPO attestation verifies under `dpo_pub` (a rerun after a failed delivery)."""
    try:
        return bool(summary(pack, engine_pub=engine_pub, dpo_pub=dpo_pub)["attested"])
    except PackRejected:
        return False


def engine_pub_path(h: Home) -> Path:
    pub = h.keys_dir / "engine.pub.pem"
    if not pub.exists():
        raise ConfigError(f"no engine public key at {pub}")
    return pub


def review(h: Home, request_id: str) -> dict[str, Any]:
    """What the DPO reviews before signing: the summary of the request's pack, checked with the home's
    keyring (else the engine's public key)."""
    ring = read_beside(h.keys_dir)
    return summary(pack_path(h, request_id), engine_pub=engine_pub_path(h) if ring is None else None, keyring=ring)
