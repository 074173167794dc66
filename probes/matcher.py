"""The needles as the decoded views match them: one canonical form, each needle's canonical regexes and
raw-byte triggers, one `Matcher` for them all, and the text views (escapes) a window of text is read
through before it is matched (`probes.views` reads the files and decides which windows to match).

Canonical form (both sides): NFKC, case folding, format characters removed (soft hyphen, zero-width
characters, BOM), every dash a hyphen, diacritics stripped, every run of white space one space. So
`ß`/`ss`, `Müller`/`Muller` are one spelling; `Mueller` is added as a spelling of a name with an umlaut
(and the reverse). Phones match as their digits with any separators and an optional `+`/`00` before
them (each of the probe's phone forms, national trunk form included, is its own needle); emails with
any `+tag`; names and ids with their tokens in either order and any separators between them.

Triggers: a fragment of an identifier that survives every text encoding, a phone's digits with encoded
separators, and the generic ones (an escape run, a base64 or UTF-16 run, a container's magic), found in
one hyperscan pass over a file's bytes.

Text views: JSON string escapes (`\\u0040`, surrogate pairs, `\\n`); percent-encoding (`%40`, with and
without `+` as a space); HTML entities (named and numeric); quoted-printable (`=40`, soft breaks); and
each pair of them.
"""

from __future__ import annotations

import contextlib
import html
import quopri
import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from operator import itemgetter
from urllib.parse import unquote

import hyperscan

from probes.bytescan import _escape
from probes.char_triggers import (
    FoldedTriggers,
    base64_start,
    base64_trigger,
    compatibility_trigger,
    email_digests,
    escaped_alnum_trigger,
    folded_triggers,
    ignorable_trigger,
    other_digits_trigger,
    recut_triggers,
    trigger_words,
)
from probes.rule import Found, Person, Rule
from probes.rule.ids import compile_id
from probes.rule.ocr import OcrRule

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
    out = [
        folded,
        canonical(text.translate(_UMLAUT)),
        re.sub(r"(?<=[^aeiou\W])(ae|oe|ue)", lambda m: m.group(1)[0], folded),
    ]
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
        return [(rx, local)], [anchor if len(anchor) >= MIN_FRAGMENT else local, *email_digests(text)]
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
    named = " " in text.strip()  # a name's hits hold its last word: its triggers are made of it alone
    for variant in _name_variants(text):
        tokens = _TOKEN.findall(variant)
        if not tokens:
            continue
        orders = [tokens] if len(tokens) == 1 else [tokens, [tokens[-1], *tokens[:-1]]]
        regexes += [(_boundary(_TOKEN_SEP.join(re.escape(t) for t in order)), max(tokens, key=len)) for order in orders]
        long = [t for t in (trigger_words(tokens, MIN_FRAGMENT) if named else tokens) if len(t) >= MIN_FRAGMENT]
        triggers += long or [variant]
    lowered = unicodedata.normalize("NFKC", text)
    for word in (lowered.lower(), lowered.casefold()):
        words = _TOKEN.findall(word)
        for token in trigger_words(words, MIN_FRAGMENT) if named else words:
            # Non-ASCII letters are escaped or re-encoded by software; the ASCII runs between them survive.
            triggers += [run for run in re.findall(rf"[a-z0-9]{{{MIN_FRAGMENT},}}", token) if run != token]
            if not token.isascii():
                triggers.append(token)
    triggers += [] if named else recut_triggers(_TOKEN.findall(lowered.casefold()))  # `probes.char_triggers`
    return list(dict.fromkeys(regexes)), list(dict.fromkeys(triggers))


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
database has NULs; decoding each window four more ways cost most of the views' time there). Looked for
by `has_wide_text` (Python's `re` took 57 ns a byte over a database's pages)."""
_WIDE_DB: list[hyperscan.Database] = []
_WIDE_SCRATCH = threading.local()


def has_wide_text(data: bytes) -> bool:
    """Whether `WIDE_TEXT` matches somewhere in `data`: one hyperscan pass, stopped at the first match."""
    if b"\x00" not in data:  # every match holds a NUL
        return False
    if not _WIDE_DB:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[WIDE_TEXT.pattern], ids=[0], flags=[hyperscan.HS_FLAG_SINGLEMATCH])
        _WIDE_DB.append(db)
    db = _WIDE_DB[0]
    scratch = getattr(_WIDE_SCRATCH, "scratch", None)
    if scratch is None:
        scratch = _WIDE_SCRATCH.scratch = hyperscan.Scratch(db)
    found: list[int] = []

    def on_match(_pid: int, _start: int, _end: int, _flags: int, _ctx: object) -> bool:
        found.append(1)
        return True  # stop the scan

    with contextlib.suppress(hyperscan.ScanTerminated):
        db.scan(data, match_event_handler=on_match, scratch=scratch)
    return bool(found)


WIDE_CODECS = (("utf-16-le", 2), ("utf-16-be", 2), ("utf-32-le", 4), ("utf-32-be", 4))


def _expressions(trigger: str | bytes) -> list[bytes]:
    """A trigger as hyperscan expressions: an expression as it is; a literal text in UTF-8 and in UTF-16
    and UTF-32 (both byte orders), so that text in a wide encoding inside other bytes (a UTF-16
    attachment in a blob column) is found by its own letters, far cheaper than every run of wide text."""
    if isinstance(trigger, bytes):
        return [trigger]
    return [_escape(trigger.encode(codec)) for codec in ("utf-8", *(c for c, _w in WIDE_CODECS))]


# Generic triggers: where an encoding or a container starts, whoever's data it holds.
_GENERIC: dict[str, bytes] = {
    # an encoded separator between two digits (a phone), two escapes in a row, an escaped dash or
    # space, one entity, two quoted-printable octets, one escaped letter or digit (`probes.char_triggers`)
    "escapes": rb"[0-9][^A-Za-z0-9]{0,2}(?:%[0-9A-Fa-f]{2}|=[2-3][0-9A-F]|&#?[a-zA-Z0-9]{2,8};|\\u[0-9a-fA-F]{4})"
    rb"[^A-Za-z0-9]{0,2}[0-9]"
    rb"|(?:\\u[0-9a-fA-F]{4}){2}|\\u20[0-9a-fA-F]{2}|\\u00[aA][0dD]|(?:%[0-9A-Fa-f]{2}){2}|%[Cc]2%[Aa]0"
    rb"|&#x?[0-9a-fA-F]{2,6};|&[a-zA-Z]{2,8};|(?:=[0-9A-F]{2}){2}|" + escaped_alnum_trigger(),
    "fullwidth": rb"(?:\xef[\xbc\xbd][\x80-\xbf]){3}",
    # A format character (Cf): words and addresses skip it (docs/matching.md 2.4), so one after every
    # letter leaves no fragment of an identifier for its own triggers to find (see `probes.char_triggers`).
    "ignorable": b"",
    # Decimal digits of another script than ASCII: a phone or an id written in them (see `probes.char_triggers`).
    "digits": b"",
    # A letter or digit in a compatibility form (fullwidth, mathematical) beside a letter or digit (NFKC).
    "compatibility": b"",
    # A run's start, once (anchored on the byte before it), with a capital, digit or symbol among its
    # first characters: a long lower-case word is not base64 (12 lower-case letters in a row start
    # 2 in 100,000 base64 runs), and triggers cost a decode each.
    # `-` is left out of the trigger (not of the run it finds): ISO timestamps ("2025-01-06T22") are
    # in every row of a store, and a url-safe run has a stretch without `-` long enough anyway.
    # Hex digests (a database holds one in every row) are no base64 run: only runs that are not all
    # hex are triggered (`_base64_trigger`).
    "base64": b"",
    "gzip": rb"\x1f\x8b\x08",
    "bz2": rb"BZh[1-9]1AY&SY",
    "xz": rb"\xfd7zXZ\x00",
    "zip": rb"PK\x03\x04",
    "flate": rb"stream\r?\n",
}
GENERIC_NAMES = list(_GENERIC)

BASE64_START = base64_start(MIN_BASE64)
"""Where a base64-looking run starts (see `_GENERIC`); `probes.view_payloads` skips a run that is all hex."""
_GENERIC["base64"] = base64_trigger(MIN_BASE64)
_GENERIC["ignorable"] = ignorable_trigger()
_GENERIC["digits"] = other_digits_trigger()
_GENERIC["compatibility"] = compatibility_trigger()


_GENERIC_DB: list[tuple[hyperscan.Database, hyperscan.Scratch]] = []
"""The generic triggers' databases: the base64 start alone (0.39 s for two databases where one took 0.49 s
on the 100k demo store's database file), other scripts' digits alone (they tripled the others'), the
compatibility forms alone (0.05 s; 0.42 s for the rest with them, 0.09 s without), the rest."""
_BASE64_DB: list[hyperscan.Database] = []  # the base64 start's own database, once compiled


def _generic_db() -> list[tuple[hyperscan.Database, hyperscan.Scratch]]:
    """The generic triggers' databases, compiled once per process (a scratch of its own per matcher)."""
    if not _GENERIC_DB:
        alone = ["base64", "digits", "compatibility"]
        for names in [*([n] for n in alone), [n for n in GENERIC_NAMES if n not in alone]]:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            db.compile(
                expressions=[_GENERIC[n] for n in names],
                ids=[GENERIC_NAMES.index(n) for n in names],
                flags=[0] * len(names),
            )
            _GENERIC_DB.append((db, hyperscan.Scratch(db)))
        _BASE64_DB.append(_GENERIC_DB[0][0])
    return [(db, scratch.clone()) for db, scratch in _GENERIC_DB]


class Provisional(dict[int, int]):
    """Hits counted apart (inside a payload pasted into a text, `probes.view_payloads.FileScan.encoded_in`):
    a `once` matcher that counts a needle here keeps looking for it elsewhere."""


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
        expressions: list[bytes] = []
        ids: list[int] = []
        flags: list[int] = []
        shared: list[tuple[str, str]] = []
        every: list[tuple[str, str]] = []
        folded: list[tuple[int, bytes]] = []
        self.keys: list[re.Pattern[str]] = []
        self._narrow: list[tuple[int, int, tuple[str, ...]]] = []
        """Per narrowed trigger (id `_NARROW` + k): its needle's trigger id, its length, the id's spellings."""
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
                triggers = _patterns("identifier", text)[1]
                if ident[0] == "name":  # a name's letters with diacritics: a database of their own (below)
                    words = trigger_words(_TOKEN.findall(text.casefold()), MIN_FRAGMENT)
                    folded += [(len(_GENERIC) + index, t) for t in folded_triggers(words)]
            elif kind == "content":
                rxs, triggers = _patterns(kind, text)
                self.regexes += [(index, re.compile(rx), literal) for rx, literal in rxs]
            else:
                continue
            spellings = _id_spellings(kind, text)
            for trigger in triggers:
                for k, t in enumerate(_expressions(trigger)):
                    expressions.append(t)
                    flags.append(hyperscan.HS_FLAG_CASELESS)
                    if k == 0 and spellings and isinstance(trigger, str) and _ALNUM_RUN.fullmatch(trigger.encode()):
                        # an id's token in UTF-8: checked against its neighbours (`_plausible`)
                        ids.append(_NARROW + len(self._narrow))
                        self._narrow.append((len(_GENERIC) + index, len(trigger), spellings))
                    else:
                        ids.append(len(_GENERIC) + index)
        self.db: hyperscan.Database | None = None
        if expressions:
            self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            self.db.compile(expressions=expressions, ids=ids, flags=flags)
            self._scratch = hyperscan.Scratch(self.db)
        self.every = Rule(person_of(every))
        """All identifier needles as one person: a text with no hit of it holds none of them."""
        self.shared = Rule(person_of(shared)) if shared else None
        """Other people's own identifiers (a namesake's name): a hit inside one of theirs is theirs."""
        self._generic = _generic_db()
        self.folded = FoldedTriggers.of(tuple(folded))
        self._ocr_rules: dict[int, OcrRule] = {}
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

    def _ocr(self, rule: Rule) -> OcrRule:
        """`rule`'s OCR rule (docs/matching.md 1.5), compiled at its first use."""
        got = self._ocr_rules.get(id(rule))
        if got is None:
            got = self._ocr_rules[id(rule)] = OcrRule(rule.person)
        return got

    def match_text(self, text: str, hits: dict[int, int], *, ocr: bool = False) -> None:
        """Count each needle's occurrences in `text` read through every text view (the largest count any
        one view gives, so an occurrence seen by several views counts once). Identifiers are found by
        docs/matching.md (`probes.rule`), ambiguous hits not counted; content windows as canonical
        substrings. An occurrence inside one of a `shared` needle (another person's own identifier: a
        namesake's name, a household phone) is theirs, and not counted. `ocr`: `text` was read from an
        image by OCR, and identifiers are found in it by 1.5 (look-alike characters folded)."""
        regexes = [(index, rx, literal) for index, rx, literal in self.regexes if index not in self.found]
        rules = [(index, rule) for index, rule in self.rules if index not in self.found]
        if not regexes and not rules:
            return
        best: dict[int, int] = {}

        def find(rule: Rule, variant: str) -> list[Found]:
            return self._ocr(rule).find(variant) if ocr else rule.find(variant)

        for variant in _text_variants(text):
            if rules and any(not f.ambiguous for f in find(self.every, variant)):
                theirs = [(f.start, f.end) for f in find(self.shared, variant)] if self.shared else []
                theirs += [m.span() for rx in self.keys for m in rx.finditer(variant)]
                for index, rule in rules:
                    n = sum(1 for f in find(rule, variant) if _counted(f, theirs))
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
        if self.once and not isinstance(hits, Provisional):
            self.found |= best.keys()

    def triggers(self, data: bytes, *, base64: bool = True) -> list[tuple[int, int]]:
        """(trigger id, end offset) of every trigger in `data` (ids below `len(GENERIC_NAMES)` are generic).
        `base64` False: the base64 start's own database is not scanned (a caller that reads no base64 run)."""
        out: list[tuple[int, int]] = []

        narrow = self._narrow

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            if pid < _NARROW:
                out.append((pid, end))
                return
            needle, length, spellings = narrow[pid - _NARROW]
            if _plausible(data, end - length, end, spellings):
                out.append((needle, end))

        if not hasattr(self._local, "generic"):  # a scratch space is one thread's at a time
            with self._lock:
                self._local.generic = [scratch.clone() for _db, scratch in self._generic]
                self._local.needles = self._scratch.clone() if self.db is not None else None
        for (db, _s), scratch in zip(self._generic, self._local.generic, strict=True):
            if base64 or db not in _BASE64_DB:
                db.scan(data, match_event_handler=on_match, scratch=scratch)
        if self.db is not None:
            self.db.scan(data, match_event_handler=on_match, scratch=self._local.needles)
        self.folded.scan(data, out)
        return sorted(out, key=itemgetter(1))


_NARROW = 1 << 20
"""Trigger ids from here on are an id's tokens, kept only where their neighbours allow the id (`_plausible`)."""
_ALNUM_RUN = re.compile(rb"[0-9A-Za-z]+")
_ALNUM = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_INTRODUCERS = frozenset(b"\\%&#=")
"""Bytes that start an escape whose own letters and digits follow them (`\\u002d`, `%2D`, `=2D`, `&#45`,
`&#x2d`, `&amp`, JSON's `\\n`): the letters and digits after one may decode to something else."""


def _id_spellings(kind: str, text: str) -> tuple[str, ...]:
    """An id needle's canonical forms, as the rule compares them (docs/matching.md 6.1) and as the
    matcher's variants spell them (tokens joined); empty for any other needle, or an id with a form
    outside ASCII (its tokens are not narrowed)."""
    if not kind.startswith("identifier") or ident_kind(kind, text) != "id":
        return ()
    pattern = compile_id(text)
    forms = [pattern.canon] if pattern is not None else []
    forms += ["".join(_TOKEN.findall(v)) for v in _name_variants(text)]
    if not forms or not all(f.isascii() for f in forms):
        return ()
    return tuple(dict.fromkeys(forms))


def _plausible(data: bytes, start: int, end: int, spellings: tuple[str, ...]) -> bool:
    """Whether an id's token at `data[start:end]` can be part of the id. ASCII letters and digits are
    word characters that are their own canonical form (docs/matching.md 2.1, 2.6), so the run of them
    around the token lies whole in one word, and a word of the id spells a piece of its canonical form
    (6.1: all of it; 6.1b: one of the pieces it is joined from). Where an escape's introducer stands
    before the run, the run's letters before the token may be the escape's own (`%2Dsubj`): only the
    token and what follows it are compared then (no escape starts with a letter or digit)."""
    a = start
    while a > 0 and data[a - 1] in _ALNUM:
        a -= 1
    b = end
    while b < len(data) and data[b] in _ALNUM:
        b += 1
    if a > 0 and a < start and data[a - 1] in _INTRODUCERS:
        a = start
    if a == start and b == end:
        return True
    run = data[a:b].decode("ascii").lower()
    return any(run in s for s in spellings)


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


_FORM_RUN = re.compile(r"\S*%[0-9A-Fa-f]{2}\S*")


def _percent_plus(text: str) -> str:
    # `+` is a space only inside a whitespace-free run that is percent-encoded (a URL query, a form body):
    # elsewhere it is a plus, even in the same text (`+1 (207) 946-0007` read with its `+` as a space would
    # be a national number of the subject's country).
    if not _PERCENT.search(text):
        return text
    return unquote(_FORM_RUN.sub(lambda run: run.group(0).replace("+", " "), text), errors="replace")


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
