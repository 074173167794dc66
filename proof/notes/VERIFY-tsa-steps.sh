# 4b. Trusted time: each envelope's RFC 3161 token (signatures/*.tsr) is over the SHA-256 of that
#     envelope's signature bytes and chains to the TSA root you confirmed (tsa-root.pem).
for role in engine dpo; do
  jq -r '.signatures[0].sig' "signatures/$role.intoto.json" | base64 -d > "$W/$role.sig"
  DIGEST=$(sha256sum < "$W/$role.sig" | cut -d' ' -f1)
  openssl ts -verify -in "signatures/$role.tsr" -digest "$DIGEST" -CAfile "$TSA_ROOT" >"$W/ts.out" 2>&1 \
    || fail "signatures/$role.tsr: $(tail -1 "$W/ts.out")"
  WHEN=$(openssl ts -reply -in "signatures/$role.tsr" -text | sed -n 's/^Time stamp: //p')
  echo "$role signature timestamped by the TSA at $WHEN"
done

