"""The inbox of request envelopes (`<home>/inbox/`) and what is kept of the rejected ones.

A rejected envelope may name anyone (it was rejected because it was wrong), so it is never kept as
it came. Intake writes it to `inbox/rejected/<name>.rejected`, encrypted with AES-256-GCM under
`keys/inbox.key` (32 random bytes, mode 0600, created on first use), beside `<name>.error.txt` with
its one-line error (which names fields and kinds of identifiers, never values). `<name>` is random:
the file name the envelope came under (perhaps an email address) is not kept. After
`ERASURE_INBOX_RETENTION_DAYS` days (default 30) both files are overwritten and removed.

An erasure looks here too: `inbox_files(home)` is every file under the inbox (the byte scan's scope),
and `purge_rejected_for(home, subject)` removes every rejected envelope that names the subject.

Encrypted file layout: `b"ERJ1"` + rejected-at (8 bytes, big-endian Unix seconds) + nonce (12 bytes)
+ AES-GCM ciphertext and tag; the first 12 bytes are the associated data.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from erasure.config import Home
from erasure.errors import ConfigError
from erasure.models import mentions_subject
from erasure.subject import Subject

REJECTED_DIR = "rejected"
KEY_FILE = "inbox.key"
SEALED_SUFFIX = ".rejected"
ERROR_SUFFIX = ".error.txt"
RETENTION_ENV = "ERASURE_INBOX_RETENTION_DAYS"
DEFAULT_RETENTION_DAYS = 30
MAGIC = b"ERJ1"
_HEADER = len(MAGIC) + 8
_NONCE = 12

HomeLike = Home | str | os.PathLike[str]


def _root(home: HomeLike) -> Path:
    return home.root if isinstance(home, Home) else Path(home)


def inbox_dir(home: HomeLike) -> Path:
    return _root(home) / "inbox"


def rejected_dir(home: HomeLike) -> Path:
    return inbox_dir(home) / REJECTED_DIR


def key_path(home: HomeLike) -> Path:
    return _root(home) / "keys" / KEY_FILE


def retention_days() -> int:
    """`ERASURE_INBOX_RETENTION_DAYS` (default 30): how long a rejected envelope is kept, encrypted."""
    raw = os.environ.get(RETENTION_ENV, "").strip()
    if not raw:
        return DEFAULT_RETENTION_DAYS
    try:
        days = int(raw)
    except ValueError:
        raise ConfigError(f"{RETENTION_ENV} must be a whole number of days") from None
    if days < 0:
        raise ConfigError(f"{RETENTION_ENV} must not be negative")
    return days


def new_name() -> str:
    """A random name for a rejected envelope: it carries nothing of the envelope."""
    return secrets.token_hex(16)


def inbox_key(home: HomeLike, *, create: bool = True) -> bytes | None:
    """The inbox key (32 bytes), created with mode 0600 when missing and `create`; None if absent."""
    path = key_path(home)
    if not path.exists():
        if not create:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another intake made it first
            pass
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(32))
                fh.flush()
                os.fsync(fh.fileno())
    key = path.read_bytes()
    if len(key) != 32:
        raise ConfigError(f"{path} is not a 32-byte inbox key")
    return key


def shred(path: Path) -> None:
    """Overwrite the file with zeros, then unlink it (best effort on copy-on-write file systems)."""
    with contextlib.suppress(FileNotFoundError):
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.write(b"\0" * size)
            fh.flush()
            os.fsync(fh.fileno())
        path.unlink()


def _seal(key: bytes, data: bytes, at: datetime) -> bytes:
    header = MAGIC + int(at.timestamp()).to_bytes(8, "big", signed=True)
    nonce = secrets.token_bytes(_NONCE)
    return header + nonce + AESGCM(key).encrypt(nonce, data, header)


def _rejected_at(blob: bytes) -> datetime | None:
    if len(blob) < _HEADER + _NONCE or not blob.startswith(MAGIC):
        return None
    return datetime.fromtimestamp(int.from_bytes(blob[len(MAGIC):_HEADER], "big", signed=True), UTC)


def keep_rejected(home: HomeLike, data: bytes, message: str, *, name: str | None = None,
                  now: datetime | None = None) -> str:
    """Keep a rejected envelope's bytes encrypted under a random name, with its one-line error beside
    it; returns the name. The caller removes the original file (`shred`)."""
    name = name or new_name()
    at = now or datetime.now(UTC)
    out = rejected_dir(home)
    out.mkdir(parents=True, exist_ok=True)
    key = inbox_key(home)
    assert key is not None
    tmp = out / f".{name}.tmp"
    tmp.write_bytes(_seal(key, data, at))
    os.replace(tmp, out / f"{name}{SEALED_SUFFIX}")
    (out / f"{name}{ERROR_SUFFIX}").write_text(message.rstrip("\n") + "\n", encoding="utf-8")
    return name


def read_rejected(home: HomeLike, path: Path) -> bytes:
    """The envelope bytes of a sealed rejected file. `ConfigError` without the key; `ValueError` when
    the file is not a sealed envelope or does not decrypt (tampered, or another key)."""
    blob = path.read_bytes()
    if _rejected_at(blob) is None:
        raise ValueError(f"{path.name}: not a sealed rejected envelope")
    key = inbox_key(home, create=False)
    if key is None:
        raise ConfigError(f"{key_path(home)} is missing: rejected envelopes cannot be read")
    try:
        return AESGCM(key).decrypt(blob[_HEADER:_HEADER + _NONCE], blob[_HEADER + _NONCE:], blob[:_HEADER])
    except InvalidTag:
        raise ValueError(f"{path.name}: does not decrypt with the inbox key") from None


def _entries(home: HomeLike) -> list[tuple[Path, Path]]:
    """(envelope file, error file) pairs under `rejected/`: sealed ones and plaintext left by older
    versions (any other file; its error file is `<file name>.error.txt`)."""
    d = rejected_dir(home)
    if not d.is_dir():
        return []
    out: list[tuple[Path, Path]] = []
    for p in sorted(d.iterdir()):
        if not p.is_file() or p.name.endswith(ERROR_SUFFIX) or p.name.endswith(".tmp"):
            continue
        if p.name.endswith(SEALED_SUFFIX):
            out.append((p, d / f"{p.name.removesuffix(SEALED_SUFFIX)}{ERROR_SUFFIX}"))
        else:
            out.append((p, d / f"{p.name}{ERROR_SUFFIX}"))
    return out


def _remove(*paths: Path) -> None:
    for p in paths:
        shred(p)


def seal_legacy(home: HomeLike, *, now: datetime | None = None) -> int:
    """Encrypt plaintext rejected envelopes that older versions left under their original names (which
    may name the subject): each gets a random name; its error line loses the old path. Returns how many."""
    sealed = 0
    for env, err in _entries(home):
        if env.name.endswith(SEALED_SUFFIX):
            continue
        name = new_name()
        message = "rejected"
        if err.exists():
            text = err.read_text(encoding="utf-8", errors="replace").strip()
            # the old line was "<inbox path>: field: what": keep "field: what" only
            _, sep, rest = text.partition(f"{env.name}: ")
            message = f"{name}: {rest if sep else 'rejected (error text of an older version withheld)'}"
        at = datetime.fromtimestamp(env.stat().st_mtime, UTC) if now is None else now
        keep_rejected(home, env.read_bytes(), message, name=name, now=at)
        _remove(env, err)
        sealed += 1
    return sealed


def purge_expired(home: HomeLike, *, now: datetime | None = None, days: int | None = None) -> int:
    """Remove (overwrite, unlink) rejected envelopes older than the retention; returns how many."""
    now = now or datetime.now(UTC)
    limit = now - timedelta(days=retention_days() if days is None else days)
    purged = 0
    for env, err in _entries(home):
        with open(env, "rb") as fh:
            head = fh.read(_HEADER + _NONCE)
        at = _rejected_at(head) or datetime.fromtimestamp(env.stat().st_mtime, UTC)
        if at <= limit:
            _remove(env, err)
            purged += 1
    return purged


def inbox_files(home: HomeLike) -> list[Path]:
    """Every regular file under `<home>/inbox/` (pending envelopes, sealed rejected envelopes, their
    error lines, the intake lock): the scope an erasure's byte scan must cover. Sorted."""
    d = inbox_dir(home)
    if not d.is_dir():
        return []
    return sorted(p for p in d.rglob("*") if p.is_file() and not p.is_symlink())


def purge_rejected_for(home: HomeLike, subject: Subject) -> int:
    """Remove every rejected envelope (sealed: decrypted in memory; plaintext from an older version)
    whose name, bytes or error line hold an identifier of `subject` in any spelling
    (`erasure.identity`), with its error line. Returns how many envelopes were removed. A sealed file
    that does not decrypt (no key, another key) holds nothing readable of anyone and is left as is."""
    purged = 0
    for env, err in _entries(home):
        if env.name.endswith(SEALED_SUFFIX):
            try:
                data = read_rejected(home, env)
            except (ValueError, ConfigError):
                continue
        else:
            data = env.read_bytes()
        texts = [env.name, data.decode("utf-8", errors="replace")]
        if err.exists():
            texts.append(err.read_text(encoding="utf-8", errors="replace"))
        if any(mentions_subject(t, subject, partial=False) for t in texts):
            _remove(env, err)
            purged += 1
    for err in sorted(rejected_dir(home).glob(f"*{ERROR_SUFFIX}")) if rejected_dir(home).is_dir() else []:
        # an error line whose envelope is gone, under a name from an older version
        if mentions_subject(err.name, subject, partial=False):
            _remove(err)
    return purged
