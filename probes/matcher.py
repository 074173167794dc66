"""The needles as the decoded views match them: one canonical form, each needle's canonical regexes and
raw-byte triggers, one `Matcher` for them all, and the text views (escapes) a window of text is read
through before it is matched (`probes.views` reads the files and decides which windows to match).

Canonical form (both sides): NFKC, case folding, format characters removed (soft hyphen, zero-width
characters, BOM), every dash a hyphen, diacritics stripped, every run of white space one space. So
`ß`/`ss`, `Müller`/`Muller` are one spelling; `Mueller` is added as a spelling of a name with an umlaut
(and the reverse). Phones match as their digits with any separators and an optional `+`/`00` before
them (each of the probe's phone forms, national trunk form included, is its own needle); emails with
any `+tag`; names and ids with their tokens in either order and any separators between them.

Triggers: a fragment of an identifier that survives every text encoding, raw and in every escaped
spelling (`probes.encoded`: the needles are encoded, not the haystack), an id's words in order, a
name's longer required part, a digit, an encoded separator and a digit where a phone is looked for, and
the generic ones (a full-width run, a base64 run, a container's magic), found in one hyperscan pass over
a file's bytes; the database is compiled once per process for a set of needles (`compiled`).

Text views: JSON string escapes (`\\u0040`, surrogate pairs, `\\n`); percent-encoding (`%40`, with and
without `+` as a space); HTML entities (named and numeric); quoted-printable (`=40`, soft breaks); and
each pair of them.
"""

from __future__ import annotations

import html
import quopri
import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, unquote_plus

import hyperscan

from probes.bytescan import _escape
from probes.encoded import escaped
from probes.rule import Found, Person, Rule

MIN_BASE64 = 12
"""Characters of the shortest base64 run read."""
MIN_FRAGMENT = 3

_FORMAT_CHARS = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb]"
)
_DASHES = re.compile(
    "[\u058a\u05be\u1400\u1806\u2010-\u2015\u2043\u2212\u2e17\u2e1a\u2e3a\u2e3b\u2e40\u301c"
    "\u3030\u30a0\ufe31\ufe32\ufe58\ufe63\uff0d]"
)
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


# --- the needles, as canonical patterns and raw-byte triggers -------------------------------------------------

_PHONE_SHAPE = re.compile(r"^\+?[\d\s().\-/]+$")
_EMAIL_SHAPE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_SEP_RAW = rb"[^0-9A-Za-z]{0,12}"
"""Between a phone's digits in raw bytes: separators in any byte encoding (UTF-8 dashes are three bytes;
UTF-16 and UTF-32 text puts NULs between the digits).
Encoded separators (`\\u2011`, `%E2%80%91`, `&#8209;`) hold digits: `_DIGIT_ESCAPE_DIGIT` opens a
window there instead."""
_DIGIT_ESCAPE_DIGIT = (
    rb"[0-9][^A-Za-z0-9]{0,2}(?:%[0-9A-Fa-f]{2}|=[2-3][0-9A-F]|&#?[a-zA-Z0-9]{2,8};|\x5cu[0-9a-fA-F]{4})"
    rb"[^A-Za-z0-9]{0,2}[0-9]"
)
"""An encoded separator between two digits: where a phone is looked for, a window is read there (the
phone's digits joined by every escaped separator make a pattern hyperscan refuses as too large)."""
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
    out = [
        folded,
        canonical(text.translate(_UMLAUT)),
        re.sub(r"(?<=[^aeiou\W])(ae|oe|ue)", lambda m: m.group(1)[0], folded),
    ]
    return list(dict.fromkeys(v for v in out if v.strip()))


def _patterns(kind: str, text: str, ident: str = "") -> tuple[list[tuple[str, str]], list[str | bytes]]:
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
    pick: int | None = None
    for variant in _name_variants(text):
        tokens = _TOKEN.findall(variant)
        if not tokens:
            continue
        orders = [tokens] if len(tokens) == 1 else [tokens, [tokens[-1], *tokens[:-1]]]
        regexes += [(_boundary(_TOKEN_SEP.join(re.escape(t) for t in order)), max(tokens, key=len)) for order in orders]
        if ident == "id":
            triggers.append(_id_expression(tokens))
            continue
        if ident == "name":
            # Every hit of a name holds its given and its family name (docs/matching.md 3.3, 3.4): the
            # longer of the two is trigger enough (a namesake's given name opens no window).
            if pick is None:
                pick = -1 if len(tokens[-1]) >= len(tokens[0]) else 0
            tokens = [tokens[pick]]
        long = [t for t in tokens if len(t) >= MIN_FRAGMENT]
        triggers += long or [variant]
    lowered = unicodedata.normalize("NFKC", text)
    for written in (lowered.lower(), lowered.casefold()):
        tokens = _TOKEN.findall(written)
        for token in tokens if pick is None or not tokens else [tokens[pick]]:
            # Non-ASCII letters are escaped or re-encoded by software; the ASCII runs between them survive.
            triggers += [run for run in re.findall(rf"[a-z0-9]{{{MIN_FRAGMENT},}}", token) if run != token]
            if not token.isascii():
                triggers.append(token)
    return list(dict.fromkeys(regexes)), list(dict.fromkeys(triggers))


_ID_SEP = (
    rb"(?:[^A-Za-z0-9]{0,3}|(?:%[0-9A-Fa-f]{2}){1,3}|\x5cu[0-9A-Fa-f]{4}|&#[xX]?[0-9A-Fa-f]{2,7};|&[A-Za-z]{2,8};"
    rb"|(?:=[0-9A-F]{2}){1,3})"
)


def _id_expression(tokens: Sequence[str]) -> bytes:
    """An id's words in order, each raw or escaped, with at most one separator (raw or escaped) between
    them: every hit of an id holds its words so (docs/matching.md 6.1, 6.1b), and one word alone (`000123`
    of `user-000123`) would open a window at every other id that shares it."""
    return _ID_SEP.join(b"(?:" + escaped(t) + b")" for t in tokens)


IDENT_KINDS = ("id", "email", "name", "phone")


def ident_kind(kind: str, text: str) -> str:
    """Which kind of identifier a needle spells: the harvest's word (`identifier:<kind>`), else its shape."""
    _, _, named = kind.partition(":")
    if named in IDENT_KINDS:
        return named
    t = text.strip()
    if _EMAIL_SHAPE.match(t):
        return "email"
    if _PHONE_SHAPE.match(t) and len(re.sub(r"\D", "", t)) >= 7:
        return "phone"
    return "name" if " " in t else "id"


def person_of(values: Sequence[tuple[str, str]]) -> Person:
    """(kind, text) identifiers as one `probes.rule.Person`; national phone spellings (no `+` or `00`) have
    no country, and match nothing by docs/matching.md 5.3: the E.164 spelling beside them does."""
    by: dict[str, list[str]] = {k: [] for k in IDENT_KINDS}
    for kind, text in values:
        by[kind].append(text)
    return Person(ids=tuple(by["id"]), emails=tuple(by["email"]), names=tuple(by["name"]), phones=tuple(by["phone"]))


WIDE_TEXT = re.compile(
    rb"(?:[\x20-\x7e]\x00){3}|(?:\x00[\x20-\x7e]){3}"
    rb"|(?:[\x20-\x7e]\x00\x00\x00){3}|(?:\x00\x00\x00[\x20-\x7e]){3}"
)
"""Letters with NULs between them: only then is a window read as UTF-16/32 too (every page of a
database has NULs; decoding each window four more ways cost most of the views' time there)."""
WIDE_CODECS = (("utf-16-le", 2), ("utf-16-be", 2), ("utf-32-le", 4), ("utf-32-be", 4))


def _expressions(trigger: str | bytes) -> list[bytes]:
    """A trigger as hyperscan expressions: an expression as it is; a literal text in UTF-8 and in UTF-16
    and UTF-32 (both byte orders), so that text in a wide encoding inside other bytes (a UTF-16
    attachment in a blob column) is found by its own letters, far cheaper than every run of wide text."""
    if isinstance(trigger, bytes):
        return [trigger]
    return [_escape(trigger.encode(codec)) for codec in ("utf-8", *(c for c, _w in WIDE_CODECS))]


# Generic triggers: where a container starts, whoever's data it holds (escapes and base64 text are found
# by the needles' encoded spellings, `probes.encoded`).
_MAGICS = (
    b"\x1f\x8b\x08",
    b"BZh",
    b"\xfd7zXZ\x00",
    b"PK\x03\x04",
    b"PK\x05\x06",
    b"%PDF-",
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff",
    b"GIF8",
    b"II*\x00",
    b"MM\x00*",
    b"{\\rtf",
    b"SQLite format 3\x00",
    b"\x28\xb5\x2f\xfd",
    b"\x04\x22\x4d\x18",
    b"7z\xbc\xaf\x27\x1c",
    b"RIFF",
    b"\x80\x04\x95",
    b"\x78\x9c",
    b"\x78\xda",
)
"""Magics of formats `probes.documents.formats.binary_format` identifies (a pickle of protocol 4 or 5,
zlib at the default and best levels), looked for where a base64 run decodes."""
_GENERIC: dict[str, bytes] = {
    "fullwidth": rb"(?:\xef[\xbc\xbd][\x80-\xbf]){3}",
    # a format's magic: looked at only in base64 runs' decoded bytes (`probes.view_payloads`), where a
    # payload starts that is read as that format
    "magic": b"|".join(_escape(m) for m in _MAGICS),
    # a run of base64 characters long enough to read (reported once per scan): the payload's base64 runs
    # are decoded (`probes.view_payloads.base64_stream`)
    "base64-run": rb"[A-Za-z0-9+/_\-]{%d}" % MIN_BASE64,
    "gzip": rb"\x1f\x8b\x08",
    "bz2": rb"BZh[1-9]1AY&SY",
    "xz": rb"\xfd7zXZ\x00",
    "zip": rb"PK\x03\x04",
    "flate": rb"stream\r?\n",
}
GENERIC_NAMES = list(_GENERIC)


@dataclass(frozen=True)
class _Compiled:
    db: hyperscan.Database
    scratch: hyperscan.Scratch


_COMPILED: dict[tuple[tuple[str, str], ...], _Compiled] = {}
_COMPILED_LOCK = threading.Lock()
MAX_COMPILED = 8
"""Trigger databases kept per process, by their needles: the requests of a window, and each probe of
a verification, look for the same needles."""


def _compile(needles: tuple[tuple[str, str], ...]) -> _Compiled:
    expressions = [_GENERIC[n] for n in GENERIC_NAMES]
    ids = list(range(len(GENERIC_NAMES)))
    flags = [hyperscan.HS_FLAG_SINGLEMATCH if n == "base64-run" else 0 for n in GENERIC_NAMES]
    for index, (kind, text) in enumerate(needles):
        if kind.startswith("identifier"):
            ident = ident_kind(kind, text)
            triggers = _patterns("identifier", text, ident)[1]
        elif kind == "content":
            ident = "content"
            triggers = _patterns(kind, text)[1]
        else:
            continue
        exprs: list[bytes] = []
        for trigger in triggers:
            exprs += _expressions(trigger)
            if isinstance(trigger, str):
                exprs.append(escaped(trigger))
        if ident == "phone":
            exprs.append(_DIGIT_ESCAPE_DIGIT)
        if ident == "id":  # in UTF-16 or UTF-32 text, by its longest word
            longest = max(_TOKEN.findall(canonical(text)) or [text], key=len)
            exprs += _expressions(longest)[1:]
        for e in dict.fromkeys(exprs):
            expressions.append(e)
            ids.append(len(GENERIC_NAMES) + index)
            flags.append(hyperscan.HS_FLAG_CASELESS)
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=expressions, ids=ids, flags=flags)
    return _Compiled(db, hyperscan.Scratch(db))


def compiled(needles: Sequence[tuple[str, str]]) -> _Compiled:
    """The triggers' database for `needles`, compiled once per process and kept (`MAX_COMPILED`)."""
    key = tuple((k, t) for k, t in needles)
    with _COMPILED_LOCK:
        got = _COMPILED.get(key)
        if got is None:
            got = _compile(key)
            if len(_COMPILED) >= MAX_COMPILED:
                _COMPILED.pop(next(iter(_COMPILED)))
            _COMPILED[key] = got
        return got


class Matcher:
    """Every needle (identifier or content text) as canonical regexes, with one hyperscan database of
    raw-byte triggers for them all."""

    def __init__(self, needles: Sequence[tuple[str, str]], *, once: bool = False) -> None:
        """`needles`: (kind, text) per needle index, kind `identifier` or `content`, or `shared` (another
        person's own identifier: only explains hits); other kinds are skipped. `once`: a needle found in
        one text is not looked for in later ones (a scan for a verdict; not a matcher asked about each
        text in turn, such as the canaries' choice)."""
        self.regexes: list[tuple[int, re.Pattern[str], str]] = []
        self.rules: list[tuple[int, Rule]] = []
        """Identifier needles, each matched by docs/matching.md (`probes.rule`): only unambiguous hits count."""
        shared: list[tuple[str, str]] = []
        every: list[tuple[str, str]] = []
        self.keys: list[re.Pattern[str]] = []
        for index, (kind, text) in enumerate(needles):
            if kind == "shared:key":  # another person's source key that names the subject: theirs, as written
                self.keys.append(re.compile(re.escape(text), re.IGNORECASE))
                continue
            if kind.startswith("shared"):
                shared.append((ident_kind(kind, text), text))
                continue
            if kind.startswith("identifier"):
                ident = (ident_kind(kind, text), text)
                self.rules.append((index, Rule(person_of([ident]))))
                every.append(ident)
            elif kind == "content":
                rxs, _triggers = _patterns(kind, text)
                self.regexes += [(index, re.compile(rx), literal) for rx, literal in rxs]
        self.needles = len(needles)
        self._compiled = compiled(needles)
        self.every = Rule(person_of(every))
        """All identifier needles as one person: a text with no hit of it holds none of them."""
        self.shared = Rule(person_of(shared)) if shared else None
        """Other people's own identifiers (a namesake's name): a hit inside one of theirs is theirs."""
        self._local = threading.local()
        self._lock = threading.Lock()
        self.once = once
        self.found: set[int] = set()
        """With `once`, needles already found in some view: never looked for again (a verdict needs one
        occurrence, and a store that still holds a subject has a trigger in every one of their frames)."""

    @property
    def empty(self) -> bool:
        """No needle to look for."""
        return not self.regexes and not self.rules

    def match_text(self, text: str, hits: dict[int, int]) -> None:
        """Count each needle's occurrences in `text` read through every text view (the largest count any
        one view gives, so an occurrence seen by several views counts once). Identifiers are found by
        docs/matching.md (`probes.rule`), ambiguous hits not counted; content windows as canonical
        substrings. An occurrence inside one of a `shared` needle (another person's own identifier: a
        namesake's name, a household phone) is theirs, and not counted."""
        regexes = [(index, rx, literal) for index, rx, literal in self.regexes if index not in self.found]
        rules = [(index, rule) for index, rule in self.rules if index not in self.found]
        if not regexes and not rules:
            return
        best: dict[int, int] = {}
        for variant in _text_variants(text):
            if rules and any(not f.ambiguous for f in self.every.find(variant)):
                theirs = [(f.start, f.end) for f in self.shared.find(variant)] if self.shared else []
                theirs += [m.span() for rx in self.keys for m in rx.finditer(variant)]
                for index, rule in rules:
                    n = sum(1 for f in rule.find(variant) if _counted(f, theirs))
                    if n > best.get(index, 0):
                        best[index] = n
            if not regexes:
                continue
            c = canonical(variant)
            for index, rx, literal in regexes:
                # Most windows hold no needle: a substring test before any match is counted.
                if literal not in c or rx.search(c) is None:
                    continue
                n = sum(1 for _m in rx.finditer(c))
                if n > best.get(index, 0):
                    best[index] = n
        for index, n in best.items():
            hits[index] = hits.get(index, 0) + n
        if self.once:
            self.found |= best.keys()

    def _scratch(self) -> hyperscan.Scratch:
        if not hasattr(self._local, "scratch"):  # a scratch space is one thread's at a time
            with self._lock:
                self._local.scratch = self._compiled.scratch.clone()
        return self._local.scratch  # type: ignore[no-any-return]

    def triggers(self, data: bytes) -> list[tuple[int, int]]:
        """(trigger id, end offset) of every trigger in `data`, in one hyperscan pass: ids below
        `len(GENERIC_NAMES)` are generic, then one per needle (a raw or escaped spelling of it)."""
        out: list[tuple[int, int]] = []

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            out.append((pid, end))

        self._compiled.db.scan(data, match_event_handler=on_match, scratch=self._scratch())
        return sorted(out, key=lambda t: t[1])


def _counted(f: Found, theirs: list[tuple[int, int]]) -> bool:
    return not f.ambiguous and not any(a < f.end and f.start < b for a, b in theirs)


# --- text views -----------------------------------------------------------------------------------------------

_JSON_ESCAPE = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})"
    r"|\\([nrtbf/\"\\])"
)
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
    return unquote(text, errors="replace") if _PERCENT.search(text) else text


def _percent_plus(text: str) -> str:
    # Only a text with a percent escape is form-encoded: in any other, `+` is a plus (`+1 (207) 946-0007`
    # read with its `+` as a space would be a national number of the subject's country).
    return unquote_plus(text, errors="replace") if _PERCENT.search(text) else text


def _entities(text: str) -> str:
    return html.unescape(text) if _ENTITY.search(text) else text


def _quoted_printable(text: str) -> str:
    if not _QP.search(text):
        return text
    return quopri.decodestring(text.encode("utf-8", "surrogatepass")).decode("utf-8", "replace")


_TEXT_DECODERS: tuple[Callable[[str], str], ...] = (
    _json_unescape,
    _percent,
    _entities,
    _quoted_printable,
    _percent_plus,
)
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
