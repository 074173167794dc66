"""Tier 6 (uploads): blob bytes in every location of `store_meta.blob_locations`.

A location is a path relative to the store directory (`blobs/primary`), an absolute path, or an
fsspec URL (`memory://bucket`, `s3://bucket/prefix`). A blob lives at `<location>/<key[:2]>/<key>`
in EVERY location; `blobs` says whose it is and `blob_locations` where copies were written (the
location string exactly as listed in `store_meta`). Keys are random, never derived from content.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

import apsw
import fsspec
from fsspec import AbstractFileSystem

from erasure.errors import StoreError
from memory.schema import meta

COPY_CHUNK = 1 << 20


@dataclass(frozen=True)
class BlobData:
    """An upload to store: its file name and either a source path or the bytes themselves."""

    filename: str
    path: Path | None = None
    data: bytes | None = None


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
    """`<root>/<key[:2]>/<key>`."""
    return f"{root}/{key[:2]}/{key}"


def put_blob(store_dir: Path, location: str, key: str, blob: BlobData) -> str:
    """Copy the upload's bytes to one location; returns the path written inside that filesystem."""
    fs, root = location_fs(store_dir, location)
    target = blob_path(root, key)
    fs.makedirs(f"{root}/{key[:2]}", exist_ok=True)
    if blob.data is not None:
        with fs.open(target, "wb") as out:
            out.write(blob.data)
    else:
        assert blob.path is not None
        with blob.path.open("rb") as src, fs.open(target, "wb") as out:
            while chunk := src.read(COPY_CHUNK):
                out.write(chunk)
    return target


def delete_blob(store_dir: Path, location: str, key: str) -> bool:
    """Remove one copy of a blob; True if it existed."""
    fs, root = location_fs(store_dir, location)
    target = blob_path(root, key)
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
        assert blob.path is not None
        with blob.path.open("rb") as src:
            while chunk := src.read(COPY_CHUNK):
                h.update(chunk)
                size += len(chunk)
    return h.hexdigest(), size
