"""Reading one payload through the decoded views (`probes.views` reads the files): a file's bytes, an
archive member or a decoded stream is identified by its content and read by its format's parser
(`probes.documents`); text is matched whole or around its triggers, and the escapes, base64 runs and
embedded containers in it are decoded and read again, nested up to `MAX_DEPTH` deep. What is not read
is declared on the `FileScan`."""

from __future__ import annotations

import binascii
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from probes.char_triggers import touches_letter
from probes.documents import RS, Unread, read
from probes.documents.containers import DECODE_ERRORS, TooLarge, decompress
from probes.documents.formats import (
    SQLITE_FILES,
    ZLIB,
    binary_format,
    decode_text,
    wide_codec,
)
from probes.documents.layouts import PAGED
from probes.matcher import GENERIC_NAMES, MIN_BASE64, WIDE_CODECS, Matcher, Provisional, has_wide_text
from probes.view_base64 import GLUED, NO_CAPITALS, TEXT_NOISE, readable_runs

MAX_DEPTH = 4
"""Decodings nested in one another (a base64 run in a JSON string in a gzip member is three)."""
MAX_MEMBER = 64 << 20
"""Largest decoded payload read; a larger one is unscanned (`container-too-large`)."""
MAX_DECODED_PER_FILE = 256 << 20
"""Decoded bytes read for one file, all its members together."""
WHOLE_PAYLOAD = 1 << 20
"""Decoded payloads up to this size are matched whole, not only around triggers."""
WINDOW = 640
"""Bytes read on each side of a trigger."""
MAX_SPAN = 8 * WINDOW
"""Longest window that overlapping windows merge into."""


# --- bytes, containers, files ---------------------------------------------------------------------------------

_B64_RUN = re.compile(rb"[A-Za-z0-9+/_\-]+={0,2}")
_HEX = re.compile(rb"[0-9a-fA-F]+")
_NO_CAPITALS = re.compile(rb"(?<![^A-Z])[^A-Z]{%d,}" % NO_CAPITALS)
"""Only from a stretch's start (the lookbehind): the same maximal stretches, found in one pass."""
_B64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
_B64_BYTES = frozenset(_B64_CHARS)


class _Budget:
    """Decoded bytes left for one file."""

    def __init__(self) -> None:
        self.left = MAX_DECODED_PER_FILE

    def take(self, n: int) -> bool:
        self.left -= n
        return self.left >= 0


@dataclass
class FileScan:
    """One file being read through the views: its matcher, the hits so far, and what was not read."""

    matcher: Matcher
    hits: dict[int, int]
    unscanned: list[tuple[str, bytes | None, int]]
    """(reason, the bytes when they are a member, size)."""
    budget: _Budget = field(default_factory=_Budget)
    decoded: int = 0
    runs: dict[tuple[bytes, int], list[tuple[str, bytes | None, int]]] = field(default_factory=dict)
    """Base64 runs already read in this file (at a depth), with what reading them declared (see
    `_base64_run`; only runs `probes.view_base64.readable_runs` lets through are read, or remembered)."""

    encoded: dict[bytes, dict[int, int]] = field(default_factory=dict)
    """Hits found inside a base64 run's decodings, by the run, and not in `hits` (see `encoded_in`)."""
    run: bytes | None = None
    """The base64 run being read (the outermost one), if any."""

    def opaque(self, reason: str, data: bytes | None, size: int) -> None:
        self.unscanned.append((reason, data, size))

    @contextmanager
    def encoded_in(self, run: bytes) -> Iterator[None]:
        """Count the hits found while `run`'s decodings are read apart, by the run: a payload pasted into a
        text (a picture, a document, base64 of text), which the erasing side reads as the text it is and
        cannot rewrite; whose item holds it is for the caller to say (`probes.window_bytes`). The needles
        found there are still looked for everywhere else (`Provisional`). A run inside a run's decoding is
        counted with the outer one: the outer one is what the text holds."""
        if self.run is not None:
            yield
            return
        outer, self.hits, self.run = self.hits, Provisional(), run
        try:
            yield
        finally:
            got, self.hits, self.run = self.hits, outer, None
            if got:
                mine = self.encoded.setdefault(run, {})
                for index, n in got.items():
                    mine[index] = mine.get(index, 0) + n


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


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


def _room(scan: FileScan) -> Callable[[], int]:
    return lambda: min(MAX_MEMBER, max(0, scan.budget.left))


def _match_records(scan: FileScan, records: Sequence[str]) -> None:
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


def _text(scan: FileScan, data: bytes, text: str, depth: int) -> None:
    """A text payload: matched whole (a decoded one up to `WHOLE_PAYLOAD`) or around its triggers, and
    the escapes, base64 runs and embedded containers in it decoded."""
    raw = data if wide_codec(data) is None else text.encode("utf-8", "surrogatepass")
    if len(raw) <= WHOLE_PAYLOAD and depth > 0:
        scan.matcher.match_text(text, scan.hits)
        read_triggered(scan, raw, depth, match_windows=has_wide_text(raw))
    else:
        read_triggered(scan, raw, depth, match_windows=True)


def read_payload(
    scan: FileScan, data: bytes, depth: int, *, whole_file: bool, speculative: bool = False, layout: str | None = None
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
            read_triggered(scan, data, depth, match_windows=True)
        return
    reading = read(data, _room(scan), guess=speculative)
    if speculative and reading.format == "unidentified":
        piece = data[:WHOLE_PAYLOAD]
        scan.matcher.match_text(piece.decode("utf-8", "replace"), scan.hits)
        read_triggered(scan, piece, depth, match_windows=has_wide_text(piece))
        return
    if reading.text is not None:
        _text(scan, data, reading.text, depth)
    if reading.records:
        _match_records(scan, reading.records)
    for text in reading.ocr:  # docs/matching.md 1.5: look-alike characters folded
        scan.matcher.match_text(text, scan.hits, ocr=True)
    if reading.format in SQLITE_FILES or reading.format == "unidentified":
        # SQLite's pages: text windows, values stored compressed or encoded. What is not identified is
        # declared (below), and looked at all the same: a hit in it is residue, not only an exception.
        read_triggered(scan, data, depth, match_windows=True)
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
            read_payload(scan, part, depth + 1, whole_file=False)


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


_BASE64 = GENERIC_NAMES.index("base64")


WINDOW_TRIGGERS = ("escapes", "fullwidth", "digits", "ignorable", "compatibility")
"""Generic triggers that open a window of text (the others point at a run or a container to decode)."""


def opens_window(name: str, data: bytes, end: int) -> bool:
    """Whether the generic trigger `name` ending at `end` opens a window: one of `WINDOW_TRIGGERS`, a
    format character only where it touches a letter or digit (`probes.char_triggers.touches_letter`)."""
    return name in WINDOW_TRIGGERS and (name != "ignorable" or touches_letter(data, end))


def read_triggered(scan: FileScan, data: bytes, depth: int, *, match_windows: bool) -> None:
    """Find triggers in `data`; decode what they point at; match windows around identifier triggers."""
    ends: list[int] = []
    done_to = {name: -1 for name in GENERIC_NAMES}
    triggers = scan.matcher.triggers(data)
    # The base64 runs first (each once, as the loop below meets them), judged together: which of them
    # can be read on (`probes.view_base64`); the loop reads them in their place among the triggers.
    runs: list[tuple[bytes | None, int]] = []
    done = -1
    for pid, end in triggers:
        if pid == _BASE64 and end > done:
            run, done = _find_run(data, end)
            runs.append((run, done))
    readable = readable_runs(list(dict.fromkeys(run for run, _e in runs if run is not None)))
    taken = iter(runs)
    for pid, end in triggers:
        if pid >= len(GENERIC_NAMES):
            if pid - len(GENERIC_NAMES) not in scan.matcher.found:
                ends.append(end)
            continue
        name = GENERIC_NAMES[pid]
        if end <= done_to[name]:
            continue
        if name in WINDOW_TRIGGERS:
            if opens_window(name, data, end):
                ends.append(end)
        elif name == "base64":
            run, done_to[name] = next(taken)
            if run in readable:  # else no piece decodes at any start to what is read on: nothing to read or declare
                _base64_run(scan, run, depth)
        else:
            done_to[name] = _embedded_container(scan, data, end, name, depth)
    if match_windows:
        for a, b in _windows(ends, len(data)):
            window = data[a:b]
            scan.matcher.match_text(window.decode("utf-8", "replace"), scan.hits)
            if has_wide_text(window):  # a trigger in UTF-16 or UTF-32 (see `_wide`): text in either alignment
                for codec, width in WIDE_CODECS:
                    for shift in range(width):
                        scan.matcher.match_text(window[shift:].decode(codec, "replace"), scan.hits)


def base64_runs(data: bytes) -> list[bytes]:
    """Every run of base64 characters in `data`, as the views cut one out of a file's bytes."""
    return _B64_RUN.findall(data)


def run_start(data: bytes, at: int) -> int:
    """Where the run of base64 characters (`-` included) that ends at `at` starts: stripped off a slice's
    end by `bytes.rstrip`, a slice at a time (a loop over bytes in Python cost most of a run's reading)."""
    while at > 0:
        lo = max(0, at - 256)
        kept = len(data[lo:at].rstrip(_B64_CHARS))
        at = lo + kept
        if kept:
            break
    return at


def _find_run(data: bytes, end: int) -> tuple[bytes | None, int]:
    """The base64 run a trigger ending at `end` is in, and where its reading ends (the next base64
    trigger read is past it)."""
    at = end - 1
    lo = max(0, at - 256)
    kept = len(data[lo:at].rstrip(_B64_CHARS))  # `run_start`'s first slice, where nearly every run starts
    m = _B64_RUN.match(data, lo + kept if kept or not lo else run_start(data, lo))
    return (None, end) if m is None else (m.group(0), m.end())


def _base64_run(scan: FileScan, run: bytes, depth: int) -> None:
    """Read one base64 run (`_find_run`) that `probes.view_base64.readable_runs` lets through."""
    if _HEX.fullmatch(run.rstrip(b"=")):
        return
    if len(run) > 2 * MAX_MEMBER:
        scan.opaque("container-too-large", None, len(run))
        return
    # A run that this file repeats (a database writes the same values in many rows) is read once: reading
    # the same bytes again finds nothing new (a needle found is not looked for again), and what it
    # declared is declared again.
    key = (run, depth)
    if key in scan.runs:
        scan.unscanned += scan.runs[key]
        return
    before = len(scan.unscanned)
    with scan.encoded_in(run):
        _base64_pieces(scan, run, depth)
    if len(run) <= MEMO_RUN and len(scan.runs) < MEMO_RUNS:
        scan.runs[key] = scan.unscanned[before:]


MEMO_RUN = 1024
"""Longest base64 run remembered once read (`FileScan.runs`)."""
MEMO_RUNS = 1 << 19
"""Most base64 runs remembered in one file."""


def _base64_pieces(scan: FileScan, run: bytes, depth: int) -> None:
    # Base64 of text, or of any bytes, has a capital letter in every few characters; a stretch of
    # NO_CAPITALS without one is a hex digest or a word glued to the run (a database record's fields have
    # no separator between them), never part of it, but for its last few characters (base64 of text may
    # begin with a few lower-case letters or digits) and its first ones (and end with them). The run is
    # read on in the pieces between such stretches, each from a few characters inside the stretch before
    # it to a few inside the one after it.
    core = run.rstrip(b"=")
    cuts = [(s.start(), s.end()) for s in _NO_CAPITALS.finditer(core)] if len(core) >= NO_CAPITALS else []
    bounds = [0, *(x for cut in cuts for x in cut), len(core)]
    for begin, stop in zip(bounds[0::2], bounds[1::2], strict=True):
        if stop - begin < MIN_BASE64 - GLUED:
            continue
        back = min(GLUED, begin)  # 0 at the run's own start
        piece = core[begin - back : min(len(core), stop + 3)]
        if len(piece) >= MIN_BASE64:  # a shorter one decodes to fewer bytes than are read at any start
            _base64_piece(scan, piece, range(max(4, back + 1)), depth)


_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _b64decode(piece: bytes, urlsafe: bool) -> bytes | None:
    """`base64.b64decode` (or `urlsafe_b64decode`) of `piece`, padded, its last character dropped where it
    cannot end a group; what those functions call, without their checks of the argument's type."""
    if len(piece) % 4 == 1:
        piece = piece[:-1]
    try:
        padded = piece + b"=" * (-len(piece) % 4)
        return binascii.a2b_base64(padded.translate(_URLSAFE) if urlsafe else padded)
    except (binascii.Error, ValueError):
        return None


EDGE = 96
"""Decoded bytes at either end of a base64 run that a different guess of its true start or end changes."""


def _base64_piece(scan: FileScan, core: bytes, starts: range, depth: int) -> None:
    """Decode one base64 run from each of `starts` (letters may be glued to it on either side, so its
    true start, alignment and end are not known) and read on the alignment whose decoding is a container
    or reads most as text. Other guesses in that alignment (a start 4 characters on, an end up to 3
    short) differ from it only at its ends, where they are matched too."""
    urlsafe = b"-" in core or b"_" in core
    best: tuple[float, int, bytes] | None = None
    others: list[bytes] = []
    for offset in starts:
        if len(core) - offset < MIN_BASE64:  # fewer than MIN_BASE64 * 3 // 4 bytes: never read (below)
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
        read_payload(scan, out, depth + 1, whole_file=False, speculative=True)
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


def _embedded_container(scan: FileScan, data: bytes, end: int, name: str, depth: int) -> int:
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
        return end  # the file itself is the container: `read_payload` read it
    if kind == "zip":
        return end  # a zip needs its central directory: only a whole zip file or member is read
    try:
        out = _inflate_prefix(kind, body, _room(scan)())
    except TooLarge:
        return end
    except DECODE_ERRORS:
        return end
    if out and scan.budget.take(len(out)):
        read_payload(scan, out, depth + 1, whole_file=False, speculative=True)
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
