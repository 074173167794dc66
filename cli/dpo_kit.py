"""The DPO's signing kit (`erasure export --dpo-kit [REQUEST]`): the signer, the verifier, the keys
the DPO checks a pack with, and DPO-SIGN.md, whose every command runs as printed in the kit's folder
with Debian's own `python3` and `openssl`. Given a request awaiting attestation, the kit also holds
its pack and its signing request, and DPO-SIGN.md names them."""

from __future__ import annotations

from pathlib import Path

from erasure.config import Home
from erasure.errors import NotFound
from proof.keyring import read_beside
from proof.keys import keyid, load_public_key
from proof.tarball import write_atomic
from proof.verifier_zipapp import DPO_SIGNER_ZIPAPP, VERIFIER_ZIPAPP, dpo_signer_zipapp, verifier_zipapp
from proof.verify.keyring import KEYRING_FILE
from service import signoff
from service.scope import audit_public_pem

HEAD = """# Signing erasure proof packs as the DPO

This folder is your kit: `erasure-dpo-sign.pyz` (the signer), `erasure-verify.pyz` (the verifier),
the engine's public key `engine.pub.pem` (key id `@ENGINE_KEYID@`)@EXTRA_KEYS@. Both programs need
only Python 3.11+ and `cryptography` 38 or later: Debian 12's own `python3` with `python3-cryptography`
(`apt-get install python3-cryptography`), or `pip install cryptography`. Run every command below in
this folder. Your private key stays on this machine; only your signature goes back.

## 1. Once: your key pair, enrolled by the privacy team

    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out dpo.pem
    openssl pkey -in dpo.pem -pubout -out dpo.pub.pem
    openssl pkey -pubin -in dpo.pub.pem -outform DER -out dpo.pub.der
    sha256sum dpo.pub.der

Give `dpo.pub.pem` (never `dpo.pem`) to the privacy team, and read them the sha256 the last command
printed over the phone or in person, not in the same message. They trust your first key on the engine's
machine with `erasure keys trust --role dpo dpo.pub.pem --fingerprint KEYID`, KEYID being what you read
them: it refuses a key whose id differs. A later key of yours is enrolled only with a rotation statement
signed by your current key and the new one (docs/keys.md of the product, "The DPO rotates").
"""

NO_REQUEST = """
## 2. For each request waiting for you

Ask the privacy team for the request's kit (`erasure export REQUEST --dpo-kit --to DIR`): it holds
this note with the request's own commands, the pack to check (`REQUEST-proof.tar.gz`) and its
signing request (`REQUEST-signing-request.txt`). The run's sign-off form in the Prefect UI shows the
same per-tier table, exceptions and signing request.
"""

WITH_REQUEST = """
## 2. Check the pack of request @REQUEST_ID@

`@PACK@` is the pack waiting for you, signed by the engine only. Check it with the engine's key:

    python3 erasure-verify.pyz @PACK@ @KEY_ARGS@ --no-dpo @AUDIT_ARG@

It must print `OK` (with, after a colon, the status and each exception explained in one sentence).
The signer shows the same tier table and exceptions, taken from the statement the engine signed.

## 3. Attest it, or refuse

    python3 erasure-dpo-sign.pyz --key dpo.pem @REQUEST_ID@-signing-request.txt

It shows what you attest and asks before signing (answer `y`); paste the line it prints into the
run's sign-off form (*envelope*, decision *attest*), or give it to the privacy team, who seal the
pack with it (the `attest` command's `--envelope` option). To refuse, sign a refusal with one reason code
(evidence_incomplete, scope_wrong, identity_unverified, legal_hold, other) and send its line instead:

    python3 erasure-dpo-sign.pyz --key dpo.pem --reject evidence_incomplete @REQUEST_ID@-signing-request.txt
"""


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
    note = HEAD.replace("@ENGINE_KEYID@", keyid(load_public_key(engine_pem))).replace("@EXTRA_KEYS@", "".join(extra))
    if request_id is None:
        note += NO_REQUEST
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
        section = WITH_REQUEST
        for slot, value in slots.items():
            section = section.replace(slot, value)
        note += section
    files["DPO-SIGN.md"] = note.encode("utf-8")
    to.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        write_atomic(to / name, data)
    return sorted(files)
