"""The signing keys (`erasure keys ...`): make, rotate, enrol and trust the engine's and the DPO's keys
in a keys folder and its keyring; a key's id; the store's audit checkpoint key. Each returns what the
command prints (ids, paths, times; never a private key)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from erasure.errors import ConfigError
from proof.keyring import adopt, enroll, enroll_public, keyring_path, rotate, trust_first
from proof.keys import algorithm_of, generate_keypair, keyid, load_private_key, load_public_key
from proof.rotation import MAX_ROTATION_BYTES, KeyNotProven, rotation_file
from proof.tarball import write_atomic
from proof.verify.keyring import format_time


def generate(
    out_dir: Path, role: str, *, algorithm: str, passphrase: str | None = None, force: bool = False
) -> dict[str, Any]:
    """Write `<role>.pem` and `<role>.pub.pem` in `out_dir` and enrol the key in its keyring as the
    role's current key, from the next whole second (a key it replaces with `force` keeps its place)."""
    if force:
        adopt(out_dir, role)
    files = generate_keypair(role, out_dir, algorithm=algorithm, passphrase=passphrase, force=force)
    since = enroll(out_dir, role, load_public_key(files.public))
    return {
        "role": role,
        "algorithm": files.algorithm,
        "keyid": files.keyid,
        "private_key": str(files.private),
        "public_key": str(files.public),
        "encrypted": passphrase is not None,
        "keyring": str(keyring_path(out_dir)),
        "valid_from": format_time(since),
    }


def rotate_key(
    where: Path, role: str, *, algorithm: str | None = None, passphrase: str | None = None
) -> dict[str, Any]:
    """Retire the role's current key in `where` and make a new one current, at the next whole second."""
    r = rotate(where, role, algorithm=algorithm, passphrase=passphrase)
    return {
        "role": r.role,
        "retired_keyid": r.retired_keyid,
        "keyid": r.keyid,
        "algorithm": r.algorithm,
        "rotated_at": r.at,
        "keyring": str(r.keyring),
        "private_key": str(r.private),
        "public_key": str(r.public),
        "rotation_statement": str(r.statement),
    }


def _enrolled(where: Path, role: str, kid: str, at: Any, how: str) -> dict[str, Any]:
    return {
        "role": role,
        "keyid": kid,
        "valid_from": format_time(at),
        "keyring": str(keyring_path(where)),
        "trusted": how,
    }


def enrol(where: Path, role: str, public_key: Path, rotation: Path | None = None) -> dict[str, Any]:
    """Make a key rotated elsewhere the role's current key, proven by its rotation statement (default:
    `<role>.rotation.json` beside `public_key`), signed by the current key here and by the new key."""
    statement = rotation if rotation is not None else rotation_file(public_key.parent, role)
    try:
        proof = statement.read_bytes()[: MAX_ROTATION_BYTES + 1]
    except OSError as exc:
        raise KeyNotProven(
            f"no rotation statement at {statement} ({exc.strerror}): a key is enrolled only with the statement"
            f" its holder's `erasure keys rotate` wrote, signed by the current {role} key and the new one"
        ) from exc
    kid, at = enroll_public(where, role, public_key, proof)
    return _enrolled(where, role, kid, at, "proven by the current key and the new key")


def trust(where: Path, role: str, public_key: Path, fingerprint: str, *, replace: bool = False) -> dict[str, Any]:
    """Trust a role's first key on the operator's word (its fingerprint compared with its holder)."""
    kid, at = trust_first(where, role, public_key, fingerprint, replace=replace)
    how = "trusted on your word: its fingerprint was compared with its holder; no earlier key vouches for it"
    return _enrolled(where, role, kid, at, how)


def fingerprint(key: Path, passphrase: Callable[[], str | None] = lambda: None) -> dict[str, str]:
    """A PEM key's id (sha256 of its public DER) and algorithm, public or private (`passphrase` is asked
    only for a private key)."""
    try:
        text = key.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {key}: {exc.strerror}") from exc
    loaded = load_private_key(key, passphrase()) if b"PRIVATE KEY" in text else load_public_key(text)
    return {"keyid": keyid(loaded), "algorithm": algorithm_of(loaded)}


def audit_key(store_dir: Path, out: Path | None = None) -> dict[str, str]:
    """The store's audit checkpoint public key (PEM) and its id; also written to `out` when given."""
    from memory.audit import checkpoint_public_pem

    pem = checkpoint_public_pem(store_dir)
    kid = keyid(load_public_key(pem))
    if out is not None:
        write_atomic(out, pem, 0o644)
    return {"keyid": kid, "algorithm": "ed25519", "public_key_pem": pem.decode("ascii")}
