"""Reproducible `proof.tar.gz`: same files in, same bytes out.

Entries sorted by path under one top directory; mtime 0; uid/gid 0, empty user/group names; mode 0644
files, 0755 dirs; USTAR headers; gzip header with mtime 0, no file name, XFL 0 and OS 255; compression
level 6 (bytes are identical for the same zlib). The verifier refuses any other value of these fields;
a pack is named by its signed statement's digest, never by these bytes.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path


def _info(name: str, mtime: int, *, size: int = 0, directory: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    info.mode = 0o755 if directory else 0o644
    info.size = 0 if directory else size
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def tar_gz_bytes(top: str, files: Mapping[str, bytes]) -> bytes:
    """The gzipped tar of `files` (relative path -> bytes) under `top/`, with its directories."""
    when = 0
    dirs = {top}
    for rel in files:
        parts = rel.split("/")[:-1]
        dirs.update(f"{top}/{'/'.join(parts[:i])}" for i in range(1, len(parts) + 1))
    entries = sorted(
        [(d, None) for d in dirs] + [(f"{top}/{rel}", data) for rel, data in files.items()], key=lambda e: e[0]
    )
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in entries:
            if data is None:
                tar.addfile(_info(name, when, directory=True))
            else:
                tar.addfile(_info(name, when, size=len(data)), io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="", compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def write_atomic(path: Path, data: bytes, mode: int = 0o644, *, replace: bool = True) -> None:
    """Write `path` with `data` and `mode` in one rename, so a reader never sees half a file. Without
    `replace`, an existing file is never overwritten (`FileExistsError`), even one that appears
    meanwhile: the new file is hard-linked into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
