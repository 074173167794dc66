"""The red team's oracle: every occurrence of a person in every decoded view of every byte of a folder.

Written apart from the product on purpose (it imports nothing of `probes/`, `tasks/`, `erasure/`): a
second reader with its own blind spots, so that the product's byte scan and this one do not share them.
Simple rather than fast; standard library only.

How a folder is read:

- every file under the root (symlinks not followed), as bytes, through views that nest to
  `MAX_DEPTH` levels: text decodings (UTF-8, Latin-1, UTF-16 LE/BE and UTF-32 LE/BE at every
  alignment, NUL bytes dropped), text unescapes (JSON string escapes incl. surrogate pairs and `\\/`,
  percent-encoding, HTML entities, quoted-printable incl. soft line breaks), base64 and base64url
  runs (standard and url alphabets, every alignment), compressed containers found anywhere in the
  bytes (gzip members, zlib streams incl. PDF FlateDecode, raw deflate after a zip local header or a
  PDF `stream` keyword, zip members, bz2, xz), and SQLite database files opened read-only on a copy
  (with their `-wal`) so that every cell value is read too (text, and blobs as bytes: LangGraph's
  msgpack / JSON checkpoints, mem0's pickled Qdrant points, ...);
- each text view is compared in canonical form: NFKC, format characters removed (soft hyphen,
  zero-width, BOM, ...), every dash one hyphen, every run of white space one space, case folded
  (ß -> ss), and twice: diacritics stripped (Müller -> muller) and German transliteration
  (Müller -> mueller);
- a person is matched as: their id (its letter/digit groups, any separators); their email (any
  `+tag`); their name (tokens in any order, any separators: "Doe, Jane", "Jane\\tDoe", "jane.doe",
  "ticket-jane-doe-0042"); their phone as its digits with any separators, with `+CC`, `00CC`, `CC`
  or the national trunk `0`, and an optional `(0)`.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import html
import io
import itertools
import lzma
import os
import quopri
import re
import shutil
import sqlite3
import tempfile
import unicodedata
import urllib.parse
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 4
"""Views nest this deep (a base64 run in a JSON string in a gzip member in a zip: 4)."""
MAX_STREAM = 64 * 1024 * 1024
"""At most this many bytes are inflated from one compressed stream."""
MAX_FILE = 512 * 1024 * 1024
"""A file larger than this is not read (reported as `unread`)."""
JUNK_RUN = 5
"""A text view is read in pieces cut at runs of this many control or undecodable characters (see
`segments`)."""
MIN_B64 = 12
"""Shortest base64 run that is decoded (9 bytes: shorter than any identifier we plant)."""


# --- the person -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    """The identifiers of whom we look for. Any may be None (except `id`)."""

    id: str
    email: str | None = None
    name: str | None = None
    phone: str | None = None

    @classmethod
    def of(cls, obj: object) -> Person:
        """From anything with `id`, `email`, `name`, `phone` attributes, or a mapping."""
        if isinstance(obj, Person):
            return obj
        if isinstance(obj, dict):
            return cls(str(obj["id"]), obj.get("email"), obj.get("name"), obj.get("phone"))
        return cls(
            str(getattr(obj, "id")),  # noqa: B009 (an object of any class with an id)
            getattr(obj, "email", None),
            getattr(obj, "name", None),
            getattr(obj, "phone", None),
        )


# --- canonical text -------------------------------------------------------------------------------

_DASHES = "".join(chr(c) for c in range(0x30000) if unicodedata.category(chr(c)) == "Pd") + "\u2212\u2043\ufe63\uff0d"
_DASH_TABLE = {ord(c): "-" for c in _DASHES}
_GERMAN = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "ae", "Ö": "oe", "Ü": "ue"})
_WS = re.compile(r"\s+")
_COMBINING = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def _drop_format(text: str) -> str:
    if not any(unicodedata.category(c) == "Cf" for c in set(text)):
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def canonical_forms(text: str) -> tuple[str, ...]:
    """The canonical forms of `text` (diacritics stripped; German transliteration), deduplicated."""
    t = unicodedata.normalize("NFKC", text)
    t = _drop_format(t).translate(_DASH_TABLE)
    t = _WS.sub(" ", t)
    out = []
    for variant in (t, t.translate(_GERMAN)):
        v = variant.casefold()
        v = _COMBINING.sub("", unicodedata.normalize("NFD", v))
        v = unicodedata.normalize("NFC", v)
        if v not in out:
            out.append(v)
    return tuple(out)


# --- patterns of a person -------------------------------------------------------------------------

_ALNUM_BEFORE = r"(?<![^\W_])"  # not preceded by a letter or digit
_ALNUM_AFTER = r"(?![^\W_])"
_SEP = r"[\W_]{0,4}"
_PHONE_SEP = r"[\s\-./()\[\]]{0,3}"
# ITU calling codes of one and two digits; everything else here is three digits.
_CC2 = {
    "20",
    "27",
    "30",
    "31",
    "32",
    "33",
    "34",
    "36",
    "39",
    "40",
    "41",
    "43",
    "44",
    "45",
    "46",
    "47",
    "48",
    "49",
    "51",
    "52",
    "53",
    "54",
    "55",
    "56",
    "57",
    "58",
    "60",
    "61",
    "62",
    "63",
    "64",
    "65",
    "66",
    "81",
    "82",
    "84",
    "86",
    "90",
    "91",
    "92",
    "93",
    "94",
    "95",
    "98",
}


def split_phone(phone: str) -> tuple[str, str]:
    """(country code, national significant number) of a phone in international form; ("", digits)
    when it has no `+`/`00` prefix (then it is taken as national, a leading trunk 0 dropped)."""
    s = phone.strip().replace("(0)", "")
    digits = re.sub(r"\D", "", s)
    if s.startswith("+") or digits.startswith("00"):
        d = digits if s.startswith("+") else digits[2:]
        n = 1 if d[:1] in ("1", "7") else 2 if d[:2] in _CC2 else 3
        nsn = d[n:]
        if nsn.startswith("0") and d[:n] != "39":
            nsn = nsn[1:]
        return d[:n], nsn
    return "", digits[1:] if digits.startswith("0") else digits


def _digits_pattern(digits: str) -> str:
    return _PHONE_SEP.join(re.escape(d) for d in digits)


def _token_alternatives(name_forms: Iterable[str]) -> list[str]:
    alts: list[str] = []
    for form in name_forms:
        tokens = [t for t in re.split(r"[\W_]+", form) if t]
        if not tokens:
            continue
        orders = itertools.permutations(tokens) if len(tokens) <= 4 else [tokens, tokens[1:] + tokens[:1]]
        for order in orders:
            alts.append(_SEP.join(re.escape(t) for t in order))
    return list(dict.fromkeys(alts))


@dataclass
class Patterns:
    """One compiled alternation per identifier kind (kinds: id, email, name, phone)."""

    by_kind: dict[str, re.Pattern[str]] = field(default_factory=dict)
    needs: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    """Per kind, the literal pieces one alternative's every match contains (a fast necessary test:
    the kind's pattern runs only on a text holding all pieces of some alternative)."""
    nsn: str = ""
    """The phone's national number: every phone match holds its digits in a row once non-digits are
    removed."""

    @classmethod
    def of(cls, person: Person) -> Patterns:
        out: dict[str, list[str]] = {}
        needs: dict[str, list[tuple[str, ...]]] = {}
        for form in canonical_forms(person.id):
            groups = [g for g in re.split(r"[\W_]+", form) if g]
            if groups:
                out.setdefault("id", []).append(_ALNUM_BEFORE + _SEP.join(re.escape(g) for g in groups) + _ALNUM_AFTER)
                needs.setdefault("id", []).append(tuple(groups))
        if person.email:
            for form in canonical_forms(person.email):
                local, _, domain = form.rpartition("@")
                out.setdefault("email", []).append(
                    r"(?<![0-9a-z._+\-])"
                    + re.escape(local)
                    + r"(?:\+[^@\s\"'<>]{0,64})?\s?@\s?"
                    + re.escape(domain)
                    + _ALNUM_AFTER
                )
                needs.setdefault("email", []).append((local, domain))
        if person.name:
            alts = _token_alternatives(canonical_forms(person.name))
            if alts:
                out["name"] = [_ALNUM_BEFORE + "(?:" + "|".join(alts) + ")" + _ALNUM_AFTER]
                needs["name"] = [tuple(t for t in re.split(r"[\W_]+", f) if t) for f in canonical_forms(person.name)]
        nsn = ""
        if person.phone:
            cc, nsn = split_phone(person.phone)
            nsn_p = _digits_pattern(nsn)
            alts = [r"0" + _PHONE_SEP + nsn_p]  # national, trunk 0
            if cc:
                cc_p = _digits_pattern(cc)
                alts.append(r"(?:\+|00)?" + _PHONE_SEP + cc_p + _PHONE_SEP + r"(?:\(0\)" + _PHONE_SEP + ")?" + nsn_p)
            out["phone"] = [r"(?<![0-9])(?:" + "|".join(alts) + r")(?![0-9])"]
        return cls({k: re.compile("|".join(f"(?:{p})" for p in v)) for k, v in out.items()}, needs, nsn)

    def find(self, text: str) -> Iterator[tuple[str, str]]:
        """(kind, matched canonical text) of every match in every canonical form of `text`."""
        for form in canonical_forms(text):
            yield from self.find_in_form(form, re.sub(r"\D", "", form))

    def find_in_form(self, form: str, digits: str) -> Iterator[tuple[str, str]]:
        """(kind, matched text) in one canonical form (`digits`: its digits alone)."""
        for kind, pat in self.by_kind.items():
            if kind == "phone":
                if not self.nsn or self.nsn not in digits:
                    continue
            elif not any(all(piece in form for piece in alt) for alt in self.needs.get(kind, [()])):
                continue
            for m in pat.finditer(form):
                yield kind, m.group(0)


# --- views ----------------------------------------------------------------------------------------

_JSON_ESC = re.compile(r"\\u([0-9a-fA-F]{4})|\\([\\/\"bfnrt'])")
_JSON_SIMPLE = {"\\": "\\", "/": "/", '"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "'": "'"}
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_HTML = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]{1,31});?")
_QP = re.compile(r"=(?:[0-9A-F]{2}|\r?\n)")
_B64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{" + str(MIN_B64) + r",}={0,2}")


def json_unescape(text: str) -> str:
    """JSON string escapes: `\\uXXXX` (surrogate pairs joined), `\\/`, `\\"`, `\\\\`, `\\n`, ..."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return chr(int(m.group(1), 16))
        return _JSON_SIMPLE[m.group(2)]

    out = _JSON_ESC.sub(one, text)
    # join surrogate pairs (and drop lone ones' damage by encoding with surrogatepass)
    if any("\ud800" <= c <= "\udfff" for c in out):
        out = out.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return out


def percent_unescape(text: str) -> str:
    return urllib.parse.unquote(text, errors="replace")


def form_unescape(text: str) -> str:
    """application/x-www-form-urlencoded: `+` is a space."""
    return urllib.parse.unquote_plus(text, errors="replace")


def qp_unescape(text: str) -> str:
    return quopri.decodestring(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")


_UNESCAPES: tuple[tuple[str, Callable[[str], bool], Callable[[str], str]], ...] = (
    ("json", lambda t: "\\u" in t or "\\/" in t or "\\n" in t or "\\t" in t or '\\"' in t, json_unescape),
    ("percent", lambda t: _PERCENT.search(t) is not None, percent_unescape),
    ("form", lambda t: "+" in t and _PERCENT.search(t) is not None, form_unescape),
    ("html", lambda t: _HTML.search(t) is not None, html.unescape),
    ("qp", lambda t: _QP.search(t) is not None, qp_unescape),
)


def b64_candidates(run: str) -> Iterator[bytes]:
    """Every decoding of a base64 / base64url run at each of the four alignments."""
    s = run.rstrip("=").translate(str.maketrans("-_", "+/"))
    seen: set[bytes] = set()
    for k in range(4):
        part = s[k:]
        if len(part) % 4 == 1:
            part = part[:-1]
        if len(part) < 8:
            continue
        try:
            raw = base64.b64decode(part + "=" * (-len(part) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if raw not in seen:
            seen.add(raw)
            yield raw


_TEXTY = re.compile(
    "[\t\n\r\x20-\x7e\u00a0-\u052f\u1e00-\u1fff\u2000-\u206f\u2100-\u214f\u2212\ufe00-\ufe6f\uff00-\uffef]{3,}"
)


def texty(text: str) -> str:
    """The runs of `text` made of characters that can spell an identifier (Latin, Greek, Cyrillic,
    punctuation, dashes, spaces, format characters, full-width forms), one per line: what a UTF-16/32
    decoding of bytes that are not UTF-16/32 turns into (CJK and other noise) is left out."""
    return "\n".join(m.group(0) for m in _TEXTY.finditer(text))


def text_decodings(data: bytes) -> Iterator[tuple[str, str]]:
    """(name, text) for each text decoding worth reading."""
    yield "utf-8", data.decode("utf-8", "replace")
    if not data.isascii():
        yield "latin-1", data.decode("latin-1")
    if b"\x00" in data:
        yield "nul-stripped", data.replace(b"\x00", b"").decode("utf-8", "replace")
        for enc in ("utf-16-le", "utf-16-be"):
            for off in (0, 1):
                yield f"{enc}@{off}", texty(data[off : len(data) - ((len(data) - off) % 2)].decode(enc, "replace"))
        if b"\x00\x00" in data:
            for enc in ("utf-32-le", "utf-32-be"):
                for off in range(4):
                    chunk = data[off:]
                    chunk = chunk[: len(chunk) - len(chunk) % 4]
                    yield f"{enc}@{off}", texty(chunk.decode(enc, "replace"))


def _inflate(data: bytes, wbits: int) -> bytes | None:
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(data, MAX_STREAM)
    except zlib.error:
        return None
    return out or None


def containers(data: bytes) -> Iterator[tuple[str, bytes]]:
    """(name, decoded bytes) of every compressed container found anywhere in `data`."""
    for m in re.finditer(rb"\x1f\x8b\x08", data):
        out = _inflate(data[m.start() :], 31)
        if out:
            yield f"gzip@{m.start()}", out
    for m in re.finditer(rb"\x78[\x01\x5e\x9c\xda]", data):
        out = _inflate(data[m.start() :], 15)
        if out:
            yield f"zlib@{m.start()}", out
    for m in re.finditer(rb"stream\r?\n", data):
        out = _inflate(data[m.end() :], -15)
        if out:
            yield f"pdf-deflate@{m.end()}", out
    for m in re.finditer(rb"PK\x03\x04", data):
        start = m.start()
        if len(data) < start + 30:
            continue
        method = int.from_bytes(data[start + 8 : start + 10], "little")
        nlen = int.from_bytes(data[start + 26 : start + 28], "little")
        xlen = int.from_bytes(data[start + 28 : start + 30], "little")
        body = start + 30 + nlen + xlen
        if method == 8:
            out = _inflate(data[body:], -15)
            if out:
                yield f"zip-member@{start}", out
        elif method == 12:
            try:
                out = bz2.BZ2Decompressor().decompress(data[body:], MAX_STREAM)
            except (OSError, ValueError, EOFError):
                out = None
            if out:
                yield f"zip-bz2@{start}", out
        # method 14 (LZMA) and the rest: read through zipfile below
    if b"PK\x05\x06" in data:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for info in zf.infolist():
                    if info.file_size <= MAX_STREAM:
                        yield f"zip:{info.filename}", zf.read(info)
                        yield f"zip-name:{info.filename}", info.filename.encode("utf-8")
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError, RuntimeError):
            pass
    for m in re.finditer(rb"BZh[1-9]1AY&SY", data):
        try:
            out = bz2.BZ2Decompressor().decompress(data[m.start() :], MAX_STREAM)
        except (OSError, ValueError, EOFError):
            continue
        if out:
            yield f"bz2@{m.start()}", out
    for m in re.finditer(rb"\xfd7zXZ\x00", data):
        try:
            out = lzma.LZMADecompressor().decompress(data[m.start() :], MAX_STREAM)
        except (lzma.LZMAError, EOFError):
            continue
        if out:
            yield f"xz@{m.start()}", out


# --- SQLite files -----------------------------------------------------------------------------------

SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_values(path: Path) -> Iterator[tuple[str, str | bytes]]:
    """Every cell value of every table of the database at `path`, read on a copy (with its -wal, so
    that committed pages not yet checkpointed are seen), never touching the original."""
    with tempfile.TemporaryDirectory(prefix="oracle-sqlite-") as tmp:
        copy = Path(tmp) / "db.sqlite"
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + "-wal")
        if wal.exists():
            shutil.copyfile(wal, Path(tmp) / "db.sqlite-wal")
        try:
            conn = sqlite3.connect(str(copy))
        except sqlite3.Error:
            return
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        except sqlite3.Error:
            conn.close()
            return
        try:
            for t in tables:
                try:
                    rows = conn.execute(f'SELECT * FROM "{t}"').fetchall()
                except sqlite3.Error:
                    continue  # a virtual table whose module is not loaded: its shadow tables are read
                for row in rows:
                    for v in row:
                        if isinstance(v, str | bytes) and v:
                            yield f"sqlite:{t}", v
        finally:
            conn.close()


# --- the scan -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One occurrence: the file (relative to the scanned root), the chain of views, the kind of
    identifier and the canonical text that matched."""

    file: str
    view: str
    kind: str
    text: str
    who: str = ""
    """The id of the person whose identifier matched."""

    def __str__(self) -> str:
        return f"{self.file} [{self.view}] {self.kind}: {self.text!r}"


@dataclass
class Scan:
    """What a scan found, and what it could not read."""

    hits: list[Hit] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)

    def files(self) -> set[str]:
        return {h.file for h in self.hits}

    def kinds(self) -> set[str]:
        return {h.kind for h in self.hits}

    def of(self, person_id: str) -> Scan:
        """Only the hits of one person."""
        return Scan([h for h in self.hits if h.who == person_id], list(self.unread))

    def __bool__(self) -> bool:
        return bool(self.hits)

    def summary(self, limit: int = 20) -> str:
        seen: dict[tuple[str, str, str], Hit] = {}
        for h in self.hits:
            seen.setdefault((h.file, h.kind, h.text), h)
        lines = [str(h) for h in list(seen.values())[:limit]]
        more = len(seen) - len(lines)
        return "\n".join(lines + ([f"... and {more} more"] if more > 0 else []))


_WINDOW = 400
"""Characters on each side of an anchor that a pattern is run on (longer than any match)."""
_PHONE_RUN = re.compile(r"[0-9+][0-9\s\-./()\[\]+]*[0-9]")


class Seen:
    """Views already read, with the shallowest depth each was read at: a view read again deeper is
    skipped (the shallower reading nested at least as far); read again shallower, it is read again."""

    def __init__(self) -> None:
        self.depth: dict[tuple[str, int, int], int] = {}

    def first(self, key: tuple[str, int, int], depth: int) -> bool:
        old = self.depth.get(key)
        if old is not None and old <= depth:
            return False
        self.depth[key] = depth
        return True


_MAGICS = (
    b"\x1f\x8b\x08",
    b"\x78\x9c",
    b"\x78\xda",
    b"\x78\x01",
    b"\x78\x5e",
    b"PK\x03\x04",
    b"BZh",
    b"\xfd7zXZ\x00",
    b"stream",
    SQLITE_MAGIC,
)


def plausible(raw: bytes) -> bool:
    """Decoded base64 worth reading further: text (valid UTF-8), UTF-16/32 (NUL bytes), or a container.
    (Random letters that happen to form a base64 run decode to bytes that are none of these.)"""
    if b"\x00" in raw or any(m in raw for m in _MAGICS):
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_JUNK_RUN = re.compile(f"[\x00-\x08\x0e-\x1f\x7f\ufffd]{{{JUNK_RUN}}}")


def segments(text: str) -> Iterator[str]:
    """`text` cut at every run of JUNK_RUN or more control or undecodable characters. No match can
    hold such a run (an id's or a name's separators are at most 4 characters, a phone's at most 3, an
    email has none, its `+tag` taken to hold none either), so nothing a pass over the whole text finds
    is lost; each piece is unescaped and decoded on its own, so a view tree grows only where escapes
    are, not over the whole file."""
    start = 0
    for m in _JUNK_RUN.finditer(text):
        if m.start() > start:
            yield text[start : m.start()]
        start = m.end()
    if start < len(text):
        yield text[start:]


class _Scanner:
    def __init__(self, people: Iterable[Person]) -> None:
        self.patterns = [(p.id, Patterns.of(p)) for p in people]

    def match(self, text: str, where: str, view: str, out: list[Hit]) -> None:
        """Every match of every person's patterns in every canonical form of `text`. A pattern runs
        only on windows around an occurrence of a piece every one of its matches contains (the longest
        piece of each alternative; phones: a run of digits and separators holding the national
        number), which finds exactly what a pass over the whole text finds: matches are far shorter
        than the window."""
        for form in canonical_forms(text):
            seen: set[tuple[str, str, int]] = set()
            phone_runs = None
            for who, pat in self.patterns:
                for kind, rx in pat.by_kind.items():
                    if kind == "phone":
                        if phone_runs is None:
                            phone_runs = [
                                (m.start(), m.end(), re.sub(r"\D", "", m.group(0))) for m in _PHONE_RUN.finditer(form)
                            ]
                        anchors = [(a, b) for a, b, d in phone_runs if pat.nsn and pat.nsn in d]
                    else:
                        anchors = []
                        for alt in pat.needs.get(kind, []):
                            if not alt or not all(piece in form for piece in alt):
                                continue
                            key = max(alt, key=len)
                            pos = form.find(key)
                            while pos >= 0:
                                anchors.append((pos, pos + len(key)))
                                pos = form.find(key, pos + 1)
                    for a, b in anchors:
                        lo = max(0, a - _WINDOW)
                        for m in rx.finditer(form, lo, min(len(form), b + _WINDOW)):
                            k = (who, kind, m.start())
                            if k not in seen:
                                seen.add(k)
                                out.append(Hit(where, view, kind, m.group(0), who))

    def scan_text(self, text: str, where: str, view: str, depth: int, out: list[Hit], seen: Seen) -> None:
        if not seen.first(("t", hash(text), len(text)), depth):
            return
        self.match(text, where, view, out)
        if depth >= MAX_DEPTH:
            return
        for name, applies, fn in _UNESCAPES:
            if applies(text):
                try:
                    t2 = fn(text)
                except (ValueError, UnicodeError):
                    continue
                if t2 != text:
                    self.scan_text(t2, where, f"{view}>{name}", depth + 1, out, seen)
                    if "\x00" in t2 and "\x00" not in text:  # escapes that spell bytes (escaped UTF-16)
                        self.scan_bytes(
                            t2.encode("latin-1", "ignore"), where, f"{view}>{name}>as-bytes", depth + 1, out, seen
                        )
        for m in _B64_RUN.finditer(text):
            for raw in b64_candidates(m.group(0)):
                if plausible(raw):
                    self.scan_bytes(raw, where, f"{view}>base64", depth + 1, out, seen)

    def scan_bytes(self, data: bytes, where: str, view: str, depth: int, out: list[Hit], seen: Seen) -> None:
        if not seen.first(("b", hash(data), len(data)), depth):
            return
        for name, text in text_decodings(data):
            for piece in segments(text):
                self.scan_text(piece, where, f"{view}>{name}" if view else name, depth, out, seen)
        if depth >= MAX_DEPTH:
            return
        for name, inner in containers(data):
            self.scan_bytes(inner, where, f"{view}>{name}" if view else name, depth + 1, out, seen)

    def scan_file(self, path: Path, where: str, scan: Scan) -> None:
        try:
            size = path.stat().st_size
            if size > MAX_FILE:
                scan.unread.append(where)
                return
            data = path.read_bytes()
        except OSError:
            scan.unread.append(where)
            return
        seen = Seen()
        self.scan_bytes(data, where, "", 0, scan.hits, seen)
        if data.startswith(SQLITE_MAGIC):
            for table, value in sqlite_values(path):
                if isinstance(value, str):
                    self.scan_text(value, where, table, 1, scan.hits, seen)
                else:
                    self.scan_bytes(value, where, table, 1, scan.hits, seen)


def scan_bytes(data: bytes, *people: object) -> Scan:
    """Every occurrence of any of `people` in `data` (named `<bytes>`)."""
    scan = Scan()
    _Scanner([Person.of(p) for p in people]).scan_bytes(data, "<bytes>", "", 0, scan.hits, Seen())
    return scan


def scan_text(text: str, *people: object) -> Scan:
    return scan_bytes(text.encode("utf-8"), *people)


def scan_tree(root: Path | str, *people: object, exclude: Iterable[str] = ()) -> Scan:
    """Every occurrence of any of `people` in every file under `root`; top-level folders named in
    `exclude` (relative paths) are skipped."""
    root = Path(root)
    skip = {Path(e) for e in exclude}
    scanner = _Scanner([Person.of(p) for p in people])
    scan = Scan()
    for dirpath, dirs, files in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirs[:] = sorted(d for d in dirs if rel_dir / d not in skip and not (Path(dirpath) / d).is_symlink())
        for name in sorted(files):
            p = Path(dirpath) / name
            if p.is_symlink() or not p.is_file():
                continue
            rel = str(p.relative_to(root))
            if Path(rel) in skip:
                continue
            scanner.scan_file(p, rel, scan)
    return scan


HOME_EXCLUDE = ("engine", "keys")
"""What "all clear" allows to keep the subject: the request vault (engine/) and the keys."""


def scan_home(home_root: Path, evidence_root: Path | None, *people: object) -> Scan:
    """The home (but the vault and the keys) and the evidence folder."""
    scan = scan_tree(home_root, *people, exclude=HOME_EXCLUDE)
    if evidence_root is not None and evidence_root.exists() and not evidence_root.is_relative_to(home_root):
        ev = scan_tree(evidence_root, *people)
        scan.hits += [Hit(f"evidence/{h.file}", h.view, h.kind, h.text, h.who) for h in ev.hits]
        scan.unread += [f"evidence/{u}" for u in ev.unread]
    return scan
