"""A pack verifies WITHOUT our code: system `tar`, `sha256sum -c`, and the `openssl` binary over a PAE
that this test builds with a few lines of its own (the recipe of docs/verify-with-openssl.md)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from proof.pack import attest, write_pack
from tests.proof_fixtures import make_evidence, make_keys


def _sh(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=60)


def _pae(payload_type: str, body: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 " + str(len(t)).encode() + b" " + t + b" " + str(len(body)).encode() + b" " + body


def _openssl_verify(pub: Path, algorithm: str, pae: Path, sig: Path) -> subprocess.CompletedProcess[str]:
    if algorithm == "ecdsa-p256":
        return _sh("openssl", "dgst", "-sha256", "-verify", str(pub), "-signature", str(sig), str(pae))
    return _sh(
        "openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(pub), "-rawin", "-in", str(pae), "-sigfile", str(sig)
    )


@pytest.mark.parametrize(("engine_alg", "dpo_alg"), [("ecdsa-p256", "ed25519"), ("ed25519", "ecdsa-p256")])
def test_pack_verifies_with_tar_sha256sum_and_openssl(tmp_path: Path, engine_alg: str, dpo_alg: str) -> None:
    keys = make_keys(tmp_path / "keys", engine_alg, dpo_alg)
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub)
    out = tmp_path / "extracted"
    out.mkdir()
    listing = _sh("tar", "-tvzf", str(pack)).stdout.splitlines()
    assert listing and all(line[0] in "-d" for line in listing)  # regular files and dirs only
    assert _sh("tar", "-xzf", str(pack), "-C", str(out)).returncode == 0
    root = out / "req-0001"

    sums = _sh("sha256sum", "-c", "SHA256SUMS", cwd=root)
    assert sums.returncode == 0, sums.stdout + sums.stderr
    assert sums.stdout.count(": OK") == 7  # five evidence files, attestation.txt, manifest.json

    work = tmp_path / "work"
    work.mkdir()
    for role, pub, alg in (("engine", keys.engine_pub, engine_alg), ("dpo", keys.dpo_pub, dpo_alg)):
        env = json.loads((root / "signatures" / f"{role}.intoto.json").read_text())
        payload = base64.b64decode(env["payload"])
        pae, sig = work / f"{role}.pae", work / f"{role}.sig"
        pae.write_bytes(_pae(env["payloadType"], payload))
        sig.write_bytes(base64.b64decode(env["signatures"][0]["sig"]))

        der = _sh("openssl", "pkey", "-pubin", "-in", str(pub), "-outform", "DER", "-out", str(work / "k.der"))
        assert der.returncode == 0
        assert env["signatures"][0]["keyid"] == hashlib.sha256((work / "k.der").read_bytes()).hexdigest()

        ok = _openssl_verify(pub, alg, pae, sig)
        assert ok.returncode == 0 and "Verified" in ok.stdout, ok.stdout + ok.stderr

        tampered = work / f"{role}.tampered.pae"
        tampered.write_bytes(pae.read_bytes().replace(b'"request_id":"req-0001"', b'"request_id":"req-0002"'))
        assert tampered.read_bytes() != pae.read_bytes()
        assert _openssl_verify(pub, alg, tampered, sig).returncode != 0

        statement = json.loads(payload)
        for subject in statement["subject"]:
            data = (root / subject["name"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == subject["digest"]["sha256"], subject["name"]
        names = {s["name"] for s in statement["subject"]}
        files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        expected = {f for f in files if not f.startswith("signatures/")}
        assert names == (expected if role == "engine" else expected | {"signatures/engine.intoto.json"})

    wrong = _openssl_verify(keys.dpo_pub, dpo_alg, work / "engine.pae", work / "engine.sig")
    assert wrong.returncode != 0
