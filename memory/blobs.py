"""Tier 6 (uploads): blob bytes in every location of `store_meta.blob_locations`.

A location is a path relative to the store directory (`blobs/primary`), an absolute path, or an
fsspec URL (`memory://bucket`, `s3://bucket/prefix`). A blob lives at `<location>/<key[:2]>/<key>`
in EVERY location; `blobs` says whose it is and `blob_locations` where copies were written (the
location string exactly as listed in `store_meta`). Keys are random, never derived from content.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import apsw
import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from erasure.errors import InputError, StoreError
from erasure.files import check_relative, inside_folder, open_private, private_dirs
from memory.schema import meta

COPY_CHUNK = 1 << 20


@dataclass(frozen=True)
class BlobData:
    """An upload to store: its file name and either a source path or the bytes themselves.

    `identity` is the source file's (st_dev, st_ino) when it was checked: the file opened later to be
    hashed and copied must be that same regular file (not a file swapped in after the check)."""

    filename: str
    path: Path | None = None
    data: bytes | None = None
    identity: tuple[int, int] | None = None


def open_source(blob: BlobData) -> BinaryIO:
    """Open the upload's source file for reading: never through a symlink in its last component, a
    regular file with one link only (no hard link made since the check), and the very file checked
    when `identity` is set. `InputError` otherwise (the
    message names no file: a file name can name a person)."""
    assert blob.path is not None
    try:
        fd = os.open(blob.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        raise InputError("an attachment could not be opened (it changed after it was checked?)") from None
    st = os.fstat(fd)
    if (
        not stat.S_ISREG(st.st_mode)
        or st.st_nlink != 1
        or (blob.identity is not None and (st.st_dev, st.st_ino) != blob.identity)
    ):
        os.close(fd)
        raise InputError("an attachment is not the regular file that was checked: refused")
    return os.fdopen(fd, "rb")


def new_blob_key() -> str:
    """A fresh opaque blob key (32 hex digits)."""
    return secrets.token_hex(16)


def locations(conn: apsw.Connection) -> list[str]:
    """The configured blob locations (primary first), from `store_meta.blob_locations`."""
    try:
        value = json.loads(meta(conn, "blob_locations"))
    except json.JSONDecodeError as exc:
        raise StoreError("store_meta.blob_locations is not JSON") from exc
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise StoreError("store_meta.blob_locations must be a non-empty JSON list of strings")
    return list(value)


def location_fs(store_dir: Path, location: str) -> tuple[AbstractFileSystem, str]:
    """The filesystem and root path of one location (relative paths are under `store_dir`)."""
    if "://" in location:
        fs, root = fsspec.core.url_to_fs(location)
        return fs, str(root).rstrip("/")
    path = Path(location)
    if not path.is_absolute():
        path = Path(store_dir) / path
    return fsspec.filesystem("file"), str(path)


def blob_path(root: str, key: str) -> str:
    """`<root>/<key[:2]>/<key>` (unchecked: `blob_file` is for keys read from a store)."""
    return f"{root}/{key[:2]}/{key}"


def blob_file(store_dir: Path, location: str, key: str) -> tuple[AbstractFileSystem, str]:
    """The filesystem and path of one copy of the blob `key` in `location`, both read from the store's
    rows: a relative location must lie inside the store's folder, and the copy inside its location
    (`erasure.files.inside_folder`; a location that is not local gets the check that needs no file
    system). `StoreError` naming the kind ("blob location", "blob key") otherwise."""
    fs, root = location_fs(store_dir, location)
    rel = f"{key[:2]}/{key}"
    if not isinstance(fs, LocalFileSystem):
        check_relative(rel, "blob key")
        return fs, blob_path(root, key)
    if "://" not in location and not Path(location).is_absolute():
        inside_folder(Path(store_dir), location, "blob location")
    return fs, str(inside_folder(Path(root), rel, "blob key"))


def _open_target(fs: AbstractFileSystem, root: str, target: str, key: str) -> BinaryIO:
    if isinstance(fs, LocalFileSystem):  # a private copy: folders 0700, the file 0600, no symlink
        private_dirs(Path(root) / key[:2])
        return os.fdopen(open_private(Path(target)), "wb")
    fs.makedirs(f"{root}/{key[:2]}", exist_ok=True)
    out: BinaryIO = fs.open(target, "wb")
    return out


def put_blob(store_dir: Path, location: str, key: str, blob: BlobData) -> str:
    """Copy the upload's bytes to one location; returns the path written inside that filesystem.
    On the local filesystem the copy is private (0600, in folders made 0700)."""
    fs, root = location_fs(store_dir, location)
    target = blob_path(root, key)
    if blob.data is not None:
        with _open_target(fs, root, target, key) as out:
            out.write(blob.data)
    else:
        with open_source(blob) as src, _open_target(fs, root, target, key) as out:
            while chunk := src.read(COPY_CHUNK):
                out.write(chunk)
    return target


def delete_blob(store_dir: Path, location: str, key: str) -> bool:
    """Remove one copy of a blob; True if it existed. The key and location are checked (`blob_file`)."""
    fs, target = blob_file(store_dir, location, key)
    if not fs.exists(target):
        return False
    fs.rm(target)
    return True


def digest_and_size(blob: BlobData) -> tuple[str, int]:
    """sha256 hex and size of the upload's bytes."""
    h = hashlib.sha256()
    size = 0
    if blob.data is not None:
        h.update(blob.data)
        size = len(blob.data)
    else:
        with open_source(blob) as src:
            while chunk := src.read(COPY_CHUNK):
                h.update(chunk)
                size += len(chunk)
    return h.hexdigest(), size
