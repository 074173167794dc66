"""Signing keys: generation (files, modes, encryption), loading, key ids, refusal to overwrite, CLI."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from typer.testing import CliRunner

from cli.keys import app
from erasure.config import Home
from erasure.errors import ConfigError, Conflict, InputError
from proof.keys import generate_keypair, keyid, load_private_key, load_public_key, sign


def _spki_sha256(pub_pem: bytes) -> str:
    key = serialization.load_pem_public_key(pub_pem)
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


@pytest.mark.parametrize("algorithm", ["ecdsa-p256", "ed25519"])
def test_generate_writes_pkcs8_private_0600_and_public_with_keyid(tmp_path: Path, algorithm: str) -> None:
    files = generate_keypair("engine", tmp_path, algorithm=algorithm)
    assert files.private == tmp_path / "engine.pem" and files.public == tmp_path / "engine.pub.pem"
    assert stat.S_IMODE(files.private.stat().st_mode) == 0o600
    assert files.private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS8, unencrypted
    assert files.public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert files.keyid == _spki_sha256(files.public.read_bytes())
    assert keyid(load_private_key(files.private)) == files.keyid


def test_passphrase_encrypts_and_is_needed_to_load(tmp_path: Path) -> None:
    files = generate_keypair("dpo", tmp_path, passphrase="correct horse")
    assert files.private.read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert keyid(load_private_key(files.private, "correct horse")) == files.keyid
    with pytest.raises(ConfigError, match="encrypted"):
        load_private_key(files.private)
    with pytest.raises(ConfigError, match="wrong passphrase"):
        load_private_key(files.private, "battery staple")


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    first = generate_keypair("engine", tmp_path)
    before = first.private.read_bytes()
    with pytest.raises(Conflict, match="already exists"):
        generate_keypair("engine", tmp_path)
    assert first.private.read_bytes() == before
    second = generate_keypair("engine", tmp_path, force=True)
    assert second.keyid != first.keyid and first.private.read_bytes() != before
    assert stat.S_IMODE(second.private.stat().st_mode) == 0o600


def test_missing_key_file_and_foreign_key_types_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_private_key(tmp_path / "nope.pem")
    rsa_pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "rsa.pem").write_bytes(rsa_pem)
    with pytest.raises(ConfigError, match="neither"):
        load_private_key(tmp_path / "rsa.pem")
    p384 = (
        ec.generate_private_key(ec.SECP384R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(ConfigError, match="neither"):
        load_public_key(p384)
    with pytest.raises(InputError):
        generate_keypair("auditor", tmp_path)
    with pytest.raises(InputError):
        generate_keypair("engine", tmp_path, algorithm="rsa")


def test_ecdsa_signatures_are_deterministic_der_and_verify(tmp_path: Path) -> None:
    files = generate_keypair("engine", tmp_path)
    key = load_private_key(files.private)
    sig = sign(key, b"payload")
    assert sig == sign(key, b"payload") and sig[0] == 0x30  # DER SEQUENCE
    pub = load_public_key(files.public)
    assert isinstance(pub, ec.EllipticCurvePublicKey)
    pub.verify(sig, b"payload", ec.ECDSA(hashes.SHA256()))


def test_ed25519_signature_verifies(tmp_path: Path) -> None:
    files = generate_keypair("dpo", tmp_path, algorithm="ed25519")
    pub = load_public_key(files.public)
    assert isinstance(pub, Ed25519PublicKey)
    pub.verify(sign(load_private_key(files.private), b"x"), b"x")


def test_cli_generate_defaults_to_home_keys_dir(home: Home) -> None:
    res = CliRunner().invoke(app, ["generate", "--role", "engine", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert Path(out["private_key"]) == home.keys_dir / "engine.pem"
    assert out["keyid"] == _spki_sha256((home.keys_dir / "engine.pub.pem").read_bytes())
    again = CliRunner().invoke(app, ["generate", "--role", "engine"])
    assert again.exit_code != 0 and isinstance(again.exception, Conflict)


def test_cli_generate_with_passphrase_env_out_dir_and_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPO_PASS", "s3cret phrase")
    res = CliRunner().invoke(
        app,
        [
            "generate",
            "--role",
            "dpo",
            "--out",
            str(tmp_path),
            "--algorithm",
            "ed25519",
            "--passphrase-env",
            "DPO_PASS",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["algorithm"] == "ed25519" and out["encrypted"] is True
    assert b"ENCRYPTED" in (tmp_path / "dpo.pem").read_bytes()
    fp = CliRunner().invoke(app, ["fingerprint", str(tmp_path / "dpo.pem"), "--passphrase-env", "DPO_PASS"])
    assert fp.exit_code == 0 and fp.output.strip() == out["keyid"]
    fp_pub = CliRunner().invoke(app, ["fingerprint", str(tmp_path / "dpo.pub.pem")])
    assert fp_pub.output.strip() == out["keyid"]
    missing = CliRunner().invoke(
        app, ["generate", "--role", "engine", "--out", str(tmp_path), "--passphrase-env", "NOT_SET_ANYWHERE"]
    )
    assert isinstance(missing.exception, ConfigError) and not (tmp_path / "engine.pem").exists()


def test_cli_rejects_unknown_role(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["generate", "--role", "auditor", "--out", str(tmp_path)])
    assert res.exit_code == 2 and not list(tmp_path.iterdir())
