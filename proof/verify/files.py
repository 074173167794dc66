"""Every file the verifier reads, given or found beside the pack, is opened here: regular files only.

A path is opened without following a final symlink (`O_NOFOLLOW`) and without blocking (`O_NONBLOCK`:
a FIFO or a device never stalls the open), then `fstat` must say it is a regular file, and its size is
checked against the caller's limit before one byte is read. What is read is charged to one ceiling per
verification (`MEMORY_CEILING`), so neither a huge file nor many files beside a pack can make the
verifier hold more than that. Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

MIB = 1024 * 1024
MEMORY_CEILING = 48 * MIB
"""Bytes one verification may read into memory, over every file it reads (the pack's own limit is
17 MiB, a statement's 1 MiB)."""
_CHUNK = 64 * 1024
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

_charged = 0


def reset_ceiling() -> None:
    """Start a new verification's account against `MEMORY_CEILING` (the command line calls it)."""
    global _charged
    _charged = 0


def _charge(n: int, what: str, error: type[Exception]) -> None:
    global _charged
    if _charged + n > MEMORY_CEILING:
        raise error(f"{what}: reading it would exceed the verifier's memory ceiling of {MEMORY_CEILING} bytes")
    _charged += n


def present(path: str | Path) -> bool:
    """Whether anything at all is at `path` (a link, FIFO or device included: then it is refused when
    read, never silently ignored)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


def open_regular(path: str | Path, limit: int, what: str, error: type[Exception], *, charge: bool = True) -> BinaryIO:
    """`path` opened for reading when it is a regular file (not a link) of at most `limit` bytes; its
    size is charged to the ceiling unless the caller streams it (`charge=False`). Else `error(message)`."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if os.path.islink(path):
            raise error(f"{what} is a symbolic link: only a regular file is read") from exc
        raise error(f"cannot read {what}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} is not a regular file (a FIFO, device or directory is never read)")
        if st.st_size > limit:
            raise error(f"{what} is larger than {limit} bytes ({st.st_size})")
        if charge:
            _charge(st.st_size, what, error)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | Path, limit: int, what: str, error: type[Exception]) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see `open_regular`); a file that grows
    past its limit while it is read is refused too."""
    with open_regular(path, limit, what, error) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise error(f"{what} is larger than {limit} bytes")
    return data


def sha256_regular(path: str | Path, limit: int, what: str, error: type[Exception]) -> str:
    """The sha256 hex of a regular file of at most `limit` bytes, read in steps (never whole)."""
    h, total = hashlib.sha256(), 0
    with open_regular(path, limit, what, error, charge=False) as fh:
        while chunk := fh.read(_CHUNK):
            total += len(chunk)
            if total > limit:
                raise error(f"{what} is larger than {limit} bytes")
            h.update(chunk)
    return h.hexdigest()
