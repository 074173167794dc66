"""Check 1, archive (`ArchiveError`): the pack is read as a stream in steps of 64 KiB, every size
checked before anything is allocated.

The pack (at most 17 MiB) is exactly ONE gzip member: deflate, no optional header field (the writer
sets none), mtime 0, XFL 0, OS 255, CRC-32 and length right, no byte after it. It unpacks to at most
16 MiB holding exactly ONE POSIX ustar stream: every header has a valid checksum, the ustar magic,
zero-padded octal numbers, NUL-padded names, no link name; mode 0644 (files) or 0755 (directories),
uid/gid/mtime 0, no user or group name, no device numbers, type '0' or '5', the name split into
prefix/name only as the writer splits it; entries are regular files and directories only (no pax or
GNU header, link, device, fifo or sparse file); data padding is zero; the stream ends with two zero
blocks and nothing but zero bytes follows them. At most 256 entries; names relative and normal, parts
of A-Z a-z 0-9 . _ - starting with a letter or digit, at most three parts (top/signatures/file), no
duplicate; one top directory named like a request id. Sizes, from the header: every file at most
4 MiB, all of them 8 MiB together. Then the files are exactly those manifest.json lists, plus
manifest.json, SHA256SUMS, signatures/engine.intoto.json and signatures/dpo.intoto.json (the last one
optional only when the DPO's attestation is not required), and, when manifest.json says its
time_source is rfc3161, each envelope's token: signatures/engine.tsr and signatures/dpo.tsr.
"""

from __future__ import annotations

import io
import re
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from proof.verify.errors import ArchiveError, checking, fail
from proof.verify.files import open_regular
from proof.verify.strict_json import json_object, parse_json
from wire.format import (
    DPO_ENVELOPE,
    DPO_TSR,
    ENGINE_ENVELOPE,
    ENGINE_TSR,
    EVIDENCE,
    MANIFEST,
    REQUEST_ID,
    SUMS,
    TIME_SOURCE_RFC3161,
    sha256_hex,
)

MIB = 1024 * 1024
MAX_FILE_BYTES = 4 * MIB
"""Every file, each: they are parsed in memory."""
MAX_FILES_BYTES = 8 * MIB
"""Every file, together."""
MAX_UNPACKED_BYTES = MAX_FILES_BYTES + 8 * MIB
"""The tar stream: the files, their headers and padding, and the zero blocks after the end."""
MAX_PACK_BYTES = MAX_UNPACKED_BYTES + MIB
"""The gzip member: deflate never grows data by more than a few bytes a 16 KiB block."""
MAX_ENTRIES = 256
MAX_DEPTH = 3
"""top/signatures/file: the pack's own layout is two levels deep below its top directory."""

WRITER_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
"""The only gzip header the writer writes: deflate, no flag, mtime 0, XFL 0, OS 255 (unknown)."""
WRITER_MODES = {"file": 0o644, "dir": 0o755}
"""The only member modes the writer writes (no setuid, setgid, sticky or group/other write bit)."""
BLOCK = 512
_CHUNK = 64 * 1024
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


# --- 1 archive: one gzip member ------------------------------------------------------------------


class _Gunzip:
    """Exactly one gzip member (RFC 1952) as the pack writer makes it, inflated at most `n` bytes a
    call; its trailer is checked, and nothing may follow it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._taken = 0
        self._unpacked = 0
        self._crc = 0
        self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        self._ended = False
        head = self._take_exact(10)
        if head[:2] != b"\x1f\x8b":
            fail(ArchiveError, "not a readable tar.gz: not a gzip file")
        if len(head) < 10:
            fail(ArchiveError, "not a readable tar.gz: the gzip header is truncated")
        if head[2] != 8:
            fail(ArchiveError, "not a readable tar.gz: the gzip compression method is not deflate")
        if head[3] != 0:
            fail(
                ArchiveError,
                "the gzip header carries optional fields (name, comment, extra field or header"
                " CRC) that the pack writer never writes",
            )
        if head != WRITER_GZIP_HEADER:
            what = (
                "mtime"
                if head[4:8] != WRITER_GZIP_HEADER[4:8]
                else ("XFL (compression level)" if head[8] != WRITER_GZIP_HEADER[8] else "OS byte")
            )
            fail(
                ArchiveError,
                f"the gzip header has a {what} the pack writer never writes (it writes mtime 0, XFL 0, OS 255)",
            )

    def _take(self, n: int) -> bytes:
        data = self._raw.read(n)
        self._taken += len(data)
        if self._taken > MAX_PACK_BYTES:
            fail(ArchiveError, f"the pack is larger than {MAX_PACK_BYTES} bytes")
        return data

    def _take_exact(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            part = self._take(left)
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def read(self, n: int) -> bytes:
        """Up to `n` unpacked bytes; b"" once the member has ended and its trailer checked out."""
        while not self._ended:
            if self._inflate.eof:
                self._trailer()
                break
            src = self._inflate.unconsumed_tail or self._take(_CHUNK)
            try:  # with no input left, zlib may still hold output: ask before calling it truncated
                out = self._inflate.decompress(src, n)
            except zlib.error:
                fail(ArchiveError, "not a readable tar.gz: the deflate data is corrupt")
            if out:
                self._unpacked += len(out)
                if self._unpacked > MAX_UNPACKED_BYTES:
                    fail(ArchiveError, f"the archive unpacks to more than {MAX_UNPACKED_BYTES} bytes")
                self._crc = zlib.crc32(out, self._crc)
                return out
            if not src and not self._inflate.eof:
                fail(ArchiveError, "not a readable tar.gz: the gzip stream is truncated")
        return b""

    def _trailer(self) -> None:
        tail = self._inflate.unused_data
        if len(tail) < 8:
            tail += self._take_exact(8 - len(tail))
        if len(tail) < 8:
            fail(ArchiveError, "not a readable tar.gz: the gzip trailer is truncated")
        crc, size = struct.unpack("<II", tail[:8])
        if crc != self._crc:
            fail(ArchiveError, "the gzip CRC-32 does not match the unpacked bytes")
        if size != self._unpacked & 0xFFFFFFFF:
            fail(ArchiveError, "the gzip trailer gives another length than the unpacked bytes")
        if tail[8:] or self._take(1):
            fail(
                ArchiveError,
                "bytes after the gzip member (a second member or trailing data): a pack is exactly one gzip member",
            )
        self._ended = True

    def read_exact(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            part = self.read(min(left, _CHUNK))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)


# --- 1 archive: one ustar stream -----------------------------------------------------------------


@dataclass(frozen=True)
class Blob:
    """One file of the pack: its size, its sha256 and its bytes."""

    size: int
    sha256: str
    data: bytes


_NUMBERS = (
    ("mode", 100, 8),
    ("uid", 108, 8),
    ("gid", 116, 8),
    ("size", 124, 12),
    ("mtime", 136, 12),
    ("devmajor", 329, 8),
    ("devminor", 337, 8),
)
_STRINGS = (("name", 0, 100), ("linkname", 157, 100), ("uname", 265, 32), ("gname", 297, 32), ("prefix", 345, 155))
_KINDS = {
    b"0": "file",
    b"\0": "file",
    b"5": "dir",
    b"1": "hard link",
    b"2": "symlink",
    b"3": "character device",
    b"4": "block device",
    b"6": "fifo",
    b"7": "contiguous file",
    b"x": "pax extended header",
    b"g": "pax global header",
    b"L": "GNU long name header",
    b"K": "GNU long link header",
    b"S": "GNU sparse file",
    b"V": "GNU volume header",
    b"M": "GNU multi-volume header",
    b"N": "GNU old long name header",
    b"D": "GNU dump directory",
}


@dataclass(frozen=True)
class _Header:
    name: str
    kind: str
    size: int


def _field(block: bytes, what: str, start: int, width: int, at: int) -> bytes:
    raw = block[start : start + width]
    value, _, rest = raw.partition(b"\0")
    if rest.strip(b"\0"):
        fail(ArchiveError, f"the tar header at byte {at} has bytes after the end of its {what}")
    return value


def _header(block: bytes, at: int) -> _Header:
    """One ustar header, every field checked (the writer's exact format)."""
    stored = block[148:156]
    if re.fullmatch(rb"[0-7]{6}\0 ", stored) is None or int(stored[:6], 8) != sum(block[:148]) + 8 * 0x20 + sum(
        block[156:]
    ):
        fail(
            ArchiveError,
            f"a tar header with a bad checksum at byte {at}: a tar reader that skips it (GNU tar) would read on",
        )
    if block[257:265] != b"ustar\x0000":
        fail(ArchiveError, f"the tar header at byte {at} is not POSIX ustar (a GNU or old tar header)")
    numbers = {}
    for what, start, width in _NUMBERS:
        raw = block[start : start + width]
        if what.startswith("dev") and not raw.strip(b"\0"):
            continue  # only devices carry device numbers; the writer leaves them empty
        if re.fullmatch(rb"[0-7]{%d}\0" % (width - 1), raw) is None:
            fail(ArchiveError, f"the tar header at byte {at} has a {what} that is not zero-padded octal")
        numbers[what] = int(raw[:-1], 8)
    texts = {what: _field(block, what, start, width, at) for what, start, width in _STRINGS}
    if block[500:512].strip(b"\0"):
        fail(ArchiveError, f"the tar header at byte {at} has bytes in its padding")
    name = texts["name"].decode("latin-1")
    if texts["prefix"]:
        name = texts["prefix"].decode("latin-1") + "/" + name
    kind = _KINDS.get(block[156:157], "entry of unknown type")
    if kind in ("file", "dir"):
        if texts["linkname"]:
            fail(ArchiveError, f"a {kind} with a link name in archive: {name!r}")
        if kind == "dir" and numbers["size"]:
            fail(ArchiveError, f"a directory with a size in archive: {name!r}")
        _writer_fields(block, kind, numbers, texts, name)
        return _Header(name, kind, numbers["size"])
    if kind.startswith("pax"):
        fail(ArchiveError, f"a {kind} in archive (pax extensions are never written by the pack writer): {name!r}")
    fail(ArchiveError, f"{kind} in archive: {name!r}")


def _writer_fields(block: bytes, kind: str, numbers: Mapping[str, int], texts: Mapping[str, bytes], name: str) -> None:
    """Every header field the writer fixes holds what it writes: a pack's bytes (and a member's
    permissions once extracted) cannot vary while every other check passes."""
    mode = numbers["mode"]
    if mode != WRITER_MODES[kind]:
        fail(
            ArchiveError,
            f"a {kind} with mode {mode:04o} in archive (the writer writes"
            f" {WRITER_MODES[kind]:04o}; setuid, setgid or other bits are refused): {name!r}",
        )
    for what in ("uid", "gid", "mtime"):
        if numbers[what]:
            fail(ArchiveError, f"a {kind} with {what} {numbers[what]} in archive (the writer writes 0): {name!r}")
    for what in ("uname", "gname"):
        if texts[what]:
            fail(ArchiveError, f"a {kind} with a {what} in archive (the writer writes none): {name!r}")
    if "devmajor" in numbers or "devminor" in numbers:
        fail(ArchiveError, f"a {kind} with device numbers in archive (the writer writes none): {name!r}")
    if block[156:157] != (b"0" if kind == "file" else b"5"):
        fail(ArchiveError, f"a {kind} with the old type flag NUL in archive (the writer writes '0'): {name!r}")
    if kind == "dir" and not name.endswith("/"):
        fail(ArchiveError, f"a directory name without its final '/' in archive: {name!r}")
    if (texts["prefix"], texts["name"]) != _writer_split(name):
        fail(
            ArchiveError,
            f"a name split between the prefix and name fields as the writer never splits it in archive: {name!r}",
        )


def _writer_split(name: str) -> tuple[bytes, bytes]:
    """(prefix, name) fields as the writer (Python's tarfile, ustar) stores `name`: whole in the name
    field when it fits in 100 bytes, else split at the first '/' that fits both fields."""
    raw = name.encode("latin-1")
    if len(raw) <= 100:
        return b"", raw
    parts = raw.split(b"/")
    for i in range(1, len(parts)):
        prefix, rest = b"/".join(parts[:i]), b"/".join(parts[i:])
        if len(prefix) <= 155 and len(rest) <= 100:
            return prefix, rest
    return b"", b""  # never written: refused by the caller


def _member_name(raw: str, kind: str) -> str:
    name = raw[:-1] if kind == "dir" and raw.endswith("/") else raw
    if not name or "\x00" in name or "\\" in name:
        fail(ArchiveError, "an entry has an empty or malformed name")
    if name.startswith("/"):
        fail(ArchiveError, f"absolute path in archive: {name!r}")
    parts = name.split("/")
    if ".." in parts:
        fail(ArchiveError, f"path with '..' in archive: {name!r}")
    if any(p in ("", ".") for p in parts):
        fail(ArchiveError, f"non-normal path in archive: {name!r}")
    if not all(_PART.fullmatch(p) for p in parts):
        fail(
            ArchiveError,
            f"a name with a character outside A-Z a-z 0-9 . _ - (or a part not starting with a"
            f" letter or digit) in archive: {name!r}",
        )
    if len(parts) > MAX_DEPTH:
        fail(ArchiveError, f"a name nested deeper than the pack's layout (top/folder/file) in archive: {name!r}")
    return name


def _read_data(gz: _Gunzip, size: int) -> tuple[str, bytes]:
    """`size` bytes of member data and their sha256."""
    parts: list[bytes] = []
    left = size
    while left > 0:
        chunk = gz.read(min(left, _CHUNK))
        if not chunk:
            fail(ArchiveError, "not a readable tar.gz: a file is truncated")
        parts.append(chunk)
        left -= len(chunk)
    data = b"".join(parts)
    return sha256_hex(data), data


@dataclass
class Unpacked:
    """The files of a pack that passed check 1's safety part, by path below the top directory."""

    top: str
    files: dict[str, Blob] = field(default_factory=dict)


def _end_of_archive(gz: _Gunzip, at: int) -> None:
    second = gz.read_exact(BLOCK)
    if len(second) < BLOCK or second.strip(b"\0"):
        fail(
            ArchiveError,
            f"a lone zero block at byte {at} (the end-of-archive marker is two): a tar"
            " reader that skips it would read on",
        )
    while True:
        rest = gz.read(_CHUNK)
        if not rest:
            return
        if rest.strip(b"\0"):
            fail(ArchiveError, "non-zero bytes after the end of the archive: a tar reader that goes on would see more")


def unpack(raw: IO[bytes]) -> Unpacked:
    """Check 1, safety part: read a pack as a stream (see the module docstring for every rule)."""
    gz = _Gunzip(raw)
    out: Unpacked | None = None
    dirs: set[str] = set()
    seen: set[str] = set()
    total = at = count = 0
    while True:
        block = gz.read_exact(BLOCK)
        if not block:
            fail(ArchiveError, "the tar stream ends without its end-of-archive marker")
        if len(block) < BLOCK:
            fail(ArchiveError, "not a readable tar.gz: a tar header is truncated")
        if not block.strip(b"\0"):
            _end_of_archive(gz, at)
            break
        hdr = _header(block, at)
        count += 1
        if count > MAX_ENTRIES:
            fail(ArchiveError, f"more than {MAX_ENTRIES} entries")
        name = _member_name(hdr.name, hdr.kind)
        head, _, rel = name.partition("/")
        if out is None:
            if not REQUEST_ID.fullmatch(head):
                fail(ArchiveError, f"the top directory is not named like a request id: {head!r}")
            out = Unpacked(head)
        elif head != out.top:
            fail(ArchiveError, f"more than one top-level directory ({out.top!r}, {head!r})")
        if name in seen:
            fail(ArchiveError, f"duplicate entry in archive: {name!r}")
        seen.add(name)
        at += BLOCK
        if hdr.kind == "dir":
            dirs.add(name)
            continue
        if not rel:
            fail(ArchiveError, f"file outside the top directory: {name!r}")
        if hdr.size > MAX_FILE_BYTES:
            fail(ArchiveError, f"{rel} is larger than {MAX_FILE_BYTES} bytes")
        total += hdr.size
        if total > MAX_FILES_BYTES:
            fail(ArchiveError, f"the files exceed {MAX_FILES_BYTES} bytes together")
        digest, data = _read_data(gz, hdr.size)
        out.files[rel] = Blob(hdr.size, digest, data)
        pad = -hdr.size % BLOCK
        if gz.read_exact(pad).strip(b"\0"):
            fail(ArchiveError, f"non-zero bytes in the block padding after {rel}")
        at += hdr.size + pad
    if out is None or not out.files:
        fail(ArchiveError, "the archive holds no files")
    parents = {f"{out.top}/{'/'.join(rel.split('/')[:i])}" for rel in out.files for i in range(1, rel.count("/") + 1)}
    stray = sorted(dirs - parents - {out.top})
    if stray:
        fail(ArchiveError, f"unexpected directory in archive: {stray[0]!r}")
    return out


def extract(data: bytes) -> tuple[str, dict[str, bytes]]:
    """Check 1's safety part on the bytes of a pack; return (top directory, {relative path: bytes})."""
    with checking(ArchiveError):
        pack = unpack(io.BytesIO(data))
    return pack.top, {name: blob.data for name, blob in pack.files.items()}


def _manifest_paths(manifest: Any) -> list[str]:
    entries = json_object(manifest, MANIFEST, ArchiveError).get("files")
    if not isinstance(entries, list):
        fail(ArchiveError, "manifest.json has no file list")
    paths: list[str] = []
    for e in entries:
        path = e.get("path") if isinstance(e, dict) else None
        if not isinstance(path, str) or not path:
            fail(ArchiveError, "manifest.json lists an entry without a path")
        if (
            path in (MANIFEST, SUMS)
            or path.startswith("signatures/")
            or path.startswith("/")
            or ".." in path.split("/")
        ):
            fail(ArchiveError, f"manifest.json lists a path it may not list: {path!r}")
        paths.append(path)
    if len(set(paths)) != len(paths):
        fail(ArchiveError, "manifest.json lists a path twice")
    return paths


def check_file_set(top: str, names: set[str], manifest_data: bytes | None, *, require_dpo: bool) -> dict[str, Any]:
    """Check 1, completeness part: the files are exactly what the manifest says. Returns the manifest."""
    if manifest_data is None:
        fail(ArchiveError, "missing file manifest.json")
    manifest = parse_json(manifest_data, MANIFEST, ArchiveError)
    listed = _manifest_paths(manifest)
    absent = [p for p in EVIDENCE if p not in listed]
    if absent:
        fail(ArchiveError, f"manifest.json does not list {absent[0]}")
    expected = {*listed, MANIFEST, SUMS, ENGINE_ENVELOPE} | ({DPO_ENVELOPE} if require_dpo else set())
    if isinstance(manifest, dict) and manifest.get("time_source") == TIME_SOURCE_RFC3161:
        # each envelope has its RFC 3161 token beside it (check 9 reads them)
        expected |= {ENGINE_TSR} | ({DPO_TSR} if require_dpo or DPO_ENVELOPE in names else set())
    allowed = expected | {DPO_ENVELOPE}
    missing, extra = sorted(expected - names), sorted(names - allowed)
    if missing:
        fail(ArchiveError, f"missing file {missing[0]}" + (f" (and {len(missing) - 1} more)" if missing[1:] else ""))
    if extra:
        fail(ArchiveError, f"unexpected file {extra[0]}" + (f" (and {len(extra) - 1} more)" if extra[1:] else ""))
    if manifest.get("request_id") != top:
        fail(ArchiveError, "the top directory is not named after the manifest's request id")
    return dict(manifest)


def read_pack(pack_path: str | Path) -> bytes:
    """The bytes of a pack file (at most `MAX_PACK_BYTES`); `ArchiveError` if it cannot be read or is
    no gzip file at all (checked on its first bytes, so a device of endless bytes is refused at once)."""
    try:
        with open_regular(pack_path, MAX_PACK_BYTES, "the pack", ArchiveError) as fh:
            head = fh.read(2)
            if head != b"\x1f\x8b":
                fail(ArchiveError, "not a readable tar.gz: not a gzip file")
            data = head + fh.read(MAX_PACK_BYTES - 1)
            if fh.read(1):
                fail(ArchiveError, f"the pack is larger than {MAX_PACK_BYTES} bytes")
            return data
    except OSError as exc:
        raise ArchiveError(f"cannot read the pack: {exc.strerror}") from exc
