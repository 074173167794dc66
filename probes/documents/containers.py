"""Compressors and archives: each decoded stream or member is a payload of its own, read again by the
caller through the whole pipeline. Limits are the caller's: `room()` says how many decoded bytes one
member may have now (the per-member cap and what is left of the file's budget); past it the member is
`container-too-large`. A stream that is not what its magic says is `container-corrupt`; an encrypted
member `encrypted-archive`.

- gzip (every member of a multi-member file), zlib, bz2, xz: the standard library;
- zstd: `zstandard`; lz4 frames: `lz4.frame`; brotli (no magic: only tried on a payload nothing else
  identified, and only kept when the whole payload decompresses to something identified);
- zip, tar (`ustar`), 7z (`py7zr`): every regular member; member names are records too.
"""

from __future__ import annotations

import bz2
import io
import lzma
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import brotli
import lz4.frame
import py7zr
import zstandard

from probes.documents import formats as fmt


@dataclass(frozen=True)
class Unread:
    """A payload (or part of one) that was not read, and why."""

    reason: str
    data: bytes | None
    size: int


class TooLarge(Exception):
    """Decoding went past the room given."""


Room = Callable[[], int]


def _bounded(chunks: Iterator[bytes], limit: int) -> bytes:
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > limit:
            raise TooLarge
    return bytes(out)


def decompress(kind: str, data: bytes, limit: int) -> bytes:
    """`data` decompressed as `kind`, up to `limit` bytes (`TooLarge` past it). Raises
    `OSError`/`EOFError`/`ValueError`/`zlib.error`/`lzma.LZMAError`/... when it is not what it claims."""
    if kind in (fmt.GZIP, fmt.ZLIB):
        out = bytearray()
        rest = data
        while rest:
            d = zlib.decompressobj(31 if kind == fmt.GZIP else 15)
            out += d.decompress(rest, limit + 1 - len(out))
            if len(out) > limit:
                raise TooLarge
            if not d.eof:
                raise EOFError("truncated stream")
            rest = d.unused_data
            if kind == fmt.ZLIB or not rest.startswith(b"\x1f\x8b"):
                break  # trailing bytes after the last member are not read as another one
        return bytes(out)
    if kind == fmt.BZ2:
        bz = bz2.BZ2Decompressor()
        out_b, done = bz.decompress(data, max_length=limit + 1), bz.eof
    elif kind == fmt.XZ:
        xz = lzma.LZMADecompressor()
        out_b, done = xz.decompress(data, max_length=limit + 1), xz.eof
    elif kind == fmt.ZSTD:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
            out_b = reader.read(limit + 1)
        # The reader stops quietly at a truncated frame: within the limit, the frames are walked again to
        # see each one end (a bounded cost: their whole output is the one just read).
        done, rest = len(out_b) <= limit, data
        while done and rest:
            frame = zstandard.ZstdDecompressor().decompressobj()
            frame.decompress(rest)
            done, rest = frame.eof, frame.unused_data
    elif kind == fmt.LZ4:
        lz = lz4.frame.LZ4FrameDecompressor()
        out_b, done = lz.decompress(data, max_length=limit + 1), lz.eof
    else:
        raise ValueError(f"not a compressor: {kind}")
    if len(out_b) > limit:
        raise TooLarge
    if not done:
        raise EOFError("truncated stream")
    return out_b


def brotli_payload(data: bytes, limit: int) -> bytes | None:
    """`data` decompressed whole as brotli, when it is (brotli has no magic: the caller keeps it only
    when what it decodes to is identified); None when it is not brotli, or larger than `limit`."""
    try:
        d = brotli.Decompressor()
        out = bytes(d.process(data, output_buffer_limit=limit + 1))
        if len(out) > limit or not d.is_finished():
            return None
    except brotli.error:
        return None
    return out


DECODE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    ValueError,
    zlib.error,
    lzma.LZMAError,
    zstandard.ZstdError,
    RuntimeError,
)


def _zip_members(data: bytes, room: Room) -> Iterator[bytes | Unread | str]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        yield Unread("container-corrupt", data, len(data))
        return
    for info in members:
        if info.is_dir():
            continue
        yield info.filename
        if info.flag_bits & 0x1:
            yield Unread("encrypted-archive", data, len(data))
            continue
        if info.file_size > room():
            yield Unread("container-too-large", data, len(data))
            continue
        try:
            yield archive.read(info)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, zlib.error, EOFError, RuntimeError):
            yield Unread("container-corrupt", data, len(data))


def _tar_members(data: bytes, room: Room) -> Iterator[bytes | Unread | str]:
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:")  # noqa: SIM115 (members are read lazily)
        members = archive.getmembers()
    except (tarfile.TarError, OSError, ValueError, EOFError):
        yield Unread("container-corrupt", data, len(data))
        return
    for info in members:
        yield info.name
        if not info.isfile():
            continue
        if info.size > room():
            yield Unread("container-too-large", data, len(data))
            continue
        f = archive.extractfile(info)
        if f is None:
            continue
        try:
            yield f.read()
        except (tarfile.TarError, OSError):
            yield Unread("container-corrupt", data, len(data))


def _sevenz_members(data: bytes, room: Room) -> Iterator[bytes | Unread | str]:
    try:
        archive = py7zr.SevenZipFile(io.BytesIO(data))
    except py7zr.exceptions.PasswordRequired:
        yield Unread("encrypted-archive", data, len(data))
        return
    except (py7zr.exceptions.Bad7zFile, py7zr.exceptions.ArchiveError, OSError, ValueError, EOFError, KeyError):
        yield Unread("container-corrupt", data, len(data))
        return
    with archive:
        if archive.needs_password():
            yield Unread("encrypted-archive", data, len(data))
            return
        infos = [i for i in archive.list() if not i.is_directory]
        for info in infos:
            yield info.filename
        if sum(i.uncompressed for i in infos) > room():
            yield Unread("container-too-large", data, len(data))
            return
        factory = py7zr.io.BytesIOFactory(limit=max(1, room()))
        try:
            archive.extractall(factory=factory)
        except Exception:  # py7zr raises what its codecs raise: the archive is then not read
            yield Unread("container-corrupt", data, len(data))
            return
        for name in sorted(factory.products):
            product = factory.products[name]
            product.seek(0)
            yield product.read()


def members(kind: str, data: bytes, room: Room) -> Iterator[bytes | Unread | str]:
    """The members of an archive, in order: a member's name (str, a record to match), then its bytes or
    why they were not read."""
    if kind == fmt.ZIP:
        yield from _zip_members(data, room)
    elif kind == fmt.TAR:
        yield from _tar_members(data, room)
    elif kind == fmt.SEVENZ:
        yield from _sevenz_members(data, room)
    else:
        raise ValueError(f"not an archive: {kind}")
