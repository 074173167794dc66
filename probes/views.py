"""Decoded views: the byte probe reads every file as software writes text, not only as raw bytes.

The raw scan (`probes.bytescan`) matches literal spellings. People's data is also written escaped,
encoded, compressed and re-spelled, and a literal scan is blind to all of it. This module reads every
file through views and matches each identifier in one canonical form:

Views (each applied to what the one before produced, nested up to `MAX_DEPTH` decodings deep):
- raw UTF-8 text; JSON string escapes (`\\u0040`, surrogate pairs, `\\n`); percent-encoding (`%40`, with
  and without `+` as a space); HTML entities (named and numeric); quoted-printable (`=40`, soft breaks);
- base64 and base64url runs of at least `MIN_BASE64` characters (decoded at every alignment);
- UTF-16 (LE/BE, with or without a BOM) and UTF-32 text;
- compressed containers: gzip, zlib/deflate streams (a whole file, or a PDF's `FlateDecode` streams),
  zip members, bz2, xz; each member's bytes go through every view again;
- SQLite database files: besides their bytes, every text or blob value longer than a page's share is
  read through SQL too (a long value is split over overflow pages, with page pointers in between).

Canonical form (both sides): NFKC, case folding, format characters removed (soft hyphen, zero-width
characters, BOM), every dash a hyphen, diacritics stripped, every run of white space one space. So
`ß`/`ss`, `Müller`/`Muller` are one spelling; `Mueller` is added as a spelling of a name with an umlaut
(and the reverse). Phones match as their digits with any separators and an optional `+`/`00` before
them (each of the probe's phone forms, national trunk form included, is its own needle); emails with
any `+tag`; names and ids with their tokens in either order and any separators between them.

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
import html
import io
import lzma
import os
import quopri
import re
import threading
import time
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import hyperscan
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from erasure.sqlite import connect
from probes.bytescan import _escape, _Walk

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
MIN_BASE64 = 12
MIN_FRAGMENT = 3
MAX_WORKERS = 4
OPAQUE_ENTROPY = 7.9
OPAQUE_MIN_BYTES = 4096
LONG_SQL_VALUE = 4000
"""SQLite values longer than a page's local payload (page size less its headers; this when the page size
cannot be read) may lie on overflow pages: they are read through SQL as well."""

_FORMAT_CHARS = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                           "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb]")
_DASHES = re.compile("[\u058a\u05be\u1400\u1806\u2010-\u2015\u2043\u2212\u2e17\u2e1a\u2e3a\u2e3b\u2e40\u301c"
                     "\u3030\u30a0\ufe31\ufe32\ufe58\ufe63\uff0d]")
_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_SPACE = re.compile(r"\s+")
_LETTERS = {"ø": "o", "đ": "d", "ł": "l", "æ": "ae", "œ": "oe", "ı": "i", "þ": "th", "ð": "d"}
_LETTER_RX = re.compile("[" + "".join(_LETTERS) + "]")  # a regex, not str.translate: that looks up every character
_TOKEN = re.compile(r"[^\W_]+")
_UMLAUT = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "ae", "Ö": "oe", "Ü": "ue"})


def canonical(text: str) -> str:
    """The one form text is compared in (see the module docstring)."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = _DASHES.sub("-", _FORMAT_CHARS.sub("", t))
    if not t.isascii():
        t = _MARKS.sub("", unicodedata.normalize("NFD", t))
        t = unicodedata.normalize("NFC", _LETTER_RX.sub(lambda m: _LETTERS[m.group(0)], t))
    return _SPACE.sub(" ", t)


class Unscanned(BaseModel):
    """A file, or a member of one, that no view could read. Never a path: digest, size and reason."""

    model_config = ConfigDict(frozen=True)

    sha256: str
    size: int
    reason: str
    folder: str = Field(default="", exclude=True)
    """The top folder of the root it lies in ('' at the root): which tier wrote it (never reported: a
    folder can be named after a person)."""
    tier: str = "bytes"
    """The tier whose files hold it (`bytes`: a file no one tier owns)."""
    target: str | None = None
    """The target it lies in (None: the reference store)."""


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

    def found_indexes(self) -> set[int]:
        """Indexes of the needles found in at least one view."""
        return set(self.found)


# --- the needles, as canonical patterns and raw-byte triggers -------------------------------------------------

_PHONE_SHAPE = re.compile(r"^\+?[\d\s().\-/]+$")
_EMAIL_SHAPE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_SEP_RAW = rb"[^0-9A-Za-z]{0,12}"
"""Between a phone's digits in raw bytes: separators in any byte encoding (UTF-8 dashes are three bytes;
UTF-16 and UTF-32 text puts NULs between the digits).
Encoded separators (`\\u2011`, `%E2%80%91`, `&#8209;`) hold digits: the generic escape triggers open a
window there instead (a trigger per phone with them costs a tenth of a second to compile)."""
_PHONE_SEP = r"[\s\-.()/]{0,3}"
_DIGITS_ONLY = "\x00"
"""Marks a regex's required text as digits, to be looked for in the window's digits alone."""
_NON_DIGIT = re.compile(r"\D+")
_TOKEN_SEP = r"[\W_]{1,8}"


def _boundary(core: str) -> str:
    return rf"(?<![^\W_]){core}(?![^\W_])"


def _name_variants(text: str) -> list[str]:
    """The canonical spellings of a name or id: as given, and with umlauts written out or folded in."""
    folded = canonical(text)
    out = [folded, canonical(text.translate(_UMLAUT)),
           re.sub(r"(?<=[^aeiou\W])(ae|oe|ue)", lambda m: m.group(1)[0], folded)]
    return list(dict.fromkeys(v for v in out if v.strip()))


def _patterns(kind: str, text: str) -> tuple[list[tuple[str, str]], list[str | bytes]]:
    """(canonical regexes, raw-byte triggers) for one needle's text. Each regex comes with a text every
    match of it contains (a phone's: its digits, which the window's digits alone contain, whatever
    separates them), so that a window without it is passed over by a substring test. A trigger is a
    literal text (str, looked for in UTF-8 and in the wide encodings too) or a hyperscan expression
    (bytes)."""
    if kind == "content":
        c = canonical(text)
        return [(re.escape(c), c)], []
    if _EMAIL_SHAPE.match(text.strip()):
        local, _, domain = canonical(text.strip()).rpartition("@")
        local = local.split("+", 1)[0]
        rx = rf"(?<![\w.+\-]){re.escape(local)}(?:\+[\w.\-]*)?@{re.escape(domain)}(?![\w\-])"
        # The trigger is the mailbox's longest run of letters and digits (it survives every text
        # encoding); never the domain, which thousands of other people's addresses share.
        anchor = max(re.findall(r"[a-z0-9]+", local) or [local], key=len)
        return [(rx, local)], [anchor if len(anchor) >= MIN_FRAGMENT else local]
    digits = re.sub(r"\D", "", text)
    if _PHONE_SHAPE.match(text.strip()) and len(digits) >= 7:
        national = digits.startswith("0") and not digits.startswith("00") and not text.strip().startswith("+")
        body = _PHONE_SEP.join(digits[1:] if national else digits)
        # A national form's trunk 0 is optional: where there is none (or it is written "(0)"), the
        # subscriber's digits alone are the number.
        lead = rf"(?:\(?0\)?{_PHONE_SEP})?" if national else r"(?:\+|00)?"
        rx = r"(?<![\d])" + lead + body + r"(?!\d)"
        trigger = _SEP_RAW.join(d.encode() for d in (digits[1:] if national else digits))
        return [(rx, _DIGITS_ONLY + (digits[1:] if national else digits))], [trigger]
    regexes: list[tuple[str, str]] = []
    triggers: list[str | bytes] = []
    for variant in _name_variants(text):
        tokens = _TOKEN.findall(variant)
        if not tokens:
            continue
        orders = [tokens] if len(tokens) == 1 else [tokens, [tokens[-1], *tokens[:-1]]]
        regexes += [(_boundary(_TOKEN_SEP.join(re.escape(t) for t in order)), max(tokens, key=len))
                    for order in orders]
        long = [t for t in tokens if len(t) >= MIN_FRAGMENT]
        triggers += long or [variant]
    lowered = unicodedata.normalize("NFKC", text)
    for token in _TOKEN.findall(lowered.lower()) + _TOKEN.findall(lowered.casefold()):
        # Non-ASCII letters are escaped or re-encoded by software; the ASCII runs between them survive.
        triggers += [run for run in re.findall(rf"[a-z0-9]{{{MIN_FRAGMENT},}}", token) if run != token]
        if not token.isascii():
            triggers.append(token)
    return list(dict.fromkeys(regexes)), list(dict.fromkeys(triggers))


_WIDE_TEXT = re.compile(rb"(?:[\x20-\x7e]\x00){3}|(?:\x00[\x20-\x7e]){3}"
                        rb"|(?:[\x20-\x7e]\x00\x00\x00){3}|(?:\x00\x00\x00[\x20-\x7e]){3}")
"""Letters with NULs between them: only then is a window read as UTF-16/32 too (every page of a
database has NULs; decoding each window four more ways cost most of the views' time there)."""
_WIDE_CODECS = (("utf-16-le", 2), ("utf-16-be", 2), ("utf-32-le", 4), ("utf-32-be", 4))


def _expressions(trigger: str | bytes) -> list[bytes]:
    """A trigger as hyperscan expressions: an expression as it is; a literal text in UTF-8 and in UTF-16
    and UTF-32 (both byte orders), so that text in a wide encoding inside other bytes (a UTF-16
    attachment in a blob column) is found by its own letters, far cheaper than every run of wide text."""
    if isinstance(trigger, bytes):
        return [trigger]
    return [_escape(trigger.encode(codec)) for codec in ("utf-8", *(c for c, _w in _WIDE_CODECS))]


# Generic triggers: where an encoding or a container starts, whoever's data it holds.
_GENERIC: dict[str, bytes] = {
    # an encoded separator between two digits (a phone), two escapes in a row, an escaped dash or
    # space, one entity, two quoted-printable octets
    "escapes": rb"[0-9][^A-Za-z0-9]{0,2}(?:%[0-9A-Fa-f]{2}|=[2-3][0-9A-F]|&#?[a-zA-Z0-9]{2,8};)[^A-Za-z0-9]{0,2}[0-9]"
               rb"|(?:\\u[0-9a-fA-F]{4}){2}|\\u20[0-9a-fA-F]{2}|\\u00[aA][0dD]|(?:%[0-9A-Fa-f]{2}){2}|%[Cc]2%[Aa]0"
               rb"|&#x?[0-9a-fA-F]{2,6};|&[a-zA-Z]{2,8};|(?:=[0-9A-F]{2}){2}",
    "fullwidth": rb"(?:\xef[\xbc\xbd][\x80-\xbf]){3}",
    # A run's start, once (anchored on the byte before it), with a capital, digit or symbol among its
    # first characters: a long lower-case word is not base64 (12 lower-case letters in a row start
    # 2 in 100,000 base64 runs), and triggers cost a decode each.
    # `-` is left out of the trigger (not of the run it finds): ISO timestamps ("2025-01-06T22") are
    # in every row of a store, and a url-safe run has a stretch without `-` long enough anyway.
    "base64": rb"(?:^|[^A-Za-z0-9+/_])[A-Za-z0-9+/_][a-z]{0,%d}[A-Z0-9+/_][A-Za-z0-9+/_]{%d}"
              % (MIN_BASE64 - 2, MIN_BASE64 - 2),
    "gzip": rb"\x1f\x8b\x08",
    "bz2": rb"BZh[1-9]1AY&SY",
    "xz": rb"\xfd7zXZ\x00",
    "zip": rb"PK\x03\x04",
    "flate": rb"stream\r?\n",
}
_GENERIC_NAMES = list(_GENERIC)


_GENERIC_DB: list[tuple[hyperscan.Database, hyperscan.Scratch]] = []


def _generic_db() -> tuple[hyperscan.Database, hyperscan.Scratch]:
    """The generic triggers' database, compiled once per process (a scratch of its own per matcher)."""
    if not _GENERIC_DB:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[_GENERIC[n] for n in _GENERIC_NAMES], ids=list(range(len(_GENERIC_NAMES))),
                   flags=[0] * len(_GENERIC_NAMES))
        _GENERIC_DB.append((db, hyperscan.Scratch(db)))
    db, scratch = _GENERIC_DB[0]
    return db, scratch.clone()


class Matcher:
    """Every needle (identifier or content text) as canonical regexes, with one hyperscan database of
    raw-byte triggers for them all."""

    def __init__(self, needles: Sequence[tuple[str, str]], *, once: bool = False) -> None:
        """`needles`: (kind, text) per needle index, kind `identifier` or `content`, or `shared` (another
        person's own identifier: only explains hits); other kinds are skipped. `once`: a needle found in
        one text is not looked for in later ones (a scan for a verdict; not a matcher asked about each
        text in turn, such as the canaries' choice)."""
        self.regexes: list[tuple[int, re.Pattern[str], str]] = []
        expressions: list[bytes] = []
        ids: list[int] = []
        flags: list[int] = []
        self.shared: list[re.Pattern[str]] = []
        for index, (kind, text) in enumerate(needles):
            if kind == "shared":
                self.shared += [re.compile(rx) for rx, _literal in _patterns("identifier", text)[0]]
                continue
            if kind not in ("identifier", "content"):
                continue
            rxs, triggers = _patterns(kind, text)
            self.regexes += [(index, re.compile(rx), literal) for rx, literal in rxs]
            for t in (e for trigger in triggers for e in _expressions(trigger)):
                expressions.append(t)
                ids.append(len(_GENERIC) + index)
                flags.append(hyperscan.HS_FLAG_CASELESS)
        self.db: hyperscan.Database | None = None
        if expressions:
            self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            self.db.compile(expressions=expressions, ids=ids, flags=flags)
            self._scratch = hyperscan.Scratch(self.db)
        self.generic, self._generic_scratch = _generic_db()
        self._local = threading.local()
        self._lock = threading.Lock()
        self.once = once
        self.found: set[int] = set()
        """With `once`, needles already found in some view: never looked for again (a verdict needs one
        occurrence, and a store that still holds a subject has a trigger in every one of their frames)."""

    @property
    def empty(self) -> bool:
        """No needle to look for."""
        return not self.regexes

    def match_text(self, text: str, hits: dict[int, int]) -> None:
        """Count each needle's occurrences in `text` read through every text view (the largest count any
        one view gives, so an occurrence seen by several views counts once). An occurrence inside one of
        a `shared` needle (another person's own identifier: a namesake's name, a household phone) is
        theirs, and not counted."""
        regexes = [(index, rx, literal) for index, rx, literal in self.regexes if index not in self.found]
        if not regexes:
            return
        best: dict[int, int] = {}
        for variant in _text_variants(text):
            c = canonical(variant)
            explained = [m.span() for rx in self.shared for m in rx.finditer(c)]
            digits = _NON_DIGIT.sub("", c) if any(lit[:1] == _DIGITS_ONLY for _i, _r, lit in regexes) else ""
            for index, rx, literal in regexes:
                # Most windows hold no needle: a substring test (regexes that start with a look-behind
                # are tried at every position), then a search, before any match is counted.
                if literal[:1] == _DIGITS_ONLY:
                    if literal[1:] not in digits:
                        continue
                elif literal not in c:
                    continue
                if rx.search(c) is None:
                    continue
                n = sum(1 for m in rx.finditer(c) if not any(a < m.end() and m.start() < b for a, b in explained))
                if n > best.get(index, 0):
                    best[index] = n
        for index, n in best.items():
            hits[index] = hits.get(index, 0) + n
        if self.once:
            self.found |= best.keys()

    def triggers(self, data: bytes) -> list[tuple[int, int]]:
        """(trigger id, end offset) of every trigger in `data` (ids below `len(_GENERIC)` are generic)."""
        out: list[tuple[int, int]] = []

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            out.append((pid, end))

        if not hasattr(self._local, "generic"):  # a scratch space is one thread's at a time
            with self._lock:
                self._local.generic = self._generic_scratch.clone()
                self._local.needles = self._scratch.clone() if self.db is not None else None
        self.generic.scan(data, match_event_handler=on_match, scratch=self._local.generic)
        if self.db is not None:
            self.db.scan(data, match_event_handler=on_match, scratch=self._local.needles)
        return sorted(out, key=lambda t: t[1])


# --- text views -----------------------------------------------------------------------------------------------

_JSON_ESCAPE = re.compile(r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})"
                          r"|\\([nrtbf/\"\\])")
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "/": "/", '"': '"', "\\": "\\"}
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_QP = re.compile(r"=(?:[0-9A-F]{2}|\r?\n)")


def _json_unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(1):
            hi, lo = int(m.group(1), 16), int(m.group(2), 16)
            return chr(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
        if m.group(3):
            return chr(int(m.group(3), 16))
        return _SIMPLE[m.group(4)]

    return _JSON_ESCAPE.sub(one, text) if "\\" in text else text


def _percent(text: str) -> str:
    from urllib.parse import unquote

    return unquote(text, errors="replace") if _PERCENT.search(text) else text


def _percent_plus(text: str) -> str:
    from urllib.parse import unquote_plus

    return unquote_plus(text, errors="replace") if "+" in text or _PERCENT.search(text) else text


def _entities(text: str) -> str:
    return html.unescape(text) if _ENTITY.search(text) else text


def _quoted_printable(text: str) -> str:
    if not _QP.search(text):
        return text
    return quopri.decodestring(text.encode("utf-8", "surrogatepass")).decode("utf-8", "replace")


_TEXT_DECODERS: tuple[Callable[[str], str], ...] = (_json_unescape, _percent, _entities, _quoted_printable,
                                                     _percent_plus)
MAX_TEXT_VARIANTS = 16


def _text_variants(text: str) -> list[str]:
    """`text` and what each text decoder, and each pair of them, makes of it."""
    out = [text]
    frontier = [text]
    for _round in range(2):
        nxt: list[str] = []
        for t in frontier:
            for decode in _TEXT_DECODERS:
                d = decode(t)
                if d != t and d not in out:
                    out.append(d)
                    nxt.append(d)
                    if len(out) >= MAX_TEXT_VARIANTS:
                        return out
        frontier = nxt
    return out


# --- bytes, containers, files ---------------------------------------------------------------------------------

_IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image"), (b"\xff\xd8\xff", "image"), (b"GIF87a", "image"),
                (b"GIF89a", "image"), (b"II*\x00", "image"), (b"MM\x00*", "image"),
                (b"OggS", "audio-video"), (b"ID3", "audio-video"), (b"fLaC", "audio-video"))
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
        _triggered(scan, data, depth, match_windows=bool(_WIDE_TEXT.search(data)))  # wide text in windows
    else:
        _triggered(scan, data, depth, match_windows=True)
    if (not data.startswith((b"SQLite format 3\x00", b"%PDF-")) and len(data) >= OPAQUE_MIN_BYTES
            and _entropy(data[:1 << 20]) >= OPAQUE_ENTROPY):
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
    done_to = {name: -1 for name in _GENERIC_NAMES}
    for pid, end in scan.matcher.triggers(data):
        if pid >= len(_GENERIC):
            if pid - len(_GENERIC) not in scan.matcher.found:
                ends.append(end)
            continue
        name = _GENERIC_NAMES[pid]
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
            if _WIDE_TEXT.search(window):  # a trigger in UTF-16 or UTF-32 (see `_wide`): text in either alignment
                for codec, width in _WIDE_CODECS:
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
        piece = core[begin - back:min(len(core), stop + 3)]
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
        tail = _b64decode(core[offset:len(core) - short], urlsafe)
        if tail:
            scan.matcher.match_text(tail[-EDGE:].decode("utf-8", "replace"), scan.hits)


def _container_magic(data: bytes) -> bool:
    """Whether decoded bytes start as a container does. Strict: base64-looking runs of a store (a few
    hundred thousand, each tried at four alignments) decode to noise, and noise that begins `1f 8b` would
    be reported as a corrupt gzip member. A gzip header is checked to its OS byte (deflate, no reserved
    flag, an XFL and OS that compressors write)."""
    if data[:2] == b"\x1f\x8b":
        return (len(data) >= 10 and data[2] == 8 and not data[3] & 0xE0 and data[8] in (0, 2, 4)
                and (data[9] <= 13 or data[9] == 255))
    return (data.startswith((b"\xfd7zXZ\x00", b"PK\x03\x04", b"%PDF-"))
            or (data[:3] == b"BZh" and data[4:10] == b"1AY&SY"))


def _embedded_container(scan: _FileScan, data: bytes, end: int, name: str, depth: int) -> int:
    """A container's magic inside other bytes: decode it from there if it is one (a stray magic in
    binary data is not reported)."""
    if name == "flate":
        body_start = end
        stop = data.find(b"endstream", body_start)
        body = data[body_start:stop if stop >= 0 else len(data)]
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
        virtual = [str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%'")]
        # Shadow tables of full-text and vector indexes hold index segments and vector chunks, not
        # anyone's text as written (the raw view reads their bytes).
        tables = [str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'")
            if not any(str(r[0]).startswith(f"{v}_") for v in virtual)]
        for table in tables:
            cols = [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]
            for col in cols:
                for (value,) in conn.execute(
                        f'SELECT "{col}" FROM "{table}" WHERE length(CAST("{col}" AS BLOB)) > ?', (longest_local,)):
                    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
                    if scan.budget.take(len(data)):
                        _payload(scan, data, 1, whole_file=False)
    except Exception:
        return
    finally:
        conn.close()


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
        return total


def scan_views(root: Path, needles: Sequence[tuple[str, str]], *, report_unscanned: bool = True) -> ViewReport:
    """Read every regular file under `root` through the decoded views for `needles` ((kind, text) per
    index: `identifier` or `content`; other kinds are not matched in views). Files nobody can read are
    left to the raw scan, which counts them. `report_unscanned` False: what no view reads is not
    listed (a folder of the engine's own ciphertexts)."""
    started = time.perf_counter()
    report = ViewReport()
    matcher = Matcher(needles, once=True)
    if matcher.empty:
        return report
    files = list(_Walk(Path(root)).files())  # what cannot be listed or read: the raw scan counts it

    def read(entry: tuple[str, str, int]) -> tuple[_FileScan, int] | None:
        scan = _FileScan(matcher, {}, [])
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
                report.unscanned.append(Unscanned(sha256=digest,
                                                  size=n, reason=reason, folder=_folder(rel)))
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
