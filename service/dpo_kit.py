"""The DPO's signing kit (`erasure export --dpo-kit [REQUEST]`): the signer, the verifier, the keys
the DPO checks a pack with, and DPO-SIGN.md, whose every command runs as printed in the kit's folder
with Debian's own `python3` and `openssl`. Given a request awaiting attestation, the kit also holds
its pack and its signing request, and DPO-SIGN.md names them. The note's three parts are package data
(`proof/notes/DPO-SIGN*.md`)."""

from __future__ import annotations

from pathlib import Path

from erasure.config import Home
from erasure.errors import NotFound
from proof.keyring import read_beside
from proof.keys import keyid, load_public_key
from proof.notes import note
from proof.tarball import write_atomic
from proof.verifier_zipapp import DPO_SIGNER_ZIPAPP, VERIFIER_ZIPAPP, dpo_signer_zipapp, verifier_zipapp
from proof.verify.keyring import KEYRING_FILE
from service import signoff
from service.scope import audit_public_pem


def write_dpo_kit(h: Home, to: Path, request_id: str | None = None) -> list[str]:
    """The DPO's signing kit in `to` (see the module docstring); the names written, sorted."""
    engine_pem = signoff.engine_pub_path(h).read_bytes()
    ring = read_beside(h.keys_dir)
    try:
        audit_pub = audit_public_pem(h)
    except NotFound:  # no checkpoint yet, so no pack of this store to check with it
        audit_pub = None
    files = {DPO_SIGNER_ZIPAPP: dpo_signer_zipapp(), VERIFIER_ZIPAPP: verifier_zipapp(), "engine.pub.pem": engine_pem}
    extra = []
    if ring is not None:  # the keys the pack's signatures are checked against, with their validity
        files[KEYRING_FILE] = ring
        extra.append(f", the keyring `{KEYRING_FILE}`")
    if audit_pub is not None:
        files["audit.pub.pem"] = audit_pub
        extra.append(", the store's audit checkpoint key `audit.pub.pem`")
    text = (
        note("DPO-SIGN.md")
        .replace("@ENGINE_KEYID@", keyid(load_public_key(engine_pem)))
        .replace("@EXTRA_KEYS@", "".join(extra))
    )
    if request_id is None:
        text += note("DPO-SIGN-no-request.md")
    else:
        pack = f"{request_id}-proof.tar.gz"
        files[pack] = signoff.pack_path(h, request_id).read_bytes()
        files[f"{request_id}-signing-request.txt"] = (signoff.signing_request(h, request_id) + "\n").encode("ascii")
        slots = {
            "@REQUEST_ID@": request_id,
            "@PACK@": pack,
            "@KEY_ARGS@": f"--keyring {KEYRING_FILE}" if ring is not None else "--engine-key engine.pub.pem",
            "@AUDIT_ARG@": "--audit-key audit.pub.pem" if audit_pub is not None else "--no-audit-key",
        }
        section = note("DPO-SIGN-request.md")
        for slot, value in slots.items():
            section = section.replace(slot, value)
        text += section
    files["DPO-SIGN.md"] = text.encode("utf-8")
    to.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        write_atomic(to / name, data)
    return sorted(files)
