"""`erasure attest` (the DPO signs) and `erasure export` (the sealed pack for the regulator), and the
requester's notification once a pack is sealed and all clear."""

from __future__ import annotations

import contextlib
import os
import shutil
import smtplib
from email.message import EmailMessage
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.common import HomeOpt, JsonOpt, console, home_of, print_json
from cli.pack import print_summary
from erasure import requests
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import ConfigError, NotFound, RequestBlocked
from erasure.files import private_dirs
from erasure.states import RequestState
from proof.pack import PACK_NAME, summary
from proof.pack import attest as sign_attestation

VERIFY_MD = """# Verifying erasure proof pack {request_id}

This directory holds `{pack}` (sha256 `{sha}`), the engine's and the DPO's public keys, and this note.

1. Confirm the key fingerprints below with the controller through a channel other than this export:
   engine keyid `{engine_keyid}`, DPO keyid `{dpo_keyid}` (sha256 of each public key's DER).
2. With our small verifier (needs only Python and `cryptography`):

       python -m proof.verify {pack} --engine-key engine.pub.pem --dpo-key dpo.pub.pem

3. Without our software: unpack it (`tar xzf {pack}`), run `sha256sum -c SHA256SUMS` inside, and check
   both DSSE envelopes in `signatures/` with openssl over the DSSE pre-authentication encoding, as
   described in docs/verify-with-openssl.md of the project.

Status: {status}; all clear: {all_clear}; verified at {verified_at}; attested at {attested_at}.
"""


def _pack_path(h: Home, request_id: str) -> Path:
    p = h.evidence_dir(request_id) / PACK_NAME
    if not p.exists():
        raise NotFound(f"no proof pack for {request_id} at {p}: run `erasure request run {request_id}` first")
    return p


def notify_requester(h: Home, request_id: str, pack_sha256: str, verified_at: str) -> Path | None:
    """Tell the requester the erasure is done: an outbox file by default (0600, the message itself must
    reach them, so it names them), SMTP when ERASURE_SMTP_HOST is set. Only for sealed, all-clear packs."""
    engine = open_engine(h.engine_db)
    try:
        subject = requests.load_envelope(engine, request_id).subject
        msg = EmailMessage()
        msg["Subject"] = f"Your erasure request {request_id} is complete"
        msg["From"] = os.environ.get("ERASURE_NOTIFY_FROM", "privacy@localhost")
        msg["To"] = subject.email or f"<requester of {request_id}>"
        msg.set_content(f"Your erasure request {request_id} was carried out and independently verified at "
                        f"{verified_at}. Proof pack reference: sha256:{pack_sha256}.\n")
        out: Path | None = None
        host = os.environ.get("ERASURE_SMTP_HOST")
        if host:
            with smtplib.SMTP(host, int(os.environ.get("ERASURE_SMTP_PORT", "25")), timeout=30) as smtp:
                smtp.send_message(msg)
        else:
            # The message names the requester: written 0600, never through a symlink. The outbox
            # folder itself must not be a symlink; the file is written under a temporary name
            # (O_EXCL | O_NOFOLLOW) and renamed over `<id>.eml`, which replaces a symlink there
            # instead of following it.
            private_dirs(h.outbox_dir)
            if h.outbox_dir.is_symlink() or not h.outbox_dir.is_dir():
                raise ConfigError(f"the outbox {h.outbox_dir} is a symlink or not a folder: refused")
            dir_fd = os.open(h.outbox_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                name, tmp = f"{request_id}.eml", f".{request_id}.eml.{os.getpid()}.tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=dir_fd)
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
            out = h.outbox_dir / name
        requests.set_state(engine, request_id, RequestState.notified)
        requests.log_event(engine, request_id, "requester.notified",
                           {"channel": "smtp" if host else "outbox", "pack_sha256": pack_sha256})
        return out
    finally:
        engine.close()


def seal(h: Home, request_id: str, dpo_key: Path, *, passphrase: str | None = None) -> dict[str, Any]:
    """The DPO's signature over a request awaiting attestation: attest the pack (refusing the engine's
    key), record the request as sealed, and notify the requester when the pack is all clear. Returns
    the sealed pack's summary, plus the outbox file when one was written."""
    engine = open_engine(h.engine_db)
    try:
        row = requests.get(engine, request_id)
    finally:
        engine.close()
    if row.state != RequestState.awaiting_attestation:
        raise RequestBlocked(f"request {request_id} is {row.state.value}, not awaiting attestation")
    pack = _pack_path(h, request_id)
    engine_pub = _engine_pub(h)
    sign_attestation(pack, dpo_key, engine_pub=engine_pub, passphrase=passphrase)
    sealed = summary(pack, engine_pub=engine_pub)
    engine = open_engine(h.engine_db)
    try:
        requests.set_state(engine, request_id, RequestState.sealed)
        requests.log_event(engine, request_id, "pack.attested", {"dpo_keyid": sealed["dpo_keyid"],
                                                                 "pack_sha256": sealed["pack_sha256"]})
    finally:
        engine.close()
    outbox = None
    if sealed["all_clear"]:
        outbox = notify_requester(h, request_id, sealed["pack_sha256"], sealed["verified_at"])
    return {**sealed, "pack": str(pack), "outbox": str(outbox) if outbox else None}


def _engine_pub(h: Home) -> Path:
    pub = h.keys_dir / "engine.pub.pem"
    if not pub.exists():
        raise ConfigError(f"no engine public key at {pub}")
    return pub


def attest(
    request_id: Annotated[str, typer.Argument(help="The request whose pack the DPO attests.")],
    dpo_key: Annotated[Path, typer.Option("--dpo-key", help="The DPO's private key (PEM), never the engine's.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation (scripts).")] = False,
    passphrase_env: Annotated[str | None, typer.Option(help="Env var holding the key passphrase.")] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show the DPO what they sign (per-tier table, exceptions, verification), then add their signature.

    The request must be awaiting attestation; a key equal to the engine's is refused. Once sealed and
    all clear, the requester is notified. (A DPO signing on their own machine, with only the pack file,
    uses `erasure pack attest`.)
    """
    h = home_of(home)
    s = summary(_pack_path(h, request_id), engine_pub=_engine_pub(h))
    if not json_out:
        print_summary(s)
    if not yes and not typer.confirm("Sign this attestation as DPO?", default=False):
        raise typer.Abort()
    sealed = seal(h, request_id, dpo_key, passphrase=os.environ.get(passphrase_env) if passphrase_env else None)
    if json_out:
        print_json({"request_id": request_id, "sealed": True, "pack": sealed["pack"],
                    "pack_sha256": sealed["pack_sha256"], "notified": sealed["all_clear"],
                    "outbox": sealed["outbox"]})
    else:
        console.print(f"sealed: {sealed['pack']} (sha256 {sealed['pack_sha256'][:16]}...)"
                      + ("; requester notified" if sealed["all_clear"] else "; not all clear: requester NOT notified"))


def export(
    request_id: Annotated[str, typer.Argument(help="The sealed request to export.")],
    to: Annotated[Path, typer.Option("--to", help="Directory to write the pack and VERIFY.md into.")],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write the sealed pack, the public keys and a short VERIFY.md for the regulator."""
    h = home_of(home)
    pack = _pack_path(h, request_id)
    s = summary(pack, engine_pub=h.keys_dir / "engine.pub.pem")
    if not s["attested"]:
        raise RequestBlocked(f"the pack of {request_id} is not sealed yet: the DPO must attest it first")
    to.mkdir(parents=True, exist_ok=True)
    name = f"{request_id}-{PACK_NAME}"
    shutil.copyfile(pack, to / name)
    for key in ("engine.pub.pem", "dpo.pub.pem"):
        if (h.keys_dir / key).exists():
            shutil.copyfile(h.keys_dir / key, to / key)
    (to / "VERIFY.md").write_text(VERIFY_MD.format(
        request_id=request_id, pack=name, sha=s["pack_sha256"], engine_keyid=s["engine_keyid"],
        dpo_keyid=s["dpo_keyid"], status=s["status"], all_clear=str(s["all_clear"]).lower(),
        verified_at=s["verified_at"], attested_at=s["attested_at"]))
    if json_out:
        print_json({"request_id": request_id, "exported_to": str(to), "files": sorted(p.name for p in to.iterdir())})
    else:
        console.print(f"exported {request_id} to {to}: " + ", ".join(sorted(p.name for p in to.iterdir())))


