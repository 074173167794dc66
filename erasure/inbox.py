"""The inbox of request envelopes (`<home>/inbox/`) and what is kept of the rejected ones.

A rejected envelope may name anyone (it was rejected because it was wrong), so it is never kept as
it came. Intake writes it to `inbox/rejected/<name>.rejected`, encrypted with AES-256-GCM under
`keys/inbox.key` (32 random bytes, mode 0600, created on first use), beside `<name>.error.txt` with
its one-line error (which names fields and kinds of identifiers, never values). `<name>` is random:
the file name the envelope came under (perhaps an email address) is not kept. After
`ERASURE_INBOX_RETENTION_DAYS` days (default 30) both files are overwritten and removed.

An erasure looks here too: `inbox_files(home)` is every file under the inbox (the byte scan's scope),
and `purge_rejected_for(home, subject)` removes every rejected envelope that names the subject.

Only regular files of their own (not a symlink, not a file with another hard link, not a folder, a
FIFO or a device) are read, sealed or removed, each opened without following links: anything else is
refused and left alone, with one warning line that names no file (`REFUSED`). A link to another
user's file would otherwise be read into a sealed copy and then overwritten with zeros.

Encrypted file layout: `b"ERJ1"` + rejected-at (8 bytes, big-endian Unix seconds) + nonce (12 bytes)
+ AES-GCM ciphertext and tag; the first 12 bytes are the associated data.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from erasure.config import Home
from erasure.errors import ConfigError
from erasure.mentions import mentions_subject
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
REFUSED = (
    "inbox: an entry that is not a regular file of its own (a symlink, a hard link, a folder, a FIFO "
    "or a device) was refused and left alone"
)

log = logging.getLogger(__name__)


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


def _open_own(path: Path, flags: int) -> tuple[int, os.stat_result] | None:
    """`path` opened without following a link, when it is a regular file with no other hard link: its
    descriptor and status. None when it is anything else (or gone): it is left as it is."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # a symlink (ELOOP), a folder, a FIFO without a reader, gone
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        return None
    return fd, st


def is_own_file(path: Path) -> bool:
    """A regular file with one link, by its own status (a symlink is not followed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def read_entry(path: Path) -> bytes | None:
    """The bytes of an inbox file, read without following links; None when it is not a regular file
    of its own (the caller refuses it: `refuse`)."""
    opened = _open_own(path, os.O_RDONLY)
    if opened is None:
        return None
    with os.fdopen(opened[0], "rb") as fh:
        return fh.read()


def refuse() -> None:
    """The one line for an entry that is not a regular file of its own (it is left alone)."""
    log.warning(REFUSED)


def shred(path: Path) -> bool:
    """Overwrite a regular file of its own with zeros, then unlink its name (best effort on
    copy-on-write file systems). Anything else (a link, a hard-linked file, a folder, a device) is
    left alone. True when the file was removed."""
    opened = _open_own(path, os.O_RDWR)
    if opened is None:
        return False
    fd, st = opened
    try:
        os.pwrite(fd, b"\0" * st.st_size, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    now = os.lstat(path)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):  # swapped meanwhile: not ours to unlink
        return False
    path.unlink()
    return True


def _seal(key: bytes, data: bytes, at: datetime) -> bytes:
    header = MAGIC + int(at.timestamp()).to_bytes(8, "big", signed=True)
    nonce = secrets.token_bytes(_NONCE)
    return header + nonce + AESGCM(key).encrypt(nonce, data, header)


def _rejected_at(blob: bytes) -> datetime | None:
    if len(blob) < _HEADER + _NONCE or not blob.startswith(MAGIC):
        return None
    return datetime.fromtimestamp(int.from_bytes(blob[len(MAGIC) : _HEADER], "big", signed=True), UTC)


def keep_rejected(
    home: HomeLike, data: bytes, message: str, *, name: str | None = None, now: datetime | None = None
) -> str:
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
    blob = read_entry(path)
    if blob is None or _rejected_at(blob) is None:
        raise ValueError(f"{path.name}: not a sealed rejected envelope")
    key = inbox_key(home, create=False)
    if key is None:
        raise ConfigError(f"{key_path(home)} is missing: rejected envelopes cannot be read")
    try:
        return AESGCM(key).decrypt(blob[_HEADER : _HEADER + _NONCE], blob[_HEADER + _NONCE :], blob[:_HEADER])
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
        if not is_own_file(p) or p.name.endswith(ERROR_SUFFIX) or p.name.endswith(".tmp"):
            continue
        if p.name.endswith(SEALED_SUFFIX):
            out.append((p, d / f"{p.name.removesuffix(SEALED_SUFFIX)}{ERROR_SUFFIX}"))
        else:
            out.append((p, d / f"{p.name}{ERROR_SUFFIX}"))
    return out


def _remove(*paths: Path) -> None:
    for p in paths:
        shred(p)


def _text(path: Path) -> str | None:
    data = read_entry(path)
    return None if data is None else data.decode("utf-8", errors="replace")


def strangers(home: HomeLike) -> int:
    """Entries under `rejected/` that are not regular files of their own: each is refused (`refuse`,
    one line) and left alone. Returns how many."""
    d = rejected_dir(home)
    if not d.is_dir():
        return 0
    found = 0
    for p in sorted(d.iterdir()):
        if not is_own_file(p):
            refuse()
            found += 1
    return found


def seal_legacy(home: HomeLike, *, now: datetime | None = None) -> int:
    """Encrypt plaintext rejected envelopes that older versions left under their original names (which
    may name the subject): each gets a random name; its error line loses the old path. Returns how many."""
    sealed = 0
    for env, err in _entries(home):
        if env.name.endswith(SEALED_SUFFIX):
            continue
        data = read_entry(env)
        if data is None:  # swapped for a link since it was listed
            continue
        name = new_name()
        message = "rejected"
        text = _text(err)
        if text is not None:
            text = text.strip()
            # the old line was "<inbox path>: field: what": keep "field: what" only
            _, sep, rest = text.partition(f"{env.name}: ")
            message = f"{name}: {rest if sep else 'rejected (error text of an older version withheld)'}"
        at = datetime.fromtimestamp(env.stat().st_mtime, UTC) if now is None else now
        keep_rejected(home, data, message, name=name, now=at)
        _remove(env, err)
        sealed += 1
    return sealed


def purge_expired(home: HomeLike, *, now: datetime | None = None, days: int | None = None) -> int:
    """Remove (overwrite, unlink) rejected envelopes older than the retention; returns how many."""
    now = now or datetime.now(UTC)
    limit = now - timedelta(days=retention_days() if days is None else days)
    purged = 0
    for env, err in _entries(home):
        head = read_entry(env)
        if head is None:
            continue
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
            raw = read_entry(env)
            if raw is None:
                continue
            data = raw
        texts = [env.name, data.decode("utf-8", errors="replace")]
        if (text := _text(err)) is not None:
            texts.append(text)
        if any(mentions_subject(t, subject, partial=False) for t in texts):
            _remove(env, err)
            purged += 1
    for err in sorted(rejected_dir(home).glob(f"*{ERROR_SUFFIX}")) if rejected_dir(home).is_dir() else []:
        # an error line whose envelope is gone, under a name from an older version
        if mentions_subject(err.name, subject, partial=False):
            _remove(err)
    return purged
