"""`erasure attest` (the DPO signs) and `erasure export` (the sealed pack for the regulator), and the
requester's notification once a pack is sealed and all clear."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from cli.common import HomeOpt, JsonOpt, console, home_of, print_json
from cli.pack import print_summary
from erasure.config import Home
from erasure.errors import ConfigError, Conflict, InputError, RequestBlocked
from erasure.models import REQUEST_ID_MAX_CHARS
from proof.errors import PackRejected
from proof.evidence import REQUEST_ID
from proof.history import packs, statement_prefix
from proof.keyring import read_beside
from proof.keys import keyid, load_public_key
from proof.pack import summary
from proof.reverification import statement_files
from proof.tarball import write_atomic
from proof.tsa import TSA_ROOT_ENV
from proof.verifier_zipapp import VERIFIER_ZIPAPP, verifier_zipapp
from proof.verify import PackError, printable, verify_bytes
from proof.verify.keyring import KEYRING_FILE, pem_of
from proof.verify.wire import (
    DPO_ENVELOPE,
    DPO_PREDICATE,
    ENGINE_ENVELOPE,
    ERASURE_PREDICATE,
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    sha256_hex,
)
from service import signoff

VERIFY_MD = r"""# Verifying erasure proof pack @REQUEST_ID@

This directory holds `@PACK@`, the engine's and the DPO's public keys (the keys that signed this
pack), the store's audit checkpoint key (`audit.pub.pem`, when the store keeps an audit log), our
offline verifier as one file (`erasure-verify.pyz`), and this note.@KEYRING_INTRO@

The pack's name is `sha256:@NAME_DIGEST@`: the sha256 of the statement the engine signed (the payload
of `signatures/engine.intoto.json`). The requester's notification quotes it. It names what is signed,
not the tar.gz's bytes, which no signature covers; the verifier refuses any tar or gzip header field
and any member mode the writer does not write, and any high-s ECDSA signature.

1. Confirm the key fingerprints with the controller through a channel other than this export:
   engine keyid `@ENGINE_KEYID@`, DPO keyid `@DPO_KEYID@`, audit checkpoint keyid `@AUDIT_KEYID@`
   (sha256 of each public key's DER)@TSA_FINGERPRINT@. Do not trust the keys in this directory until
   you have.@KEYRING_CONFIRM@
2. With our small verifier, `erasure-verify.pyz` (needs only Python 3.11 or later and
   `cryptography`; it runs every check below and the two that have no shell equivalent: the
   audit-log evidence, whose RFC 6962 Merkle inclusion (one multiproof for all its entries) and
   consistency proofs and Ed25519 checkpoints only the verifier checks, and the consistency of the
   claims):

       python erasure-verify.pyz @PACK@ @KEY_ARGS@ @AUDIT_ARG@@TSA_ARG@@REVERIFY_ARG@

   (`--json` also prints the pack's name, `pack_name`. It is a zip of the verifier's Python sources:
   `python -m zipfile -l erasure-verify.pyz` lists them. Where erasure-cascade is installed,
   `python -m proof.verify` is the same command.)

3. Without our software (GNU tar, sha256sum, openssl, jq): run the recipe below in this directory
   (`bash recipe.sh` after copying the block into it). It stops at the first failed step; each step
   catches a kind of tampering, so leave none out. It must end with `ALL CHECKS PASSED`.

```sh
set -euo pipefail
PACK=$PWD/@PACK@ ENGINE_PUB=$PWD/engine.pub.pem DPO_PUB=$PWD/dpo.pub.pem REQUEST_ID=@REQUEST_ID@
NAME=@NAME_DIGEST@ AUDIT_PUB=$PWD/audit.pub.pem KEYRING=@KEYRING@ TSA_ROOT=$PWD/tsa-root.pem
fail() { echo "FAILED: $*" >&2; exit 1; }
kid() { openssl pkey -pubin -in "$1" -outform DER | sha256sum | cut -d' ' -f1; }

# 1. The trusted keys: compare these key ids with the fingerprints you confirmed; they must differ.
ENGINE_KID=$(kid "$ENGINE_PUB"); DPO_KID=$(kid "$DPO_PUB")
echo "engine keyid $ENGINE_KID"; echo "DPO keyid    $DPO_KID"
[ "$ENGINE_KID" != "$DPO_KID" ] || fail "the engine and the DPO keys are the same key"
if [ -n "$KEYRING" ]; then  # with the keyring you pinned: both keys must be in it, each for its role
  [ -f "$KEYRING" ] || fail "no keyring at $KEYRING"
  echo "keyring sha256 $(sha256sum < "$KEYRING" | cut -d' ' -f1)"
  ring_pem() {  # key id, role: the keyring's PEM of that key if it holds it for that role
    jq -r --arg k "$1" --arg r "$2" '.keys[] | select(.keyid == $k and .role == $r) | .public_key_pem' "$KEYRING"
  }
  [ "$(ring_pem "$ENGINE_KID" engine | kid /dev/stdin)" = "$ENGINE_KID" ] \
    || fail "engine.pub.pem is not an engine key of the keyring"
  [ "$(ring_pem "$DPO_KID" dpo | kid /dev/stdin)" = "$DPO_KID" ] || fail "dpo.pub.pem is not a DPO key of the keyring"
fi

# 2. Look before you extract: tar reads it without a warning; regular files and directories only,
#    under one folder named after the request; no absolute path, no '..'.
LIST=$(tar -tvzf "$PACK" 2>&1) || fail "tar cannot read the pack: $LIST"
grep -v '^[-d]' <<<"$LIST" >/dev/null && fail "an entry is not a regular file or directory: $LIST"
grep -Ev '^(-rw-r--r--|drwxr-xr-x) 0/0 ' <<<"$LIST" >/dev/null && fail "a mode or owner the writer never writes: $LIST"
NAMES=$(tar -tzf "$PACK")
grep -Ev "^$REQUEST_ID(/|$)" <<<"$NAMES" >/dev/null && fail "an entry lies outside the folder $REQUEST_ID"
grep -E '(^/|(^|/)\.\.(/|$))' <<<"$NAMES" >/dev/null && fail "an absolute path or '..' in the pack"

# 3. Extract into a fresh folder; SHA256SUMS covers the evidence, the certificate and manifest.json.
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
tar --no-same-owner --no-same-permissions -xzf "$PACK" -C "$W" 2>"$W/tar.err" || fail "tar: $(cat "$W/tar.err")"
[ ! -s "$W/tar.err" ] || fail "tar warned: $(cat "$W/tar.err")"
cd "$W/$REQUEST_ID"
sha256sum --strict --quiet -c SHA256SUMS || fail "a file does not match SHA256SUMS"

# 4. Each envelope: signed by the key you trust (key id and openssl over the DSSE PAE), an in-toto
#    statement whose subjects are EXACTLY the files, each with the digest the signer signed. This is
#    the step that catches a changed file whose SHA256SUMS and manifest.json were fixed to match.
check_envelope() {  # envelope, trusted public key, its key id, predicateType, extra covered file
  local env=$1 pub=$2 kid=$3 ptype=$4 extra=$5 p=$W/$(basename "$1").payload
  [ "$(jq -r '.signatures | length' "$env")" = 1 ] || fail "$env: not exactly one signature"
  [ "$(jq -r '.signatures[0].keyid' "$env")" = "$kid" ] || fail "$env: not signed by the key you trust"
  [ "$(jq -r .payloadType "$env")" = @PAYLOAD_TYPE@ ] || fail "$env: wrong payloadType"
  jq -r .payload "$env" | base64 -d > "$p"
  jq -r '.signatures[0].sig' "$env" | base64 -d > "$W/sig.bin"
  { printf 'DSSEv1 @PAYLOAD_TYPE_BYTES@ @PAYLOAD_TYPE@ %d ' "$(wc -c < "$p")"; cat "$p"; } > "$W/pae.bin"
  if openssl pkey -pubin -in "$pub" -noout -text | head -1 | grep -qi ed25519; then
    openssl pkeyutl -verify -pubin -inkey "$pub" -rawin -in "$W/pae.bin" -sigfile "$W/sig.bin" >/dev/null \
      || fail "$env: the signature does not verify"
  else
    openssl dgst -sha256 -verify "$pub" -signature "$W/sig.bin" "$W/pae.bin" >/dev/null \
      || fail "$env: the signature does not verify"
  fi
  [ "$(jq -r ._type "$p")" = @STATEMENT_TYPE@ ] || fail "$env: not an in-toto Statement v1"
  [ "$(jq -r .predicateType "$p")" = "$ptype" ] || fail "$env: wrong predicateType"
  [ "$(jq -r .predicate.request_id "$p")" = "$REQUEST_ID" ] || fail "$env: another request"
  jq -r '.subject[] | "\(.digest.sha256)  \(.name)"' "$p" | sha256sum --strict --quiet -c - \
    || fail "$env: a file differs from what the signer signed"
  jq -r '.subject[].name' "$p" | sort > "$W/subjects"
  { find . -type f ! -path './signatures/*' | sed 's|^\./||'; [ -z "$extra" ] || echo "$extra"; } \
    | sort > "$W/files"
  diff "$W/subjects" "$W/files" >&2 || fail "$env: its subjects are not exactly the files"
}
check_envelope @ENGINE_ENVELOPE@ "$ENGINE_PUB" "$ENGINE_KID" \
  @ERASURE_PREDICATE@ ""
check_envelope @DPO_ENVELOPE@ "$DPO_PUB" "$DPO_KID" \
  @DPO_PREDICATE@ @ENGINE_ENVELOPE@
E=$W/engine.intoto.json.payload D=$W/dpo.intoto.json.payload
[ "$(sha256sum < "$E" | cut -d' ' -f1)" = "$NAME" ] || fail "the engine's statement is not the pack named $NAME"
if [ -f "$AUDIT_PUB" ]; then  # the checkpoints are signed by the store's key you confirmed
  [ "$(jq -r .checkpoint_key.key_id audit-log-redaction.json)" = "$(kid "$AUDIT_PUB")" ] \
    || fail "the audit checkpoints name another key than audit.pub.pem"
fi
[ "$(jq -r .predicate.engine_keyid "$E")" = "$ENGINE_KID" ] || fail "the engine statement names another key"
[ "$(jq -r .predicate.dpo_keyid "$D")" = "$DPO_KID" ] || fail "the DPO statement names another DPO key"
[ "$(jq -r .predicate.engine_keyid "$D")" = "$ENGINE_KID" ] || fail "the DPO statement names another engine key"
[ "$(find . -type f | wc -l)" = "$(($(wc -l < "$W/files") + 1 + @TOKEN_COUNT@))" ] \
  || fail "a file outside the statements"
if [ -n "$KEYRING" ]; then  # each key was valid when it signed: valid_from <= signing time < valid_until
  valid_at() {  # key id, statement payload, the predicate field holding its signing time
    jq -e --arg k "$1" --arg t "$(jq -r ".predicate.$3" "$2")" '($t | sub("\\.[0-9]+Z$"; "Z") | fromdate) as $t
      | [.keys[] | select(.keyid == $k)][0]
      | ($t >= (.valid_from | fromdate)) and (.valid_until == null or $t < (.valid_until | fromdate))' \
      "$KEYRING" >/dev/null
  }
  valid_at "$ENGINE_KID" "$E" verified_at || fail "the engine key was not valid when it signed (verified_at)"
  valid_at "$DPO_KID" "$D" attested_at || fail "the DPO key was not valid when it signed (attested_at)"
fi
STATUS=$(jq -r .predicate.status "$E")
case "$(jq -r .predicate.statement "$D")" in
  *"as stated: $STATUS.") ;; *) fail "the DPO attests another outcome than the engine states ($STATUS)" ;;
esac

@TSA_STEPS@# 5. What the signed statements say.
jq -r '.predicate | "status \(.status), all clear \(.all_clear), verified at \(.verified_at)"' "$E"
jq -r '.predicate | "attested by the DPO at \(.attested_at)"' "$D"
jq -r '.predicate.tiers | to_entries[] | "  \(.key): \(.value.status)"' "$E"
echo "ALL CHECKS PASSED (the audit-log Merkle proofs and the consistency of the claims: python erasure-verify.pyz)"
```

Status: @STATUS@; all clear: @ALL_CLEAR@; verified at @VERIFIED_AT@; attested at @ATTESTED_AT@.
@TIMES@
"""

TSA_STEPS = r"""# 4b. Trusted time: each envelope's RFC 3161 token (signatures/*.tsr) is over the SHA-256 of that
#     envelope's signature bytes and chains to the TSA root you confirmed (tsa-root.pem).
for role in engine dpo; do
  jq -r '.signatures[0].sig' "signatures/$role.intoto.json" | base64 -d > "$W/$role.sig"
  DIGEST=$(sha256sum < "$W/$role.sig" | cut -d' ' -f1)
  openssl ts -verify -in "signatures/$role.tsr" -digest "$DIGEST" -CAfile "$TSA_ROOT" >"$W/ts.out" 2>&1 \
    || fail "signatures/$role.tsr: $(tail -1 "$W/ts.out")"
  WHEN=$(openssl ts -reply -in "signatures/$role.tsr" -text | sed -n 's/^Time stamp: //p')
  echo "$role signature timestamped by the TSA at $WHEN"
done

"""
ENGINE_CLOCK_TIMES = (
    "Times: no timestamp authority was configured; every time in this pack is the engine's own clock"
    " (manifest.json: time_source engine-clock)."
)


_WIRE_SLOTS = {
    "payload_type": PAYLOAD_TYPE,
    "payload_type_bytes": str(len(PAYLOAD_TYPE.encode())),
    "statement_type": STATEMENT_TYPE,
    "erasure_predicate": ERASURE_PREDICATE,
    "dpo_predicate": DPO_PREDICATE,
    "engine_envelope": ENGINE_ENVELOPE,
    "dpo_envelope": DPO_ENVELOPE,
}


def verify_md(**fields: str) -> str:
    """VERIFY.md for an export (`fields` fill the @NAME@ slots: ids, digests, times, all printable;
    the recipe's types and file names come from the wire format)."""
    text = VERIFY_MD
    defaults = {
        "tsa_fingerprint": "",
        "tsa_arg": "",
        "tsa_steps": "",
        "token_count": "0",
        "times": ENGINE_CLOCK_TIMES,
        "reverify_arg": "",
    }
    for name, value in {**_WIRE_SLOTS, **defaults, **fields}.items():
        text = text.replace(f"@{name.upper()}@", value)
    return text


def attest(
    request_id: Annotated[str, typer.Argument(help="The request whose pack the DPO attests.")],
    dpo_key: Annotated[
        Path | None,
        typer.Option("--dpo-key", help="The DPO's private key (PEM), never the engine's.", show_default=False),
    ] = None,
    envelope: Annotated[
        str | None,
        typer.Option(
            "--envelope",
            help="Instead of a key: the line erasure-dpo-sign.pyz printed on the DPO's machine ('-': stdin),"
            " checked against the pinned keys/dpo.pub.pem.",
            show_default=False,
        ),
    ] = None,
    reject: Annotated[
        str | None,
        typer.Option(
            "--reject",
            help=f"Refuse to attest, with a reason code ({', '.join(signoff.REJECT_REASONS)}): nothing is sent.",
            show_default=False,
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation (scripts).")] = False,
    passphrase_env: Annotated[str | None, typer.Option(help="Env var holding the key passphrase.")] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show the DPO what they sign (per-tier table, exceptions, verification), then add their signature.

    The request must be awaiting attestation; a key equal to the engine's is refused. Once sealed and
    all clear, the requester is notified. A run waiting for the DPO's sign-off in the UI is resumed.
    (A DPO signing on their own machine, with only the pack file, uses `erasure pack attest`.)
    """
    h = home_of(home)
    if sum(x is not None for x in (dpo_key, envelope, reject)) != 1:
        raise InputError("give exactly one of --dpo-key, --envelope and --reject")
    ring = read_beside(h.keys_dir)
    s = summary(
        signoff.pack_path(h, request_id),
        engine_pub=signoff.engine_pub_path(h) if ring is None else None,
        keyring=ring,
    )
    if not json_out:
        print_summary(s)
    if reject is not None:
        signoff.reject(h, request_id, reject)
        resume_sign_off(request_id, {"decision": "reject", "reason": reject})
        if json_out:
            print_json({"request_id": request_id, "sealed": False, "rejected": reject})
        else:
            console.print(f"rejected ({reject}): nothing was sent", markup=False, highlight=False)
        return
    if not yes and not typer.confirm("Sign this attestation as DPO?", default=False):
        raise typer.Abort()
    sealed = signoff.seal(
        h,
        request_id,
        dpo_key,
        passphrase=os.environ.get(passphrase_env) if passphrase_env else None,
        envelope=(sys.stdin.read() if envelope == "-" else envelope),
    )
    resume_sign_off(request_id, {"decision": "attest", "envelope": ""})
    if json_out:
        print_json(
            {
                "request_id": request_id,
                "sealed": True,
                "pack": sealed["pack"],
                "pack_name": sealed["pack_name"],
                "notified": sealed["all_clear"],
                "outbox": sealed["outbox"],
            }
        )
    else:
        console.print(
            printable(
                f"sealed: {sealed['pack']} (name sha256:{sealed['pack_name']})"
                + ("; requester notified" if sealed["all_clear"] else "; not all clear: requester NOT notified")
            ),
            markup=False,
            highlight=False,
        )


def resume_sign_off(request_id: str, answer: dict[str, str]) -> None:
    """Resume the request's run waiting for the DPO in the UI, when a Prefect API is configured (the
    sign-off is done: the run only finishes)."""
    if not os.environ.get("PREFECT_API_URL"):
        return
    from flows.sign_off import resume_waiting_run

    if resume_waiting_run(request_id, answer):
        console.print("the run waiting for the DPO's sign-off was resumed", markup=False, highlight=False)


DPO_SIGN_MD = """# Signing erasure proof packs as the DPO

`erasure-dpo-sign.pyz` needs Python 3 and `cryptography` (`pip install cryptography`), nothing else.
Your private key stays on this machine; only your signature goes back.

1. Once: make your key pair, and give `dpo.pub.pem` (never `dpo.pem`) to the privacy team, who pin it
   as `keys/dpo.pub.pem`:

       openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out dpo.pem
       openssl pkey -in dpo.pem -pubout -out dpo.pub.pem

2. For each request waiting for you, the run's form in the Prefect UI shows the per-tier table, the
   exceptions, and the command with its signing request. Run it:

       python erasure-dpo-sign.pyz --key dpo.pem SIGNING-REQUEST

   It shows what you attest and asks before signing; paste the line it prints into the form's
   *envelope* field with decision *attest*. To refuse, choose *reject* and a reason instead.

The engine's public key (engine.pub.pem, key id @ENGINE_KEYID@) is here so you can check a pack
yourself with `erasure-verify.pyz` before you sign.
"""


def write_dpo_kit(h: Home, to: Path) -> list[str]:
    """The DPO's signing kit in `to`: the signer, the engine's public key, DPO-SIGN.md (and the home's
    keyring.json when it has one)."""
    from proof.verifier_zipapp import DPO_SIGNER_ZIPAPP, dpo_signer_zipapp

    engine_pem = signoff.engine_pub_path(h).read_bytes()
    files = {
        DPO_SIGNER_ZIPAPP: dpo_signer_zipapp(),
        VERIFIER_ZIPAPP: verifier_zipapp(),
        "engine.pub.pem": engine_pem,
        "DPO-SIGN.md": DPO_SIGN_MD.replace("@ENGINE_KEYID@", keyid(load_public_key(engine_pem))).encode(),
    }
    ring = read_beside(h.keys_dir)
    if ring is not None:  # the keys the pack's signatures are checked against, with their validity
        files[KEYRING_FILE] = ring
    to.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        write_atomic(to / name, data)
    return sorted(files)


def _audit_pub(h: Home) -> bytes | None:
    """The store's audit checkpoint public key, or None when the home keeps no audit log of its own."""
    from service.scope import audit_public_pem

    return audit_public_pem(h)


def _keys_from_keyring(pack: Path, ring: bytes, dpo_key: Path | None) -> tuple[dict[str, Any], bytes, bytes]:
    """With a keyring: the pack's summary checked against it, and the two public keys that signed the
    pack (the keyring's, by the envelopes' key ids). A `--dpo-key` given must be the one that attested."""
    s = summary(pack, keyring=ring)
    if not s["attested"] or s["dpo_keyid"] is None:
        raise RequestBlocked(f"the pack at {pack} is not sealed yet: the DPO must attest it first")
    try:
        engine_pub, dpo_pub = pem_of(ring, s["engine_keyid"]), pem_of(ring, s["dpo_keyid"])
    except PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc
    if dpo_key is not None and keyid(load_public_key(dpo_key)) != s["dpo_keyid"]:
        raise Conflict(f"--dpo-key {dpo_key} is not the key that attested the pack (keyid {s['dpo_keyid'][:16]}...)")
    return s, engine_pub, dpo_pub


def _keyring_slots(ring: bytes | None) -> dict[str, str]:
    """VERIFY.md's keyring slots: the keyring to pin, or the two keys when the home has no keyring."""
    if ring is None:
        return {
            "keyring_intro": "",
            "keyring_confirm": "",
            "key_args": "--engine-key engine.pub.pem --dpo-key dpo.pub.pem",
            "keyring": '""',
        }
    return {
        "keyring_intro": (
            f"\n\n`{KEYRING_FILE}` is the keyring: every engine and DPO key the controller has used, each"
            "\nwith its role and validity period (keys are rotated; a retired key stays in it for the packs"
            "\nit signed before). Pin the keyring rather than single keys: the verifier then takes each"
            "\nsignature's key from it and refuses one made outside that key's validity."
        ),
        "keyring_confirm": (
            f"\n   Confirm the keyring the same way: `sha256sum {KEYRING_FILE}` must print"
            f"\n   `{sha256_hex(ring)}`;"
            "\n   the two key ids above must be in it, the engine's as an engine key and the DPO's as a DPO"
            "\n   key (the recipe checks both, and that each key was valid when it signed)."
        ),
        "key_args": f"--keyring {KEYRING_FILE}",
        "keyring": f"$PWD/{KEYRING_FILE}",
    }


def _tsa_root_pem(option: Path | None) -> bytes:
    """The TSA root to pin for a pack whose times are RFC 3161 timestamps: `--tsa-root`, else
    `$ERASURE_TSA_ROOT`; `ConfigError` without one (the regulator must be able to check the tokens)."""
    path = option or (Path(os.environ[TSA_ROOT_ENV]) if os.environ.get(TSA_ROOT_ENV) else None)
    if path is None or not path.is_file():
        raise ConfigError(
            "this pack's times are RFC 3161 timestamps: give --tsa-root (or set ERASURE_TSA_ROOT) with the"
            " timestamp authority's root certificate, so the regulator can check them"
        )
    return path.read_bytes()


def _tsa_slots(tsa_pem: bytes, engine_time: str | None, dpo_time: str | None) -> dict[str, str]:
    """VERIFY.md's trusted-time slots: the root's fingerprint, the verifier's argument, the openssl steps."""
    root = x509.load_pem_x509_certificates(tsa_pem)[0]
    fingerprint = root.fingerprint(hashes.SHA256()).hex()
    return {
        "tsa_fingerprint": f", and the timestamp authority's root certificate `tsa-root.pem`, SHA-256 fingerprint"
        f" `{fingerprint}` (`openssl x509 -in tsa-root.pem -noout -fingerprint -sha256`)",
        "tsa_arg": " --tsa-root tsa-root.pem",
        "tsa_steps": TSA_STEPS,
        "token_count": "2",
        "times": printable(
            f"Times: RFC 3161 timestamps from the TSA `{root.subject.rfc4514_string()}`: the engine's signature"
            f" at {engine_time}, the DPO's at {dpo_time} (signatures/engine.tsr, signatures/dpo.tsr)."
        ),
    }


def _refuse_unsafe_target(to: Path, force: bool) -> None:
    """`--to` is a real directory (not a symlink), new or empty unless `force`."""
    if to.is_symlink():
        raise InputError(f"--to {to} is a symbolic link: give the directory itself")
    if to.exists() and not to.is_dir():
        raise InputError(f"--to {to} is not a directory")
    if to.exists() and any(to.iterdir()) and not force:
        raise Conflict(f"--to {to} is not empty: pass --force to replace the exported files in it")


def export(
    request_id: Annotated[
        str | None, typer.Argument(help="The sealed request to export (none with --dpo-kit).", show_default=False)
    ] = None,
    to: Annotated[
        Path | None,
        typer.Option("--to", help="Directory to write the pack and VERIFY.md into (new or empty).", show_default=False),
    ] = None,
    dpo_kit: Annotated[
        bool,
        typer.Option(
            "--dpo-kit",
            help="Instead of a pack: the DPO's signing kit (erasure-dpo-sign.pyz, the engine's public key, "
            "DPO-SIGN.md) for their own machine.",
        ),
    ] = False,
    dpo_key: Annotated[
        Path | None,
        typer.Option(
            "--dpo-key",
            help="The DPO's trusted public key (PEM) to check the "
            "attestation with (default: the home's keys/dpo.pub.pem).",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a non-empty directory, replacing the exported files (never through a symbolic link).",
        ),
    ] = False,
    tsa_root: Annotated[
        Path | None,
        typer.Option(
            "--tsa-root",
            help="The timestamp authority's root certificate (PEM) that a pack's RFC 3161 tokens must chain to"
            " (default: $ERASURE_TSA_ROOT); shipped as tsa-root.pem.",
            show_default=False,
        ),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write the sealed pack, the public keys and VERIFY.md (a full openssl recipe) for the regulator.

    The pack must verify with the engine's key AND the DPO's trusted key before anything is written.
    The offline verifier goes along as one file (erasure-verify.pyz, run by `python`). Files go only
    into `--to` (never through a symbolic link); a non-empty `--to` needs `--force`. When the home's
    keys folder has a keyring, the pack must verify against it, keyring.json goes along (VERIFY.md
    pins it), and engine.pub.pem and dpo.pub.pem are the keyring's keys that signed this pack."""
    if to is None:
        raise InputError("--to DIR is required")
    if dpo_kit:
        if request_id is not None:
            raise InputError("--dpo-kit serves every request: give no request id")
        _refuse_unsafe_target(to, force)
        written = write_dpo_kit(home_of(home), to)
        if json_out:
            print_json({"dpo_kit": str(to), "files": written})
        else:
            console.print(printable(f"DPO kit in {to}: {', '.join(written)}"), markup=False, highlight=False)
        return
    if request_id is None:
        raise InputError("give the request id to export (or --dpo-kit)")
    if not REQUEST_ID.fullmatch(request_id):
        raise InputError(
            f"{printable(request_id)!r} is not a request id (1-{REQUEST_ID_MAX_CHARS} of"
            " A-Z a-z 0-9 . _ -, starting with a letter or digit)"
        )
    _refuse_unsafe_target(to, force)
    h = home_of(home)
    pack = signoff.pack_path(h, request_id)
    ring = read_beside(h.keys_dir)
    data = pack.read_bytes()
    if ring is not None:
        s, engine_pub, dpo_pub = _keys_from_keyring(pack, ring, dpo_key)
    else:
        engine_pub_path = signoff.engine_pub_path(h)
        dpo_pub_path = dpo_key or h.keys_dir / "dpo.pub.pem"
        if not dpo_pub_path.is_file():
            raise ConfigError(f"no DPO public key at {dpo_pub_path}: pass --dpo-key with the DPO's trusted public key")
        engine_pub, dpo_pub = engine_pub_path.read_bytes(), dpo_pub_path.read_bytes()
        s = summary(pack, engine_pub=engine_pub, dpo_pub=dpo_pub)
    if not s["attested"]:
        raise RequestBlocked(f"the pack of {request_id} is not sealed yet: the DPO must attest it first")
    if pack.read_bytes() != data:
        raise Conflict(f"the pack of {request_id} changed while it was being checked: export again")
    audit_pub = _audit_pub(h)
    try:
        result = verify_bytes(data, engine_pub, dpo_pub, audit_pub_pem=audit_pub)
        tsa_pem = _tsa_root_pem(tsa_root) if result.timestamps != "engine clock" else None
        if tsa_pem is not None:
            result = verify_bytes(data, engine_pub, dpo_pub, audit_pub_pem=audit_pub, tsa_root_pem=tsa_pem)
        if ring is not None:
            verify_bytes(data, None, None, audit_pub_pem=audit_pub, keyring=ring, tsa_root_pem=tsa_pem)
    except PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc
    # Re-verifications signed since the pack (issue 27): they go along, and VERIFY.md checks them.
    statements = [p for _n, p in statement_files(pack.parent, statement_prefix(pack))]
    # The whole history goes along (issue 34): every earlier pack and every pack's statements.
    history = [(f"{request_id}-{p.name}", p.read_bytes()) for _n, p in packs(pack.parent) if p != pack]
    chains = sorted(p for p in pack.parent.glob("*reverify-*.intoto.json") if p.is_file() and not p.is_symlink())
    name = f"{request_id}-{pack.name}"
    note = verify_md(
        **_keyring_slots(ring),
        request_id=request_id,
        pack=name,
        name_digest=s["pack_name"],
        engine_keyid=s["engine_keyid"],
        audit_keyid=keyid(load_public_key(audit_pub)) if audit_pub else "(none: no audit log)",
        audit_arg="--audit-key audit.pub.pem" if audit_pub else "--no-audit-key",
        dpo_keyid=str(s["dpo_keyid"]),
        status=s["status"],
        all_clear=str(s["all_clear"]).lower(),
        verified_at=printable(str(s["verified_at"])),
        attested_at=printable(str(s["attested_at"])),
        **(_tsa_slots(tsa_pem, result.engine_timestamp, result.dpo_timestamp) if tsa_pem is not None else {}),
        reverify_arg=(" --reverify " + " ".join(p.name for p in statements)) if statements else "",
    )
    _refuse_unsafe_target(to, force)
    to.mkdir(parents=True, exist_ok=True)
    # One rename each (write_atomic): a symbolic link in the way is replaced, never followed.
    for fname, body in (
        (name, data),
        ("engine.pub.pem", engine_pub),
        ("dpo.pub.pem", dpo_pub),
        *((("audit.pub.pem", audit_pub),) if audit_pub else ()),
        *(((KEYRING_FILE, ring),) if ring is not None else ()),
        *((("tsa-root.pem", tsa_pem),) if tsa_pem else ()),
        *history,
        *((p.name, p.read_bytes()) for p in chains),
        ("VERIFY.md", note.encode("utf-8")),
        (VERIFIER_ZIPAPP, verifier_zipapp()),
    ):
        write_atomic(to / fname, body, 0o644)
    written = sorted(p.name for p in to.iterdir())
    if json_out:
        print_json({"request_id": request_id, "exported_to": str(to), "files": written})
    else:
        console.print(printable(f"exported {request_id} to {to}: " + ", ".join(written)), markup=False, highlight=False)
