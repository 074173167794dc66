"""Decoded views: the byte probe reads every file as software writes text, not only as raw bytes.

The raw scan (`probes.bytescan`) matches literal spellings. People's data is also written in documents,
escaped, encoded, compressed and re-spelled, and a literal scan is blind to all of it. Parse, then match
(DESIGN.md invariant 7): every payload (a file, an archive member, a decoded stream) is identified by its
content and read by the parser made for its format (`probes.documents`: markup, PDF, OOXML/ODF, RTF,
mail, vCard/iCalendar, JSON, compressors and archives, images by OCR, pickles, SQLite's files); each
member or decoded part is read again, nested up to `MAX_DEPTH` deep. The text a parser yields is matched
with records separated by U+001E; text payloads are read besides through the text views:
- the text views of `probes.matcher` (JSON, percent, HTML and quoted-printable escapes);
- base64 and base64url runs of at least `MIN_BASE64` characters (decoded at every alignment);
- containers embedded in other bytes (a gzip, bz2 or xz stream, a `FlateDecode` stream, inside a
  database page or a text);
- SQLite database files: besides their bytes, every text or blob value longer than a page's share is
  read through SQL too (a long value is split over overflow pages, with page pointers in between).

Each identifier is matched in one canonical form, with its own regexes and raw-byte triggers
(`probes.matcher`: the canonical form, the needles' patterns and the text views are described there).

Speed: each payload is parsed once per scan, for every needle of every subject in it. A large plain or
SQLite file is never decoded whole: one hyperscan pass over its bytes finds triggers (a fragment of an
identifier that survives every text encoding, a phone's digits with encoded separators, an escape run,
a base64 or UTF-16 run, a container's magic), and only windows around them are decoded. Documents and
containers are parsed whole, within `MAX_MEMBER` and `MAX_DECODED_PER_FILE`.

Default deny: nothing unread is certified. A file (or a member, or a stream) that is not positively
identified and read is listed as `Unscanned`, with its digest, size and reason (`unidentified-format`,
`image-not-read`, `encrypted-archive`, `encrypted-pdf`, `container-corrupt`, `container-too-large`,
`container-too-deep`, ...). There is no entropy test and no "looks like text": a base64 run or a magic
found inside other bytes is a guess, read on when it decodes to something identified, and matched as
UTF-8 otherwise (the bytes around it were read). Files a store kind writes in a format with no magic
(Chroma's HNSW segment files) are identified by that kind's layout, checked against their content
(`probes.documents.layouts`). No path is reported (a path can spell a person).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import os
import re
import time
import zlib
from bisect import bisect_right
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from erasure.sqlite import connect
from probes.bytescan import _Walk
from probes.documents import RS, Unread, layout_format, read
from probes.documents.containers import DECODE_ERRORS, TooLarge, decompress
from probes.documents.formats import (
    SQLITE,
    SQLITE_FILES,
    ZLIB,
    binary_format,
    decode_text,
    text_head_is_clean,
    wide_codec,
)
from probes.documents.freed import freed_payloads
from probes.documents.layouts import PAGED
from probes.documents.layouts import forget as forget_layouts
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
"""Share of a decoding's first KiB that may be undecodable or control characters for a base64 run's
decoding at one alignment to be preferred to the others (which alignment to read a run in, never whether
a payload was read: a run is part of a text that was)."""


def _noise(data: bytes) -> float:
    """Share of undecodable bytes and control characters in the first KiB of `data` read as UTF-8; 0 for
    UTF-16/32 text. It runs on every alignment of every base64-looking run of a store: C-speed counts."""
    if not data:
        return 1.0
    text = data[:1024].decode("utf-8", "replace")
    bad = (text.count("\ufffd") + len(_CONTROL.findall(text))) / len(text)
    if bad <= TEXT_NOISE:
        return bad
    return 0.0 if wide_codec(data) is not None and decode_text(data[:1024]) is not None else bad


def _room(scan: _FileScan) -> Callable[[], int]:
    return lambda: min(MAX_MEMBER, max(0, scan.budget.left))


def _match_records(scan: _FileScan, records: Sequence[str]) -> None:
    """Match a parser's records, U+001E between them, in pieces of about `WHOLE_PAYLOAD` characters."""
    piece: list[str] = []
    size = 0
    for record in records:
        piece.append(record)
        size += len(record) + 1
        if size >= WHOLE_PAYLOAD:
            scan.matcher.match_text(RS.join(piece), scan.hits)
            piece, size = [], 0
    if piece:
        scan.matcher.match_text(RS.join(piece), scan.hits)


def _text(scan: _FileScan, data: bytes, text: str, depth: int) -> None:
    """A text payload: matched whole (a decoded one up to `WHOLE_PAYLOAD`) or around its triggers, and
    the escapes, base64 runs and embedded containers in it decoded."""
    raw = data if wide_codec(data) is None else text.encode("utf-8", "surrogatepass")
    if len(raw) <= WHOLE_PAYLOAD and depth > 0:
        scan.matcher.match_text(text, scan.hits)
        _triggered(scan, raw, depth, match_windows=bool(WIDE_TEXT.search(raw)))
    else:
        _triggered(scan, raw, depth, match_windows=True)


def _payload(
    scan: _FileScan, data: bytes, depth: int, *, whole_file: bool, speculative: bool = False, layout: str | None = None
) -> None:
    """Read one payload (a file's bytes, a member, a decoded stream): identified by its content and read
    by its format's parser (`probes.documents`); what is not read is declared. `speculative`: a decoding
    guessed inside other bytes (a base64 run, a container's magic in a database page); when it proves to
    be nothing identified, it is matched as UTF-8 and not declared (the bytes around it were read).
    `layout`: the format a store kind's layout gave the file (no text by that format)."""
    if depth > MAX_DEPTH:
        scan.opaque("container-too-deep", None if whole_file else data, len(data))
        return
    scan.decoded += depth > 0
    if layout is not None:  # a store kind's file, identified by its layout (`probes.documents.layouts`)
        if layout in PAGED:
            _triggered(scan, data, depth, match_windows=True)
        return
    reading = read(data, _room(scan), guess=speculative)
    if speculative and reading.format == "unidentified":
        piece = data[:WHOLE_PAYLOAD]
        scan.matcher.match_text(piece.decode("utf-8", "replace"), scan.hits)
        _triggered(scan, piece, depth, match_windows=bool(WIDE_TEXT.search(piece)))
        return
    if reading.text is not None:
        _text(scan, data, reading.text, depth)
    if reading.records:
        _match_records(scan, reading.records)
    if reading.format in SQLITE_FILES or reading.format == "unidentified":
        # SQLite's pages: text windows, values stored compressed or encoded. What is not identified is
        # declared (below), and looked at all the same: a hit in it is residue, not only an exception.
        _triggered(scan, data, depth, match_windows=True)
    for part in reading.parts:
        if isinstance(part, str):
            scan.matcher.match_text(part, scan.hits)
        elif isinstance(part, Unread):
            # A guess that proves to be noise beginning with a container's magic is no container; one
            # that is positively identified (an image, an encrypted archive in a base64 run) is declared.
            if not (speculative and part.data is data and part.reason == "container-corrupt"):
                scan.opaque(part.reason, None if whole_file and part.data is data else part.data, part.size)
        elif len(part) > MAX_MEMBER or not scan.budget.take(len(part)):
            scan.opaque("container-too-large", None if whole_file else data, len(data))
        else:
            _payload(scan, part, depth + 1, whole_file=False)


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
        # Only what reads as text, or has a format's magic (a container, a document, an image), is read
        # on: letters and digits that merely look like base64 (full-text index segments are full of them)
        # decode to noise.
        noise = 0.0 if _container_magic(out) or binary_format(out) not in (None, ZLIB) else _noise(out)
        if noise <= TEXT_NOISE and (best is None or noise < best[0]):
            best = (noise, offset, out)
            others = []
    if best is None:
        return
    offset, out = best[1], best[2]
    if scan.budget.take(len(out)):
        _payload(scan, out, depth + 1, whole_file=False, speculative=True)
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
        return end  # the file itself is the container: `_payload` read it
    if kind == "zip":
        return end  # a zip needs its central directory: only a whole zip file or member is read
    try:
        out = _inflate_prefix(kind, body, _room(scan)())
    except TooLarge:
        return end
    except DECODE_ERRORS:
        return end
    if out and scan.budget.take(len(out)):
        _payload(scan, out, depth + 1, whole_file=False, speculative=True)
    return end


def _inflate_prefix(kind: str, body: bytes, limit: int) -> bytes:
    """The stream at the start of `body` decompressed (other bytes may follow it: a page's next record)."""
    if kind in ("gzip", "zlib"):
        d = zlib.decompressobj(31 if kind == "gzip" else 15)
        out = d.decompress(body, limit + 1)
        if len(out) > limit:
            raise TooLarge
        return out
    return decompress(kind, body, limit)


SQL_BATCH = 4096
"""Short SQL values looked at in one trigger pass."""


def _short_values(scan: _FileScan, values: list[bytes]) -> None:
    """Short values, each read on its own where one pass over them all finds a trigger in it. On a page,
    SQLite writes a row's columns one after the other with nothing between them (`summary`, an id, then
    the text run together), so the raw view cannot tell where one value ends: docs/matching.md reads
    each value as its own text."""
    joined = b"\x00".join(values)
    starts: list[int] = []
    at = 0
    for v in values:
        starts.append(at)
        at += len(v) + 1
    # An identifier's trigger, or an escape or full-width run that may spell one (base64 runs and containers
    # in them are read by the raw view of the file's bytes, as before).
    hit = sorted(
        {
            bisect_right(starts, end - 1) - 1
            for pid, end in scan.matcher.triggers(joined)
            if pid >= len(GENERIC_NAMES) or GENERIC_NAMES[pid] in ("escapes", "fullwidth")
        }
    )
    # Each is read as a guess (explicit checks only): a value that proves to be no format (a hash whose
    # bytes only look like an escape, or that puremagic would call an image) is matched as text, never
    # declared. The file it sits in is identified and read, its pages raw.
    for i in hit:
        if scan.budget.take(len(values[i])):
            _payload(scan, values[i], 1, whole_file=False, speculative=True)


def _sqlite_values(scan: _FileScan, path: str) -> None:
    """Text and blob values of a SQLite file, read through SQL: long ones whole (overflow pages joined),
    short ones each on its own where a trigger is in them (`_short_values`)."""
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
                short: list[bytes] = []
                for (value,) in conn.execute(
                    f'SELECT "{col}" FROM "{table}" WHERE typeof("{col}") IN (\'text\', \'blob\')'
                ):
                    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
                    if len(data) <= longest_local:
                        short.append(data)
                        if len(short) >= SQL_BATCH:
                            _short_values(scan, short)
                            short = []
                    elif scan.budget.take(len(data)):
                        _payload(scan, data, 1, whole_file=False)
                if short:
                    _short_values(scan, short)
    except Exception:
        return
    finally:
        conn.close()


def _sqlite_freed(scan: _FileScan, path: str) -> None:
    """A SQLite file's freed pages, read as the values they held (`probes.documents.freed`)."""
    for data in freed_payloads(path):
        if scan.budget.take(len(data)):
            scan.matcher.match_text(data.replace(b"\x00", b" ").decode("utf-8", "replace"), scan.hits)


def _read_file(scan: _FileScan, path: str, size: int) -> int:
    """Read one file through the views; returns the bytes read. A file up to `CHUNK` is read whole as one
    payload. A larger one: SQLite's files and plain text are read in chunks, around their triggers (a text
    file whose later bytes stop decoding is declared); a container, document or image whole, up to
    `MAX_MEMBER`; anything else is declared (`unidentified-format`) and its chunks looked at all the same."""
    layout = layout_format(path, size)
    with open(path, "rb", buffering=0) as f:
        if size <= CHUNK or (layout is not None and layout not in PAGED):
            data = f.read() if layout is None or layout in PAGED else b""
            _payload(scan, data, 0, whole_file=True, layout=layout)
            if data.startswith(b"SQLite format 3\x00"):
                _sqlite_values(scan, path)
                _sqlite_freed(scan, path)
            return len(data)
        head = f.read(1 << 16)
        f.seek(0)
        kind = layout or binary_format(head)
        if kind in SQLITE_FILES or kind in PAGED:
            total = _chunks(scan, f, None, size)
            if kind == SQLITE:
                _sqlite_values(scan, path)
                _sqlite_freed(scan, path)
            return total
        if kind is not None:
            data = f.read(MAX_MEMBER + 1)
            if len(data) > MAX_MEMBER:
                scan.opaque("container-too-large", None, size)
                return len(data)
            _payload(scan, data, 0, whole_file=True)
            return len(data)
        codec = wide_codec(head) or ("utf-8" if text_head_is_clean(head) else None)
        if codec is None:  # declared, and looked at all the same
            scan.opaque("unidentified-format", None, size)
        return _chunks(scan, f, codec, size)


def _chunks(scan: _FileScan, f: BinaryIO, codec: str | None, size: int) -> int:
    """A large file read in chunks, windows around triggers matched. With `codec`, the file must decode
    as text in it to its end, or it is declared (`unidentified-format`)."""
    decoder = codecs.getincrementaldecoder(codec)() if codec else None
    total = 0
    tail = b""
    while chunk := f.read(CHUNK):
        if decoder is not None:
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                scan.opaque("unidentified-format", None, size)
                decoder = None
        buf = tail + chunk
        _triggered(scan, buf, 0, match_windows=True)
        total += len(chunk)
        tail = buf[-OVERLAP:]
    if decoder is not None:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            scan.opaque("unidentified-format", None, size)
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
    forget_layouts()
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
