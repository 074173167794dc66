"""Private files and folders: what holds a subject's data (the engine's vault, the store, blobs,
the outbox) is created readable by its owner only, whatever the umask: folders 0700, files 0600.

Only what we create is tightened: an existing folder or file that someone else made (a home given
with `--home /srv/x`, an agent's own database) keeps its mode.

A path built from what a store holds (a blob key, a session id, a corpus path, a Chroma segment id) is
data, not a place we trust: `inside_folder` is the one rule every eraser and probe applies to it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from erasure.errors import StoreError

DIR_MODE = 0o700
FILE_MODE = 0o600
PRIVATE_UMASK = 0o077


def private_umask() -> None:
    """From here on this process, and every process it starts (Prefect's server and workers, PostgreSQL
    through `runuser`), creates what has no explicit mode readable by its owner only: files 0600,
    folders 0700. A stricter umask already set is kept."""
    os.umask(os.umask(PRIVATE_UMASK) | PRIVATE_UMASK)


def write_private(path: Path, data: bytes) -> None:
    """Write `path` whole as a private file (0600, never through a symlink): to a temporary name beside
    it first, then renamed over it, so a reader sees the old bytes or the new ones."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = open_private(tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def private_dirs(path: Path) -> Path:
    """Create `path` and every missing parent, each 0700 (`os.makedirs` gives the mode to the last
    level only). Existing levels are left as they are. Returns `path`."""
    path = Path(path)
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # another process made it meanwhile
        os.chmod(d, DIR_MODE)  # the umask may have taken more; never less than the owner's rwx
    return path


def tighten(path: Path) -> None:
    """Take group and other permissions away from `path` when this user owns it (a file or folder
    of ours that an older version left readable by others). Anything else is left alone."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return
    if st.st_uid == os.geteuid() and st.st_mode & 0o077 and not stat.S_ISLNK(st.st_mode):
        os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)


def create_private_file(path: Path) -> bool:
    """Create `path` empty with mode 0600 unless it exists (never through a symlink). Returns True
    when this call created it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return True


def open_private(path: Path) -> int:
    """Open `path` for writing (created or truncated) as a private file: 0600 even when it existed
    with another mode; a symlink in its place is refused (`OSError` ELOOP). Returns the descriptor."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refused(kind: str) -> StoreError:
    return StoreError(
        f"the store has a {kind} that leads outside its folder: refused, nothing was deleted "
        "(its rows were tampered with, or written by another program)"
    )


def check_relative(relative: str, kind: str) -> None:
    """The half of `inside_folder` that needs no file system (for a location that is not local, e.g.
    `s3://`): `relative` is a non-empty relative path with no `..` component. `StoreError` otherwise."""
    if not isinstance(relative, str) or not relative or "\x00" in relative or relative.startswith("/"):
        raise _refused(kind)
    parts = relative.split("/")
    if ".." in parts or all(p in ("", ".") for p in parts):
        raise _refused(kind)


def inside_folder(root: Path, relative: str, kind: str) -> Path:
    """`root / relative`, where `relative` comes from a store's rows or files (`kind` says what it is:
    "blob key", "session id", "corpus path", "chroma segment id"), once it is known to lie inside the
    folder `root`: no `..` component, no absolute part (`check_relative`), and, with every symlink
    resolved, strictly under the resolved `root` (a link inside that leads out, or loops, is refused).
    The path returned is not resolved: removing it removes a link, never what the link points at.

    Anything else raises `StoreError` naming the kind, never the value (a value can name a person, or
    be the attacker's message); callers check every path before their first deletion."""
    check_relative(relative, kind)
    path = Path(root) / relative
    base = os.path.realpath(root)
    real = os.path.realpath(path)
    if real == base or os.path.commonpath([base, real]) != base:
        raise _refused(kind)
    try:
        os.stat(real)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # realpath stops at a loop without saying so
            raise _refused(kind) from None
    return path
