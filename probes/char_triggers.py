"""Raw-byte triggers of the decoded views (`probes.matcher`) for classes of characters the rule reads
where no fragment of an identifier's own spelling stands: format characters (Unicode category Cf), which
words and addresses skip (docs/matching.md 2.4), so an identifier written with one after each character
has no fragment left for its own triggers to find; and decimal digits of other scripts, which phones and
ids are read in (5.2), while their triggers are ASCII digits. A window around them is read instead.

And triggers for spellings of one identifier in which no fragment of its own spelling need stand: an
email's digests (4.4), an id cut anywhere (6.1b), a name's letters written with diacritics (3) or as
Greek or Cyrillic letters the rule transliterates to them; and one letter or digit written as an escape."""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import hyperscan
from anyascii import anyascii

from probes.bytescan import _escape
from probes.rule import _ucd


def ignorable_trigger() -> bytes:
    """A format character (docs/matching.md 2.4) in UTF-8: a window around it is read by the rule, which
    skips it, where it touches a letter or digit (`touches_letter`, checked on each find: its two or three
    bytes stand in any binary file, 4,013 times in a 100k-frame store's database, 175 of them beside a
    letter; in the expression, that context made the generic triggers' database scan five times slower).
    An identifier spelled with one after each character has one beside a letter. Text in UTF-16 or UTF-32
    is read as UTF-8 where it is a payload of its own (a file, a member, a decoded value); inside other
    bytes only the identifiers' own wide triggers find it."""
    points = [chr(cp) for lo, hi in _ucd.IGNORED for cp in range(lo, hi + 1)]
    return _encoded_class(points, "utf-8")


_ALNUM = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def touches_letter(data: bytes, end: int) -> bool:
    """Whether the format character ending at `end` in `data` (UTF-8) has a letter or digit directly before
    it (ASCII, or the last byte of a character beyond ASCII) or after it (ASCII, or a lead byte)."""
    start = end - 1
    while start > 0 and end - start < 4 and 0x80 <= data[start] < 0xC0:
        start -= 1
    before = data[start - 1] if start > 0 else 0
    after = data[end] if end < len(data) else 0
    return before in _ALNUM or 0x80 <= before < 0xC0 or after in _ALNUM or 0xC2 <= after <= 0xF4


def other_digits_trigger() -> bytes:
    """Two decimal digits (Unicode category Nd) of a script other than ASCII in a row, in UTF-8: a phone or
    an id written in Eastern Arabic, Persian, Devanagari... digits, which the rule reads as their values
    (docs/matching.md 5.2)."""
    digits = [chr(cp) for lo, hi in _ucd.DIGIT for cp in range(max(lo, 0x80), hi + 1)]
    one = b"(?:" + _encoded_class(digits, "utf-8") + b")"
    return one + one


_ALNUM_HEX = rb"(?:3[0-9]|[46][1-9a-fA-F]|[57][0-9aA])"
"""The code point of an ASCII letter or digit in two hex digits."""


def escaped_alnum_trigger() -> bytes:
    """One ASCII letter or digit written as a JSON or percent escape, or as quoted-printable beside a
    letter or digit: software escapes no letter or digit, so one written so breaks the identifier's own
    fragment around it, and its window is read through the text views (an HTML entity, and two escapes in
    a row, are the `escapes` trigger's already); a quoted-printable soft line break beside one, which cuts
    a word anywhere; a percent escape encoded twice. 548 finds in a 100k-frame store's database file (none
    of JSON)."""
    qp = rb"=(?:3[0-9]|[46][1-9A-F]|[57][0-9A])"
    soft = rb"=\r?\n"  # a quoted-printable soft line break, which a line may take anywhere, inside a word too
    twice = rb"%25[0-9A-Fa-f]{2}"  # a percent escape encoded again (a URL inside a URL): `%2520`
    beside = b"".join(b"|[A-Za-z0-9]" + e + b"|" + e + b"[A-Za-z0-9]" for e in (qp, soft))
    return rb"\\u00" + _ALNUM_HEX + rb"|%" + _ALNUM_HEX + b"|" + twice + beside


_COMPATIBILITY_BLOCKS = ((0x2100, 0x214F), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF), (0x1FBF0, 0x1FBF9))
"""Letterlike symbols, halfwidth and fullwidth forms, mathematical alphanumerics, segmented digits."""


def compatibility_trigger() -> bytes:
    """A letter or digit in a compatibility form (fullwidth `Ｑ`, mathematical `𝐐`, double-struck `ℚ`, which
    NFKC writes as one ASCII letter or digit, docs/matching.md 2.1) beside an ASCII letter or digit or
    another such form, in UTF-8: one of them in a word leaves no fragment of the identifier's own spelling
    for its triggers. Only letters and decimal digits (circled and superscript forms are symbols, which the
    rule does not read as letters)."""
    chars = [
        ch
        for lo, hi in _COMPATIBILITY_BLOCKS
        for ch in map(chr, range(lo, hi + 1))
        if unicodedata.category(ch) in ("Lu", "Ll", "Lt", "Lo", "Nd")
        and len(folded := unicodedata.normalize("NFKC", ch)) == 1
        and folded.isascii()
        and folded.isalnum()
    ]
    form = b"(?:" + _encoded_class(chars, "utf-8") + b")"
    return b"[0-9A-Za-z]" + form + b"|" + form + b"(?:[0-9A-Za-z]|" + form + b")"


def _encoded_class(chars: Sequence[str], codec: str) -> bytes:
    """An expression for any of `chars` encoded in `codec`, compact: the encodings that differ only in the
    byte that changes fastest from one code point to the next (the last in UTF-8 and big-endian, the
    first of the last code unit in little-endian) share one character class."""
    groups: dict[tuple[bytes, bytes], list[int]] = {}
    for ch in chars:
        e = ch.encode(codec)
        v = len(e) - (2 if codec == "utf-16-le" else 4 if codec == "utf-32-le" else 1)
        groups.setdefault((e[:v], e[v + 1 :]), []).append(e[v])
    return b"|".join(
        _escape(head) + b"[" + b"".join(b"\\x%02x" % x for x in sorted(set(xs))) + b"]" + _escape(tail)
        for (head, tail), xs in groups.items()
    )


def email_digests(address: str) -> list[str]:
    """The md5, sha1 and sha256 hexadecimal digests of the address (docs/matching.md 4.4: white space
    around it removed, lower-cased), each a literal trigger: a hashed address holds no fragment of it."""
    data = address.strip().lower().encode()
    return [hashlib.new(name, data).hexdigest() for name in ("md5", "sha1", "sha256")]


MIN_RECUT = 6
"""Shortest id (letters and digits, joined) looked for cut anywhere: a shorter one's letters would stand,
a separator apart, in too much of any store."""
_LETTER_AND_DIGIT = re.compile(r"(?=.*[a-z])(?=.*[0-9])")
_RECUT_SEP = rb"(?:[^0-9A-Za-z\r\n\x1e\x80-\xff]|[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2})?"
"""At most one character between two pieces of an id cut anywhere (6.1b: neither a word character nor a
line break nor U+001E; a character beyond ASCII is let through whatever it is)."""


def recut_triggers(tokens: Sequence[str]) -> list[bytes]:
    """An id's letters and digits (its case-folded tokens) cut anywhere, one separator between the pieces
    (docs/matching.md 6.1b: `cust 8841`, `us rj d4 471`, `u s r j d 4 4 7 1`): no token of the id need
    stand in the text. Ids of letters and digits only, at least `MIN_RECUT` of them."""
    joined = "".join(tokens)
    if not joined.isascii() or len(joined) < MIN_RECUT or not _LETTER_AND_DIGIT.match(joined):
        return []
    return [_RECUT_SEP.join(c.encode() for c in joined)]


MIN_FOLDED = 4
"""Shortest name token looked for with diacritics on its letters."""
_LATIN_ACCENTED = rb"\xc3[\x80-\xbf]|[\xc4-\xc8][\x80-\xbf]|\xc9[\x80-\x8f]|\xe1[\xb8-\xbb][\x80-\xbf]"
"""Any letter of Latin-1, Latin Extended-A and -B and Latin Extended Additional in UTF-8 (the letters with
diacritics), whichever letter it folds to: one class for every letter keeps the expressions small (the
rule, on the window, tells `Jóhann` from `Jéhann`)."""
_MARKS = rb"(?:\xcc[\x80-\xbf]|\xcd[\x80-\xaf])*"
"""Combining marks (U+0300-U+036F) after a letter: a diacritic written decomposed."""


_SCRIPTS = ((0x0370, 0x03FF), (0x0400, 0x052F))
"""Greek and Cyrillic (with its supplement): letters the rule transliterates into Latin ones one for one."""


@lru_cache(maxsize=1)
def _transliterated() -> dict[str, bytes]:
    """Per ASCII letter, an expression for the Greek and Cyrillic letters, either case, that the rule's
    transliteration (`anyascii`, as `probes.rule.words` reads a name) writes as that letter alone."""
    by: dict[str, list[str]] = {}
    for lo, hi in _SCRIPTS:
        for cp in range(lo, hi + 1):
            ch = chr(cp)
            if unicodedata.category(ch).startswith("L"):
                latin = anyascii(ch).lower()
                if len(latin) == 1 and latin.isascii() and latin.isalpha():
                    by.setdefault(latin, []).append(ch)
    return {letter: _encoded_class(chars, "utf-8") for letter, chars in by.items()}


def folded_triggers(tokens: Sequence[str]) -> list[bytes]:
    """A name's tokens (ASCII letters, at least `MIN_FOLDED`) with any of their letters written with a
    diacritic, precomposed or followed by combining marks (`Jóhann Quïst` is `Johann Quist` to the rule,
    docs/matching.md 2.6), or as a Greek or Cyrillic letter the rule transliterates to it (`Оrtiz` with a
    Cyrillic `О`, `Ортиз`, `Ορτιζ`): a diacritic on every third letter, or one letter of another script,
    leaves no fragment of the token's own spelling. A letter of another script that the rule writes as two
    Latin ones (`ж` for `zh`) is not looked for."""
    other = _transliterated()
    return [
        b"".join(
            b"(?:"
            + _escape(c.encode())
            + b"|"
            + _LATIN_ACCENTED
            + (b"|" + other[c] if c in other else b"")
            + b")"
            + _MARKS
            for c in token
        )
        for token in tokens
        if len(token) >= MIN_FOLDED and token.isascii() and token.isalpha()
    ]


class FoldedTriggers:
    """The folded triggers of a scan's names (`folded_triggers`) in a hyperscan database of their own,
    compiled once per set of them in a process (`of`): their character classes make a database slow to
    compile, and a window's scans (the store, each folder of the home) share one."""

    def __init__(self, triggers: tuple[tuple[int, bytes], ...]) -> None:
        self._ids = [trigger_id for trigger_id, _t in triggers]
        self._db: hyperscan.Database | None = None
        if triggers:
            self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            self._db.compile(
                expressions=[t for _i, t in triggers],
                ids=list(range(len(triggers))),
                flags=[hyperscan.HS_FLAG_CASELESS] * len(triggers),
            )
            self._scratch = hyperscan.Scratch(self._db)
        self._local = threading.local()
        self._lock = threading.Lock()

    @staticmethod
    @lru_cache(maxsize=8)
    def of(triggers: tuple[tuple[int, bytes], ...]) -> FoldedTriggers:
        """The database of `triggers` ((trigger id, expression) each), compiled at its first use."""
        return FoldedTriggers(triggers)

    def scan(self, data: bytes, out: list[tuple[int, int]]) -> None:
        """Append (trigger id, end offset) of every folded trigger in `data` to `out`."""
        if self._db is None:
            return
        if not hasattr(self._local, "scratch"):  # a scratch space is one thread's at a time
            with self._lock:
                self._local.scratch = self._scratch.clone()
        ids = self._ids
        self._db.scan(
            data,
            match_event_handler=lambda pid, _s, end, _f, _c: out.append((ids[pid], end)),
            scratch=self._local.scratch,
        )


def trigger_words(words: Sequence[str], shortest: int) -> list[str]:
    """The words of a name of two or more words that its triggers are made of: its last word alone, when
    it has at least `shortest` characters. Every hit of such a name holds its last word (docs/matching.md
    3.3: the given and the family name; 3.4: every word), so a window around it finds every hit, and the
    given name, which namesakes share (3,742 of the 4,088 windows of the 100k demo store for an absent
    person), opens none. A shorter last word (`Li`, `Ng`): every word, as for any other identifier."""
    return list(words[-1:]) if len(words) >= 2 and len(words[-1]) >= shortest else list(words)


def base64_start(shortest: int) -> bytes:
    """Where a base64-looking run of at least `shortest` characters starts: anchored on the byte before it,
    with a capital, digit or symbol among its first characters (a long lower-case word is not base64)."""
    return rb"(?:^|[^A-Za-z0-9+/_])[A-Za-z0-9+/_][a-z]{0,%d}[A-Z0-9+/_][A-Za-z0-9+/_]{%d}" % (
        shortest - 2,
        shortest - 2,
    )


def base64_trigger(shortest: int) -> bytes:
    """`base64_start`, only where the run it starts is not all hex (a run holds `-` or `=`-padding too,
    `probes.view_payloads._base64_run`): the same runs, less the hex digests, which are skipped once
    found. A run is not all hex when a `-` stands before its start, or a character that is no hex
    digit (or a `-`) stands in it: inside the start's match (the same end as `base64_start`), or after
    an all-hex start (the end at the first such character)."""
    c, n, h = b"[A-Za-z0-9+/_]", b"[G-Zg-z+/_]", b"[0-9a-fA-F]"
    lower, tail, at = shortest - 2, shortest - 2, b"(?:^|[^A-Za-z0-9+/_])"

    def rep(cls: bytes, lo: int, hi: int) -> bytes:  # hyperscan takes no repeat of zero
        return b"" if hi == 0 else cls + (b"{%d}" % lo if lo == hi else b"{%d,%d}" % (lo, hi))

    first_in_lower = b"|".join(rep(b"[a-f]", i, i) + b"[g-z]" + rep(b"[a-z]", 0, lower - 1 - i) for i in range(lower))
    first_in_tail = b"|".join(rep(h, i, i) + n + rep(c, tail - 1 - i, tail - 1 - i) for i in range(tail))
    start = c + b"[a-z]{0,%d}[A-Z0-9+/_]" % lower
    return b"|".join(
        [
            b"-" + start + c + b"{%d}" % tail,
            at + n + b"[a-z]{0,%d}[A-Z0-9+/_]" % lower + c + b"{%d}" % tail,
            at + c + b"(?:" + first_in_lower + b")[A-Z0-9+/_]" + c + b"{%d}" % tail,
            at + c + b"[a-z]{0,%d}[G-Z+/_]" % lower + c + b"{%d}" % tail,
            at + start + b"(?:" + first_in_tail + b")",
            at + h + b"[a-f]{0,%d}[A-F0-9]" % lower + h + b"{%d}" % tail + h + b"*[G-Zg-z+/_\\-]",
        ]
    )
