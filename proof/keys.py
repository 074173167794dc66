"""Signing keys of the engine and the DPO: generate, load, fingerprint, sign.

ECDSA P-256 is the default (the widest tool support: `openssl dgst -sha256 -verify`); Ed25519 is
accepted. A key's `keyid` is the sha256 hex of its public key's SubjectPublicKeyInfo DER. ECDSA
signatures are deterministic (RFC 6979), so the same pack signed twice has the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from erasure.errors import ConfigError, Conflict, InputError
from proof.tarball import write_atomic
from proof.verify.signer import signature
from wire.format import keyid_of

PrivateKey = ec.EllipticCurvePrivateKey | Ed25519PrivateKey
PublicKey = ec.EllipticCurvePublicKey | Ed25519PublicKey

ALGORITHMS = ("ecdsa-p256", "ed25519")
ROLES = ("engine", "dpo")


@dataclass(frozen=True)
class KeyFiles:
    """Where `generate_keypair` wrote a key pair, and its fingerprint."""

    private: Path
    public: Path
    keyid: str
    algorithm: str


def _password(passphrase: str | bytes | None) -> bytes | None:
    if passphrase is None:
        return None
    pw = passphrase.encode("utf-8") if isinstance(passphrase, str) else passphrase
    if not pw:
        raise InputError("the passphrase is empty")
    return pw


def _new_private(algorithm: str) -> PrivateKey:
    if algorithm == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == "ed25519":
        return Ed25519PrivateKey.generate()
    raise InputError(f"unknown key algorithm {algorithm!r}: use one of {', '.join(ALGORITHMS)}")


def _write_new(path: Path, data: bytes, mode: int, replace: bool) -> None:
    """Write `data` to `path` atomically with `mode`; without `replace`, never overwrite a key."""
    try:
        write_atomic(path, data, mode, replace=replace)
    except FileExistsError as exc:
        raise Conflict(f"{path} already exists: pass --force to replace it") from exc


def generate_keypair(
    role: str,
    out_dir: Path,
    *,
    algorithm: str = "ecdsa-p256",
    passphrase: str | bytes | None = None,
    force: bool = False,
) -> KeyFiles:
    """Write `<role>.pem` (PKCS8, mode 0600, encrypted when a passphrase is given) and
    `<role>.pub.pem` into `out_dir`. Refuses to overwrite either file unless `force`."""
    if role not in ROLES:
        raise InputError(f"unknown key role {role!r}: use one of {', '.join(ROLES)}")
    password = _password(passphrase)
    key = _new_private(algorithm)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    priv_path, pub_path = out_dir / f"{role}.pem", out_dir / f"{role}.pub.pem"
    if not force:
        for p in (priv_path, pub_path):
            if p.exists():
                raise Conflict(f"{p} already exists: pass --force to replace it")
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    )
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    _write_new(priv_path, pem, 0o600, force)
    _write_new(pub_path, public_key_pem(key.public_key()), 0o644, force)
    return KeyFiles(priv_path, pub_path, keyid(key.public_key()), algorithm)


def load_private_key(path: Path, passphrase: str | bytes | None = None) -> PrivateKey:
    """Load a PEM private key (ECDSA P-256 or Ed25519). `ConfigError` if it is missing, locked,
    undecryptable, or of another kind."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"key file {path} does not exist (create one with `erasure keys generate`)") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read key file {path}: {exc.strerror}") from exc
    try:
        key = serialization.load_pem_private_key(data, password=_password(passphrase))
    except TypeError as exc:
        msg = (
            f"key file {path} is encrypted: give its passphrase (--passphrase-env)"
            if passphrase is None
            else f"key file {path} is not encrypted: do not give a passphrase"
        )
        raise ConfigError(msg) from exc
    except ValueError as exc:
        raise ConfigError(f"cannot load key file {path}: not a PEM private key, or a wrong passphrase") from exc
    if isinstance(key, Ed25519PrivateKey):
        return key
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise ConfigError(f"key file {path} is neither an ECDSA P-256 nor an Ed25519 key")


def load_public_key(source: Path | bytes) -> PublicKey:
    """Load a PEM public key from a file path or from PEM bytes. `ConfigError` if unusable."""
    where = "the public key"
    if isinstance(source, Path):
        where = f"public key file {source}"
        try:
            source = source.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {where}: {exc.strerror}") from exc
    try:
        key = serialization.load_pem_public_key(source)
    except ValueError as exc:
        raise ConfigError(f"{where} is not a PEM public key") from exc
    if isinstance(key, Ed25519PublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise ConfigError(f"{where} is neither an ECDSA P-256 nor an Ed25519 key")


def public_key_pem(key: PublicKey) -> bytes:
    """The SubjectPublicKeyInfo PEM of a public key."""
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def keyid(key: PublicKey | PrivateKey) -> str:
    """The key id of `key`'s public key (`wire.keyid_of`: sha256 hex of its SubjectPublicKeyInfo DER)."""
    return keyid_of(key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey | Ed25519PrivateKey) else key)


def algorithm_of(key: PublicKey | PrivateKey) -> str:
    """`ecdsa-p256` or `ed25519`."""
    return "ed25519" if isinstance(key, Ed25519PrivateKey | Ed25519PublicKey) else "ecdsa-p256"


def sign(key: PrivateKey, data: bytes) -> bytes:
    """Sign `data` (`proof.verify.signer.signature`: ECDSA-SHA256 low-s DER, or Ed25519), the one
    signing code the engine and the DPO's standalone signer share."""
    return signature(key, data)
