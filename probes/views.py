"""Decoded views: the byte probe reads every file as software writes text, not only as raw bytes.

The raw scan (`probes.bytescan`) matches literal spellings. People's data is also written escaped,
encoded, compressed and re-spelled, and a literal scan is blind to all of it. This module reads every
file through views and matches each identifier in one canonical form:

Views (each applied to what the one before produced, nested up to `MAX_DEPTH` decodings deep):
- raw UTF-8 text, and the text views of `probes.matcher` (JSON, percent, HTML and quoted-printable
  escapes);
- base64 and base64url runs of at least `MIN_BASE64` characters (decoded at every alignment);
- UTF-16 (LE/BE, with or without a BOM) and UTF-32 text;
- compressed containers: gzip, zlib/deflate streams (a whole file, or a PDF's `FlateDecode` streams),
  zip members, bz2, xz; each member's bytes go through every view again;
- SQLite database files: besides their bytes, every text or blob value longer than a page's share is
  read through SQL too (a long value is split over overflow pages, with page pointers in between).

Each identifier is matched in one canonical form, with its own regexes and raw-byte triggers
(`probes.matcher`: the canonical form, the needles' patterns and the text views are described there).

Speed: a large file is never decoded whole. One hyperscan pass over its bytes finds triggers (a
fragment of an identifier that survives every text encoding, a phone's digits with encoded separators,
an escape run, a base64 or UTF-16 run, a container's magic), and only windows around them are decoded.
Decoded payloads up to `WHOLE_PAYLOAD` bytes are matched whole.

Nothing unread is certified: a file (or container member) that no view can read is listed as
`Unscanned`, with its digest, size and reason: an image, an encrypted archive or PDF, a container that
fails to decode or lies past the depth or size limits, a PDF stream in a filter no view decodes, and a
file of unknown format whose bytes look compressed or encrypted (entropy of at least
`OPAQUE_ENTROPY` bits per byte). No path is reported (a path can spell a person).
"""

from __future__ import annotations

import base64
import binascii
import bz2
import hashlib
import io
import lzma
import os
import re
import time
import zipfile
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from erasure.sqlite import connect
from probes.bytescan import _Walk
from probes.matcher import GENERIC_NAMES, MIN_BASE64, WIDE_CODECS, WIDE_TEXT, Matcher, canonical
from probes.model import Unscanned

MAX_DEPTH = 4
"""Decodings nested in one another (a base64 run in a JSON string in a gzip member is three)."""
MAX_MEMBER = 64 << 20
"""Largest decoded payload read; a larger one is unscanned (`container-too-large`)."""
MAX_DECODED_PER_FILE = 256 << 20
"""Decoded bytes read for one file, all its members together."""
WHOLE_PAYLOAD = 1 << 20
"""Decoded payloads up to this size are matched whole, not only around triggers."""
CHUNK = 16 << 20
OVERLAP = 8 << 10
WINDOW = 640
"""Bytes read on each side of a trigger."""
MAX_SPAN = 8 * WINDOW
"""Longest window that overlapping windows merge into."""
MAX_WORKERS = 4
OPAQUE_ENTROPY = 7.9
OPAQUE_MIN_BYTES = 4096
LONG_SQL_VALUE = 4000
"""SQLite values longer than a page's local payload (page size less its headers; this when the page size
cannot be read) may lie on overflow pages: they are read through SQL as well."""


@dataclass
class ViewReport:
    """What the decoded views found: per needle index, its hits (counted in the views that found it first:
    a needle once found is not looked for again); and what they could not read."""

    found: dict[int, int] = field(default_factory=dict)
    unscanned: list[Unscanned] = field(default_factory=list)
    files: int = 0
    bytes_read: int = 0
    decoded: int = 0
    """Payloads decoded out of the files' bytes (members, streams, base64 runs) and read again."""
    seconds: float = 0.0
    set_aside: dict[str, set[int]] = field(default_factory=dict)
    """Per label, the needles found in the files `scan_views` was told are someone else's content (another
    person's attachment): not residue, declared by that label (docs/matching.md 7.2)."""

    def found_indexes(self) -> set[int]:
        """Indexes of the needles found in at least one view."""
        return set(self.found)


# --- bytes, containers, files ---------------------------------------------------------------------------------

_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image"),
    (b"\xff\xd8\xff", "image"),
    (b"GIF87a", "image"),
    (b"GIF89a", "image"),
    (b"II*\x00", "image"),
    (b"MM\x00*", "image"),
    (b"OggS", "audio-video"),
    (b"ID3", "audio-video"),
    (b"fLaC", "audio-video"),
)
_B64_RUN = re.compile(rb"[A-Za-z0-9+/_\-]+={0,2}")
_HEX = re.compile(rb"[0-9a-fA-F]+")
NO_CAPITALS = 48
"""Base64 characters in a row without a capital letter that end a base64 run: 26 of its 64 characters are
capitals, so 48 without one come once in 10^11 characters of base64 of random bytes; in base64 of text,
only where the text is 36 characters from h to z with no space, capital, digit or sign among them."""
_NO_CAPITALS = re.compile(rb"[^A-Z]{%d,}" % NO_CAPITALS)
GLUED = 7
"""Characters of a stretch without capitals that may still be the base64 run's own (see `_base64_run`)."""
_B64_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_PDF_STREAM = re.compile(rb"<<(?P<dict>(?:(?!>>\s*stream).){0,2048}?)>>\s*stream\r?\n", re.S)


class _Budget:
    """Decoded bytes left for one file."""

    def __init__(self) -> None:
        self.left = MAX_DECODED_PER_FILE

    def take(self, n: int) -> bool:
        self.left -= n
        return self.left >= 0


@dataclass
class _FileScan:
    matcher: Matcher
    hits: dict[int, int]
    unscanned: list[tuple[str, bytes | None, int]]
    """(reason, the bytes when they are a member, size)."""
    budget: _Budget = field(default_factory=_Budget)
    decoded: int = 0

    def opaque(self, reason: str, data: bytes | None, size: int) -> None:
        self.unscanned.append((reason, data, size))


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


TEXT_NOISE = 0.3
"""Share of a decoding's first KiB that may be undecodable or control characters for it to be text."""


def _noise(data: bytes) -> float:
    """Share of undecodable bytes and control characters in the first KiB of `data` read as UTF-8 (noise
    decodes to U+FFFD, which `isprintable` would call printable); 0 for UTF-16/32 text. It runs on every
    alignment of every base64-looking run of a store (digests, vectors): C-speed counts only."""
    if not data:
        return 1.0
    text = data[:1024].decode("utf-8", "replace")
    bad = (text.count("\ufffd") + len(_CONTROL.findall(text))) / len(text)
    if bad <= TEXT_NOISE:
        return bad
    wide = data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data[:64]
    return 0.0 if wide and _utf16_kind(data) is not None else bad


def _entropy(data: bytes) -> float:
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
    p = counts[counts > 0] / len(data)
    return float(-(p * np.log2(p)).sum())


def _decompress(kind: str, data: bytes, limit: int) -> bytes:
    """Decompress `data` (possibly followed by other bytes) up to `limit` bytes; `ValueError` past it,
    `OSError`/`zlib.error`/`lzma.LZMAError` when it is not what it claims."""
    if kind in ("gzip", "zlib", "deflate"):
        wbits = {"gzip": 31, "zlib": 15, "deflate": -15}[kind]
        d = zlib.decompressobj(wbits)
        out = d.decompress(data, limit + 1)
    elif kind == "bz2":
        out = bz2.BZ2Decompressor().decompress(data, max_length=limit + 1)
    else:
        out = lzma.LZMADecompressor().decompress(data, max_length=limit + 1)
    if len(out) > limit:
        raise ValueError("too large")
    return out


def _utf16_kind(data: bytes) -> str | None:
    """`utf-16-le`/`utf-16-be`/`utf-32-le`/`utf-32-be` when `data` (whole) is text in that encoding."""
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "utf-32"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    sample = data[:4096]
    if len(sample) < 8:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-32-le" if sample[2::4].count(0) > 0.9 * len(sample[2::4]) else "utf-16-le"
    if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-32-be" if sample[1::4].count(0) > 0.9 * len(sample[1::4]) else "utf-16-be"
    return None


def _payload(scan: _FileScan, data: bytes, depth: int, *, whole_file: bool) -> None:
    """Read one payload (a file's bytes or a decoded member) through every view."""
    if depth > MAX_DEPTH:
        scan.opaque("container-too-deep", data, len(data))
        return
    scan.decoded += depth > 0
    if _container(scan, data, depth):
        return
    for magic, reason in _IMAGE_MAGIC:
        if data.startswith(magic):
            scan.opaque(reason, data if not whole_file else None, len(data))
            return
    encoding = _utf16_kind(data)
    if encoding:  # wide text is read on as UTF-8: a base64 run or an embedded container in it is a view too
        _payload(scan, data.decode(encoding, "replace").encode("utf-8"), depth + 1, whole_file=False)
        return
    if data.startswith(b"%PDF-"):
        _pdf(scan, data, depth)
    if len(data) <= WHOLE_PAYLOAD and depth > 0:
        scan.matcher.match_text(data.decode("utf-8", "replace"), scan.hits)
        _triggered(scan, data, depth, match_windows=bool(WIDE_TEXT.search(data)))  # wide text in windows
    else:
        _triggered(scan, data, depth, match_windows=True)
    if (
        not data.startswith((b"SQLite format 3\x00", b"%PDF-"))
        and len(data) >= OPAQUE_MIN_BYTES
        and _entropy(data[: 1 << 20]) >= OPAQUE_ENTROPY
    ):
        scan.opaque("unknown-binary", data if not whole_file else None, len(data))


def _container(scan: _FileScan, data: bytes, depth: int) -> bool:
    """Decode `data` when it is, whole, a compressed container; True if it was one."""
    kind = None
    if data.startswith(b"\x1f\x8b"):
        kind = "gzip"
    elif data.startswith(b"BZh") and data[4:10] == b"1AY&SY":
        kind = "bz2"
    elif data.startswith(b"\xfd7zXZ\x00"):
        kind = "xz"
    elif len(data) > 2 and data[0] == 0x78 and (data[0] << 8 | data[1]) % 31 == 0:
        kind = "zlib"
    elif data.startswith(b"PK\x03\x04") or data.startswith(b"PK\x05\x06"):
        _zip(scan, data, depth)
        return True
    if kind is None:
        return False
    try:
        out = _decompress(kind, data, min(MAX_MEMBER, max(0, scan.budget.left)))
    except ValueError:
        scan.opaque("container-too-large", data, len(data))
        return True
    except (OSError, EOFError, zlib.error, lzma.LZMAError):
        if kind == "zlib":
            return False  # two bytes that only looked like a zlib header
        scan.opaque("container-corrupt", data, len(data))
        return True
    scan.budget.take(len(out))
    _payload(scan, out, depth + 1, whole_file=False)
    return True


def _zip(scan: _FileScan, data: bytes, depth: int) -> None:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        scan.opaque("container-corrupt", data, len(data))
        return
    for info in members:
        if info.is_dir():
            continue
        if info.flag_bits & 0x1:
            scan.opaque("encrypted-archive", data, len(data))
            continue
        if info.file_size > MAX_MEMBER or not scan.budget.take(info.file_size):
            scan.opaque("container-too-large", data, len(data))
            continue
        try:
            member = archive.read(info)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, zlib.error, EOFError):
            scan.opaque("container-corrupt", data, len(data))
            continue
        scan.matcher.match_text(info.filename, scan.hits)
        _payload(scan, member, depth + 1, whole_file=False)


def _pdf(scan: _FileScan, data: bytes, depth: int) -> None:
    """A PDF's streams: FlateDecode ones are decoded and read; an encrypted PDF, or a stream in a filter
    no view reads (an image's DCTDecode), is unscanned."""
    if b"/Encrypt" in data:
        scan.opaque("encrypted-pdf", data, len(data))
        return
    for m in _PDF_STREAM.finditer(data):
        start = m.end()
        end = data.find(b"endstream", start)
        if end < 0:
            break
        body = data[start:end]
        filters = m.group("dict")
        if b"/FlateDecode" in filters or b"/Fl " in filters or b"/Fl]" in filters:
            try:
                out = _decompress("zlib", body, min(MAX_MEMBER, max(0, scan.budget.left)))
            except ValueError:
                scan.opaque("container-too-large", body, len(body))
                continue
            except (zlib.error, OSError):
                scan.opaque("container-corrupt", body, len(body))
                continue
            scan.budget.take(len(out))
            _payload(scan, out, depth + 1, whole_file=False)
        elif b"/Filter" in filters:
            scan.opaque("pdf-stream-unreadable-filter", body, len(body))


def _windows(ends: Sequence[int], size: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for end in sorted(ends):
        a, b = max(0, end - WINDOW), min(size, end + WINDOW)
        # Overlapping windows merge up to MAX_SPAN: where the triggers are dense (the subject's own
        # frames, before an erasure) one merged window would grow to the whole chunk, and every text
        # view of a 16 MiB string costs seconds; windows that overlap count an occurrence twice at most.
        if spans and a <= spans[-1][1] and b - spans[-1][0] <= MAX_SPAN:
            spans[-1] = (spans[-1][0], max(spans[-1][1], b))
        else:
            spans.append((a, b))
    return spans


def _triggered(scan: _FileScan, data: bytes, depth: int, *, match_windows: bool) -> None:
    """Find triggers in `data`; decode what they point at; match windows around identifier triggers."""
    ends: list[int] = []
    done_to = {name: -1 for name in GENERIC_NAMES}
    for pid, end in scan.matcher.triggers(data):
        if pid >= len(GENERIC_NAMES):
            if pid - len(GENERIC_NAMES) not in scan.matcher.found:
                ends.append(end)
            continue
        name = GENERIC_NAMES[pid]
        if end <= done_to[name]:
            continue
        if name in ("escapes", "fullwidth"):
            ends.append(end)
        elif name == "base64":
            done_to[name] = _base64_run(scan, data, end, depth)
        else:
            done_to[name] = _embedded_container(scan, data, end, name, depth)
    if match_windows:
        for a, b in _windows(ends, len(data)):
            window = data[a:b]
            scan.matcher.match_text(window.decode("utf-8", "replace"), scan.hits)
            if WIDE_TEXT.search(window):  # a trigger in UTF-16 or UTF-32 (see `_wide`): text in either alignment
                for codec, width in WIDE_CODECS:
                    for shift in range(width):
                        scan.matcher.match_text(window[shift:].decode(codec, "replace"), scan.hits)


def _base64_run(scan: _FileScan, data: bytes, end: int, depth: int) -> int:
    start = end - 1
    while start > 0 and data[start - 1] in _B64_BYTES:
        start -= 1
    m = _B64_RUN.match(data, start)
    if m is None:
        return end
    run = m.group(0)
    if _HEX.fullmatch(run.rstrip(b"=")):
        return m.end()
    if len(run) > 2 * MAX_MEMBER:
        scan.opaque("container-too-large", None, len(run))
        return m.end()
    # Base64 of text, or of any bytes, has a capital letter in every few characters; a stretch of
    # NO_CAPITALS without one is a hex digest or a word glued to the run (a database record's fields have
    # no separator between them), never part of it, but for its last few characters (base64 of text may
    # begin with a few lower-case letters or digits) and its first ones (and end with them). The run is
    # read on in the pieces between such stretches, each from a few characters inside the stretch before
    # it to a few inside the one after it.
    core = run.rstrip(b"=")
    cuts = [(s.start(), s.end()) for s in _NO_CAPITALS.finditer(core)]
    bounds = [0, *(x for cut in cuts for x in cut), len(core)]
    for begin, stop in zip(bounds[0::2], bounds[1::2], strict=True):
        if stop - begin < MIN_BASE64 - GLUED:
            continue
        back = min(GLUED, begin)  # 0 at the run's own start
        piece = core[begin - back : min(len(core), stop + 3)]
        _base64_piece(scan, piece, range(max(4, back + 1)), depth)
    return m.end()


def _b64decode(piece: bytes, urlsafe: bool) -> bytes | None:
    if len(piece) % 4 == 1:
        piece = piece[:-1]
    try:
        padded = piece + b"=" * (-len(piece) % 4)
        return base64.urlsafe_b64decode(padded) if urlsafe else base64.b64decode(padded)
    except (binascii.Error, ValueError):
        return None


EDGE = 96
"""Decoded bytes at either end of a base64 run that a different guess of its true start or end changes."""


def _base64_piece(scan: _FileScan, core: bytes, starts: range, depth: int) -> None:
    """Decode one base64 run from each of `starts` (letters may be glued to it on either side, so its
    true start, alignment and end are not known) and read on the alignment whose decoding is a container
    or reads most as text. Other guesses in that alignment (a start 4 characters on, an end up to 3
    short) differ from it only at its ends, where they are matched too."""
    urlsafe = b"-" in core or b"_" in core
    best: tuple[float, int, bytes] | None = None
    others: list[bytes] = []
    for offset in starts:
        if len(core) - offset < MIN_BASE64 - GLUED:
            break
        out = _b64decode(core[offset:], urlsafe)
        if out is None or len(out) < MIN_BASE64 * 3 // 4:  # a few bytes of noise can look like text
            continue
        if best is not None and offset % 4 == best[1] % 4:
            others.append(out)
            continue
        # Only what reads as text (or is a container) is read on: letters and digits that merely look
        # like base64 (full-text index segments are full of them) decode to noise.
        noise = 0.0 if _container_magic(out) else _noise(out)
        if noise <= TEXT_NOISE and (best is None or noise < best[0]):
            best = (noise, offset, out)
            others = []
    if best is None:
        return
    offset, out = best[1], best[2]
    if scan.budget.take(len(out)):
        _payload(scan, out, depth + 1, whole_file=False)
    for other in others:
        scan.matcher.match_text(other[:EDGE].decode("utf-8", "replace"), scan.hits)
    for short in (1, 2, 3):
        tail = _b64decode(core[offset : len(core) - short], urlsafe)
        if tail:
            scan.matcher.match_text(tail[-EDGE:].decode("utf-8", "replace"), scan.hits)


def _container_magic(data: bytes) -> bool:
    """Whether decoded bytes start as a container does. Strict: base64-looking runs of a store (a few
    hundred thousand, each tried at four alignments) decode to noise, and noise that begins `1f 8b` would
    be reported as a corrupt gzip member. A gzip header is checked to its OS byte (deflate, no reserved
    flag, an XFL and OS that compressors write)."""
    if data[:2] == b"\x1f\x8b":
        return (
            len(data) >= 10
            and data[2] == 8
            and not data[3] & 0xE0
            and data[8] in (0, 2, 4)
            and (data[9] <= 13 or data[9] == 255)
        )
    return data.startswith((b"\xfd7zXZ\x00", b"PK\x03\x04", b"%PDF-")) or (
        data[:3] == b"BZh" and data[4:10] == b"1AY&SY"
    )


def _embedded_container(scan: _FileScan, data: bytes, end: int, name: str, depth: int) -> int:
    """A container's magic inside other bytes: decode it from there if it is one (a stray magic in
    binary data is not reported)."""
    if name == "flate":
        body_start = end
        stop = data.find(b"endstream", body_start)
        body = data[body_start : stop if stop >= 0 else len(data)]
        kind = "zlib"
    else:
        start = {"gzip": end - 3, "bz2": end - 10, "xz": end - 6, "zip": end - 4}[name]
        body = data[start:]
        kind = name
    if depth == 0 and end <= 10 and name != "flate":
        return end  # the file itself is the container: `_container` read it
    try:
        if kind == "zip":
            return end  # a zip needs its central directory: only a whole zip file or member is read
        out = _decompress(kind, body, min(MAX_MEMBER, max(0, scan.budget.left)))
    except (ValueError, OSError, EOFError, zlib.error, lzma.LZMAError):
        return end
    if out and scan.budget.take(len(out)):
        _payload(scan, out, depth + 1, whole_file=False)
    return end


def _sqlite_values(scan: _FileScan, path: str) -> None:
    """Long text and blob values of a SQLite file, read through SQL (overflow pages joined)."""
    try:
        conn = connect(Path(path), readonly=True)
    except Exception:
        return
    try:
        page = conn.execute("PRAGMA page_size").fetchone()
        longest_local = int(page[0]) - 64 if page else LONG_SQL_VALUE
        virtual = [
            str(r[0])
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%'")
        ]
        # Shadow tables of full-text and vector indexes hold index segments and vector chunks, not
        # anyone's text as written (the raw view reads their bytes).
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
            )
            if not any(str(r[0]).startswith(f"{v}_") for v in virtual)
        ]
        for table in tables:
            cols = [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]
            for col in cols:
                for (value,) in conn.execute(
                    f'SELECT "{col}" FROM "{table}" WHERE length(CAST("{col}" AS BLOB)) > ?', (longest_local,)
                ):
                    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
                    if scan.budget.take(len(data)):
                        _payload(scan, data, 1, whole_file=False)
    except Exception:
        return
    finally:
        conn.close()


MAX_FREED_PAGES = 1 << 16
"""Freed pages read from one SQLite file (64 Ki pages: 256 MiB at 4 KiB a page)."""


def _sqlite_freed(scan: _FileScan, path: str) -> None:
    """A SQLite file's freed pages (the freelist: trunk pages, whose old bytes lie past their leaf list,
    and leaf pages), read as the values they held. A value that spilled over overflow pages has a 4-byte
    pointer to the next page at the start of each, so freed pages are joined with those bytes removed:
    along the pointers they still hold, and in page order (SQLite allocates overflow pages in a row, and
    a page turned into a trunk has lost its pointer). Where `secure_delete` zeroed them there is nothing."""
    with open(path, "rb", buffering=0) as f:
        header = f.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            return
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        trunk = int.from_bytes(header[32:36], "big")
        if not trunk or page_size < 512:
            return

        def page(n: int) -> bytes:
            f.seek((n - 1) * page_size)
            return f.read(page_size)

        body: dict[int, bytes] = {}  # freed page -> its old bytes past what the freelist wrote over
        pointer: dict[int, int] = {}
        seen: set[int] = set()
        while trunk and trunk not in seen and len(body) < MAX_FREED_PAGES:
            seen.add(trunk)
            data = page(trunk)
            if len(data) < 8:
                break
            count = min(int.from_bytes(data[4:8], "big"), (page_size - 8) // 4)
            body[trunk] = data[8 + 4 * count :]
            for k in range(count):
                leaf = int.from_bytes(data[8 + 4 * k : 12 + 4 * k], "big")
                if leaf and leaf not in body and len(body) < MAX_FREED_PAGES:
                    leaf_data = page(leaf)
                    body[leaf], pointer[leaf] = leaf_data[4:], int.from_bytes(leaf_data[0:4], "big")
            trunk = int.from_bytes(data[0:4], "big")
    pages = {n: d for n, d in body.items() if d.strip(b"\x00")}
    if not pages:
        return
    joined: list[bytes] = []
    heads = set(pages) - {nxt for nxt in pointer.values() if nxt in pages}
    for head in sorted(heads):  # along the pointers
        parts, n, walked = [], head, set()
        while n in pages and n not in walked:
            walked.add(n)
            parts.append(pages[n])
            n = pointer.get(n, 0)
        if len(parts) > 1:
            joined.append(b"".join(parts))
    run: list[bytes] = []
    last = -2
    for n in sorted(pages):  # in page order
        if n != last + 1 and len(run) > 1:
            joined.append(b"".join(run))
        run = [*run, pages[n]] if n == last + 1 else [pages[n]]
        last = n
    joined += [b"".join(run)] if len(run) > 1 else []
    for data in [*pages.values(), *joined]:
        if scan.budget.take(len(data)):
            scan.matcher.match_text(data.replace(b"\x00", b" ").decode("utf-8", "replace"), scan.hits)


def _read_file(scan: _FileScan, path: str, size: int) -> int:
    """Read one file through the views; returns the bytes read."""
    with open(path, "rb", buffering=0) as f:
        head = f.read(64)
        f.seek(0)
        if size <= CHUNK:
            data = f.read()
            _payload(scan, data, 0, whole_file=True)
            if head.startswith(b"SQLite format 3\x00"):
                _sqlite_values(scan, path)
                _sqlite_freed(scan, path)
            return len(data)
        if _container_magic(head) or head.startswith(b"\x78"):
            data = f.read(MAX_MEMBER + 1)
            if len(data) > MAX_MEMBER:
                scan.opaque("container-too-large", None, size)
                return len(data)
            _payload(scan, data, 0, whole_file=True)
            return len(data)
        total = 0
        tail = b""
        while chunk := f.read(CHUNK):
            buf = tail + chunk
            _triggered(scan, buf, 0, match_windows=True)
            total += len(chunk)
            tail = buf[-OVERLAP:]
        if head.startswith(b"SQLite format 3\x00"):
            _sqlite_values(scan, path)
            _sqlite_freed(scan, path)
        return total


def scan_views(
    root: Path,
    needles: Sequence[tuple[str, str]],
    *,
    report_unscanned: bool = True,
    set_aside: Callable[[str], str | None] | None = None,
) -> ViewReport:
    """Read every regular file under `root` through the decoded views for `needles` ((kind, text) per
    index: `identifier` or `content`; other kinds are not matched in views). Files nobody can read are
    left to the raw scan, which counts them. `report_unscanned` False: what no view reads is not
    listed (a folder of the engine's own ciphertexts). `set_aside(relative path)` gives a label for a
    file that is someone else's content: its finds go to `ViewReport.set_aside`, never to `found`."""
    started = time.perf_counter()
    report = ViewReport()
    matcher = Matcher(needles, once=True)
    if matcher.empty:
        return report
    files = list(_Walk(Path(root)).files())  # what cannot be listed or read: the raw scan counts it
    labels = {rel: label for _p, rel, _s in files if set_aside and (label := set_aside(rel))}
    aside = Matcher(needles) if labels else matcher

    def read(entry: tuple[str, str, int]) -> tuple[_FileScan, int] | None:
        # Someone else's file is read with a matcher of its own: a find there must not stop the search
        # for the same needle in the subject's files (`once`).
        scan = _FileScan(aside if entry[1] in labels else matcher, {}, [])
        try:
            return scan, _read_file(scan, entry[0], entry[2])
        except OSError:
            return None  # the raw scan counts what cannot be read

    # Files are read by a few threads: hyperscan, hashing, decompression and file reads release the GIL.
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, os.cpu_count() or 1)) as pool:
        done = list(pool.map(read, sorted(files, key=lambda e: -e[2])))
    for (path, rel, _size), got in zip(sorted(files, key=lambda e: -e[2]), done, strict=True):
        if got is None:
            continue
        scan, n = got
        report.bytes_read += n
        report.decoded += scan.decoded
        if rel in labels:
            if scan.hits:
                report.set_aside.setdefault(labels[rel], set()).update(scan.hits)
        else:
            for index, hits in scan.hits.items():
                report.found[index] = report.found.get(index, 0) + hits
        report.files += 1
        if report_unscanned:
            whole: str | None = None
            for reason, data, n in scan.unscanned:
                if data is None:
                    if whole is None:
                        whole = _digest_file(path)
                    digest = whole
                else:
                    digest = hashlib.sha256(data).hexdigest()
                report.unscanned.append(Unscanned(sha256=digest, size=n, reason=reason, folder=_folder(rel)))
    report.seconds = time.perf_counter() - started
    return report


def _digest_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _folder(rel: str) -> str:
    return rel.split("/", 1)[0] if "/" in rel else ""


__all__ = ["MAX_DEPTH", "Matcher", "Unscanned", "ViewReport", "canonical", "scan_views"]
