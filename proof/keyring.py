"""The keyring of a keys folder (`keys/keyring.json`): enrol keys, rotate a role's key, and refuse to
sign with a key the keyring has retired.

The file's format and its parser belong to the offline verifier (`proof.verify.keyring`); this module
writes it. A rotation, at a whole second T (it waits for the next one, at most a second, so that a
signing time written to the second never falls on the wrong side of T):

1. the role's current key is looked up in the keyring (a key made before the keyring existed is
   adopted, valid from its public key file's modification time);
2. a new key pair is generated in a staging folder beside the keys;
3. the keyring is rewritten atomically: the old key valid until T, the new key valid from T;
4. the new key files replace `<role>.pem` and `<role>.pub.pem` (one rename each): the retired private
   key is gone from the folder. A copy kept elsewhere stays useless: every signer checks its key
   against the keyring (`check_signing_key`) and the verifier refuses a signature made after T.

With 3 goes the rotation statement (`proof.rotation`, `<role>.rotation.json`): the hand-over signed by
the retired key and by the new one, which the other side's `keys enrol` (`enroll_public`) requires. A
first key of a role is enrolled by `trust_first`, on the operator's word and its typed fingerprint.

A crash between 3 and 4 leaves the retired key in place: signing is then refused (fail-closed) and
`erasure keys rotate` run again completes a fresh rotation.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from erasure.errors import ConfigError, Conflict, InputError
from proof.keys import (
    PrivateKey,
    PublicKey,
    algorithm_of,
    generate_keypair,
    keyid,
    load_private_key,
    load_public_key,
    public_key_pem,
)
from proof.rotation import KeyNotProven, check_rotation, rotation_file, rotation_statement
from proof.tarball import write_atomic
from proof.verify.errors import PackError
from proof.verify.keyring import (
    KEYRING_FILE,
    ROLES,
    KeyEntry,
    Keyring,
    format_time,
    keyring_bytes,
    parse_keyring,
)

LOCK_FILE = ".keyring.lock"
STAGING_DIR = ".rotating"


class RetiredKey(Conflict):
    """A signer was handed a key the keyring has retired (or never held, or holds for another role)."""


@dataclass(frozen=True)
class Rotation:
    """What `rotate` did: the retired key, the new key, and the rotation time."""

    role: str
    retired_keyid: str
    keyid: str
    algorithm: str
    at: str
    keyring: Path
    private: Path
    public: Path
    statement: Path
    """The rotation statement (`proof.rotation`): what the other side's `keys enrol` needs."""


def keyring_path(keys_dir: Path) -> Path:
    """Where a keys folder keeps its keyring."""
    return Path(keys_dir) / KEYRING_FILE


def read_beside(keys_dir: Path) -> bytes | None:
    """The bytes of the keyring in `keys_dir`, or None when the folder has none."""
    try:
        return keyring_path(keys_dir).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the keyring {keyring_path(keys_dir)}: {exc.strerror}") from exc


def load(keys_dir: Path) -> Keyring | None:
    """The keyring in `keys_dir` (None when there is none); `ConfigError` when it does not parse."""
    data = read_beside(keys_dir)
    if data is None:
        return None
    try:
        return parse_keyring(data)
    except PackError as exc:
        raise ConfigError(f"the keyring {keyring_path(keys_dir)} is unusable: {exc}") from exc


def next_whole_second(clock: Callable[[], float] = time.time) -> datetime:
    """Wait until the next whole second of the clock and return it (UTC)."""
    now = clock()
    target = int(now) + 1
    while (left := target - clock()) > 0:
        time.sleep(left)
    return datetime.fromtimestamp(target, UTC)


def _entry(role: str, key: PublicKey, valid_from: datetime) -> dict[str, object]:
    return {
        "keyid": keyid(key),
        "role": role,
        "algorithm": algorithm_of(key),
        "public_key_pem": public_key_pem(key).decode("ascii"),
        "valid_from": format_time(valid_from),
        "valid_until": None,
    }


def _with(ring: Keyring | None, role: str, key: PublicKey, at: datetime) -> list[dict[str, object]]:
    """The keyring's entries with `key` as the role's current key from `at` (the previous one closed)."""
    entries = [e.as_dict() for e in ring.entries] if ring is not None else []
    kid = keyid(key)
    if any(e["keyid"] == kid for e in entries):
        raise Conflict(f"the keyring already holds key {kid[:16]}...")
    for e in entries:
        if e["role"] == role and e["valid_until"] is None:
            e["valid_until"] = format_time(at)
    return [*entries, _entry(role, key, at)]


@contextmanager
def _locked(keys_dir: Path) -> Iterator[None]:
    """One writer of a keys folder's keyring at a time (an OS lock, waited for)."""
    keys_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(keys_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write(keys_dir: Path, entries: list[dict[str, object]]) -> None:
    data = keyring_bytes(entries)
    parse_keyring(data)  # what we write is what the verifier reads
    write_atomic(keyring_path(keys_dir), data, 0o644)


def _adopt_others(keys_dir: Path, ring: Keyring | None, role: str) -> Keyring | None:
    """The keyring with the folder's key of every OTHER role that it holds no key of yet (a key made
    before the keyring existed: adopted, valid from its public key file's modification time)."""
    entries = [e.as_dict() for e in ring.entries] if ring is not None else []
    added = False
    for other in ROLES:
        pub = keys_dir / f"{other}.pub.pem"
        if other == role or not pub.is_file() or any(e["role"] == other for e in entries):
            continue
        since = datetime.fromtimestamp(int(pub.stat().st_mtime), UTC)
        entries.append(_entry(other, load_public_key(pub), since))
        added = True
    if not added:
        return ring
    try:
        return parse_keyring(keyring_bytes(entries))
    except PackError as exc:
        raise ConfigError(f"cannot adopt the keys of {keys_dir} into its keyring: {exc}") from exc


def enroll(keys_dir: Path, role: str, public_key: PublicKey) -> datetime:
    """Make `public_key` the role's current key in the keyring of `keys_dir` (created if missing, with
    the folder's key of the other role adopted), from the next whole second; the role's previous key
    (if any) is valid until then. Returns that time."""
    if role not in ROLES:
        raise InputError(f"unknown key role {role!r}: use one of {', '.join(ROLES)}")
    keys_dir = Path(keys_dir)
    with _locked(keys_dir):
        ring = _adopt_others(keys_dir, load(keys_dir), role)
        at = next_whole_second()
        _write(keys_dir, _with(ring, role, public_key, at))
    return at


def current_key(keys_dir: Path, role: str) -> PublicKey | None:
    """The role's current key on this side: the keyring's, or without a keyring the pinned `<role>.pub.pem`."""
    ring = load(keys_dir)
    if ring is not None:
        entry = ring.current(role)
        return load_public_key(entry.public_key_pem.encode("ascii")) if entry is not None else None
    pinned = Path(keys_dir) / f"{role}.pub.pem"
    return load_public_key(pinned) if pinned.is_file() else None


def enroll_public(keys_dir: Path, role: str, pub_file: Path, rotation: bytes) -> tuple[str, datetime]:
    """A key rotated on its holder's own machine (the DPO's), on the controller's side: once `rotation`
    (`proof.rotation`) proves it, signed by the role's current key here and by the new key itself, the
    public key in `pub_file` becomes the role's current key in the keyring of `keys_dir` from the next
    whole second (the previous one valid until then) and the pinned `<role>.pub.pem`. `KeyNotProven`
    otherwise. Returns (keyid, time)."""
    key = load_public_key(Path(pub_file))
    current = current_key(keys_dir, role)
    if current is None:
        raise KeyNotProven(
            f"there is no current {role} key here to vouch for key {keyid(key)[:16]}...: a first key is"
            f" trusted explicitly with `erasure keys trust --role {role}`"
        )
    check_rotation(rotation, role, current, key)
    return _pin(keys_dir, role, key)


def _pin(keys_dir: Path, role: str, key: PublicKey) -> tuple[str, datetime]:
    at = enroll(keys_dir, role, key)
    write_atomic(Path(keys_dir) / f"{role}.pub.pem", public_key_pem(key), 0o644)
    return keyid(key), at


def trust_first(keys_dir: Path, role: str, pub_file: Path, fingerprint: str, *, replace: bool) -> tuple[str, datetime]:
    """The role's first key, taken on the operator's word: no earlier key vouches for it, so its
    `fingerprint` (its keyid, compared with its holder out of band) must be typed in. Refused while the
    role has a current key, unless `replace` (a lost key: said so, and the old key's window closes)."""
    key = load_public_key(Path(pub_file))
    kid = keyid(key)
    if fingerprint.strip().lower() != kid:
        raise KeyNotProven(f"{pub_file} is key {kid}, not the fingerprint given ({fingerprint.strip()[:64]})")
    current = current_key(keys_dir, role)
    if current is not None and not replace:
        raise Conflict(
            f"the {role} role already has a current key ({keyid(current)[:16]}...): a new one is enrolled with"
            f" its rotation statement (`erasure keys enrol`), or, if that key is lost, trusted with --replace"
        )
    return _pin(keys_dir, role, key)


def _adopted(ring: Keyring | None, role: str, pub_path: Path) -> tuple[Keyring | None, KeyEntry]:
    """The role's current key as the keyring knows it; a key made before the keyring is adopted, valid
    from its public key file's modification time."""
    key = load_public_key(pub_path)
    kid = keyid(key)
    entry = ring.by_keyid(kid) if ring is not None else None
    if entry is not None:
        if entry.role != role or entry.valid_until is not None:
            raise RetiredKey(f"{pub_path} is key {kid[:16]}..., which the keyring has retired: nothing to rotate")
        return ring, entry
    if ring is not None and ring.current(role) is not None:
        raise ConfigError(f"{pub_path} is not the keyring's current {role} key: fix the keys folder first")
    since = datetime.fromtimestamp(int(pub_path.stat().st_mtime), UTC)
    entries = [*(e.as_dict() for e in (ring.entries if ring else ())), _entry(role, key, since)]
    try:
        adopted = parse_keyring(keyring_bytes(entries))
    except PackError as exc:
        raise ConfigError(f"cannot adopt {pub_path} into the keyring: {exc}") from exc
    found = adopted.by_keyid(kid)
    assert found is not None
    return adopted, found


def adopt(keys_dir: Path, role: str) -> None:
    """Before a key file of `role` in `keys_dir` is replaced (`keys generate --force`): put the key it
    holds into the keyring first (adopted, valid from its file's modification time) if the keyring
    does not hold it yet, so that the replacement closes its window instead of losing it. Only when the
    folder already has a keyring; a retired key stays as it is."""
    keys_dir = Path(keys_dir)
    pub = keys_dir / f"{role}.pub.pem"
    if not pub.is_file() or not keyring_path(keys_dir).is_file():
        return
    with _locked(keys_dir):
        ring = load(keys_dir)
        if ring is not None and ring.by_keyid(keyid(load_public_key(pub))) is not None:
            return
        adopted, _ = _adopted(ring, role, pub)
        if adopted is not None:
            _write(keys_dir, [e.as_dict() for e in adopted.entries])


def rotate(
    keys_dir: Path, role: str, *, algorithm: str | None = None, passphrase: str | bytes | None = None
) -> Rotation:
    """Retire the role's current key in `keys_dir` and make a new one current (see the module's
    docstring). `algorithm` defaults to the retired key's."""
    if role not in ROLES:
        raise InputError(f"unknown key role {role!r}: use one of {', '.join(ROLES)}")
    keys_dir = Path(keys_dir)
    priv, pub = keys_dir / f"{role}.pem", keys_dir / f"{role}.pub.pem"
    if not pub.is_file() or not priv.is_file():
        raise ConfigError(f"no {role} key in {keys_dir} to rotate: create one with `erasure keys generate`")
    with _locked(keys_dir):
        ring, old = _adopted(_adopt_others(keys_dir, load(keys_dir), role), role, pub)
        staging = keys_dir / STAGING_DIR
        shutil.rmtree(staging, ignore_errors=True)
        new = generate_keypair(role, staging, algorithm=algorithm or old.algorithm, passphrase=passphrase)
        try:
            retired = _private(priv, passphrase)
            at = next_whole_second()
            statement = rotation_statement(role, retired, load_private_key(new.private, passphrase), format_time(at))
            write_atomic(rotation_file(keys_dir, role), statement, 0o644)
            _write(keys_dir, _with(ring, role, load_public_key(new.public), at))
            os.replace(new.public, pub)
            os.replace(new.private, priv)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return Rotation(
        role,
        old.keyid,
        new.keyid,
        new.algorithm,
        format_time(at),
        keyring_path(keys_dir),
        priv,
        pub,
        rotation_file(keys_dir, role),
    )


def _private(path: Path, passphrase: str | bytes | None) -> PrivateKey:
    """The retired private key, to sign its hand-over: with the new key's passphrase, or none."""
    try:
        return load_private_key(path, passphrase)
    except ConfigError:
        if passphrase is None:
            raise
        return load_private_key(path, None)


def check_signing_key(ring: bytes | None, key: PrivateKey | PublicKey, role: str, signing_time: datetime) -> None:
    """Refuse to sign with `key` (`RetiredKey`) when a keyring is given and it does not hold the key as
    the role's CURRENT key, or the key was not yet valid at `signing_time` (the time the statement will
    carry). Without a keyring nothing is checked (single pinned keys)."""
    if ring is None:
        return
    try:
        parsed = parse_keyring(ring)
    except PackError as exc:
        raise ConfigError(f"the keyring is unusable: {exc}") from exc
    kid = keyid(key)
    entry = parsed.by_keyid(kid)
    if entry is None or entry.role != role:
        raise RetiredKey(f"the keyring holds no {role} key {kid[:16]}...: enrol it (erasure keys rotate) first")
    if entry.valid_until is not None:
        raise RetiredKey(
            f"the {role} key {kid[:16]}... was retired at {format_time(entry.valid_until)}: it signs nothing new"
            f" (the current {role} key is in {role}.pem)"
        )
    if not entry.valid_at(signing_time):
        raise RetiredKey(
            f"the {role} key {kid[:16]}... is valid {entry.window()}: it cannot sign a statement dated"
            f" {signing_time.isoformat().replace('+00:00', 'Z')}"
        )
