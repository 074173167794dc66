"""VERIFY.md: the regulator's note in an export, with the verifier's command and the openssl recipe
(`service.export` fills it in)."""

from __future__ import annotations

from wire.format import (
    DPO_ENVELOPE,
    DPO_PREDICATE,
    ENGINE_ENVELOPE,
    ERASURE_PREDICATE,
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
)

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
   `cryptography` 38 or later, such as Debian 12's own `python3` with `python3-cryptography`; it
   runs every check below and the two that have no shell equivalent: the audit-log evidence, whose
   RFC 6962 Merkle inclusion (one multiproof for all its entries) and consistency proofs and Ed25519
   checkpoints only the verifier checks, and the consistency of the claims):

       python3 erasure-verify.pyz @PACK@ @KEY_ARGS@ @AUDIT_ARG@@TSA_ARG@@REVERIFY_ARG@

   (`--json` also prints the pack's name, `pack_name`. It is a zip of the verifier's Python sources:
   `python3 -m zipfile -l erasure-verify.pyz` lists them. Where erasure-cascade is installed,
   its module proof.verify takes the same arguments.)

3. Without our software: the recipe below needs bash, GNU coreutils (sha256sum, base64, mktemp),
   GNU tar, grep, sed, diff, openssl and jq (`apt-get install jq` on Debian, where it is not installed
   by default). Copy the block into `recipe.sh` in this directory and run `bash recipe.sh`. It stops
   at the first failed step; each step catches a kind of tampering, so leave none out. It must end
   with `ALL CHECKS PASSED`.

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
echo "ALL CHECKS PASSED (the audit-log Merkle proofs and the consistency of the claims: python3 erasure-verify.pyz)"
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
