"""Words and their canonical form: docs/matching.md section 2.

A text is cut into words by one compiled regular expression built from the Unicode tables of
`probes.rule._ucd`; each word keeps its source span (2.5) and gets its canonical form (2.6) on demand.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache, lru_cache

from anyascii import anyascii

from probes.rule import _ucd

# 2.2: code point ranges written without spaces; each character (with the marks after it) is a word.
# Read literally: *every* character in these ranges is a word, whatever its category (so the katakana
# middle dot U+30FB, Thai and Khmer punctuation and unassigned code points above U+20000 are words too),
# not only the word characters of 2.1 among them.
CHAR_SCRIPT_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK
    (0xA000, 0xA4CF),  # Yi
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3FFFF),
)

# 2.3: the apostrophes, and besides every Pd: MINUS SIGN, SMALL HYPHEN-MINUS, FULLWIDTH HYPHEN-MINUS.
JOINER_CHARS = "\u0027\u0060\u00b4\u02bc\u2018\u2019\uff07\u2212\ufe63\uff0d"


def _subtract(ranges: tuple[tuple[int, int], ...], cut: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        pieces = [(a, b)]
        for ca, cb in cut:
            nxt: list[tuple[int, int]] = []
            for pa, pb in pieces:
                if cb < pa or ca > pb:
                    nxt.append((pa, pb))
                    continue
                if pa < ca:
                    nxt.append((pa, ca - 1))
                if cb < pb:
                    nxt.append((cb + 1, pb))
            pieces = nxt
        out.extend(pieces)
    return out


def _cls(ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


def _points(chars: str) -> list[tuple[int, int]]:
    return [(ord(c), ord(c)) for c in chars]


# Regular-expression character classes (contents, without the brackets).
CHAR_SCRIPT = _cls(CHAR_SCRIPT_RANGES)
WORD_OUTSIDE = _cls(_subtract(_ucd.WORD, CHAR_SCRIPT_RANGES))  # 2.1 word characters, outside 2.2
WORD_ANY = _cls(_ucd.WORD)  # 2.1 word characters, every script
MARK = _cls(_ucd.MARK)
IGNORED = _cls(_ucd.IGNORED)  # 2.4: Cf
# 2.3 joiners. A joiner only joins two word characters "neither of them in a character-script"; a Pd
# inside a character-script range (U+30A0) is itself a character-script word (2.2), so it is left out.
JOINER = _cls(_subtract(tuple(sorted(set(_ucd.DASH) | set(_points(JOINER_CHARS)))), CHAR_SCRIPT_RANGES))


def _alt(ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> str:
    """A regex for one character of `ranges`. Python's `re` checks ranges above U+FFFF one by one, so
    those are tried only for a character above U+FFFF (a lookahead), which makes cutting words 2-3x faster.
    """
    bmp = [(a, min(b, 0xFFFF)) for a, b in ranges if a <= 0xFFFF]
    high = [(max(a, 0x10000), b) for a, b in ranges if b > 0xFFFF]
    if not high:
        return f"[{_cls(bmp)}]"
    return f"(?:[{_cls(bmp)}]|(?=[\\U00010000-\\U0010ffff])[{_cls(high)}])"


_W = _alt(_subtract(_ucd.WORD, CHAR_SCRIPT_RANGES))
_I = _alt(_ucd.IGNORED)
_M = _alt(_ucd.MARK)

# 2.5: one character-script character with the marks that follow it (ignored characters skipped), or a
# maximal run of word characters where a single joiner stands between two word characters (ignored
# characters skipped on either side; `Ann--Lee` is two words: neither `-` stands between two word
# characters). A match starts and ends on a word character, so its span is the word's span.
WORD_PATTERN = f"{_alt(CHAR_SCRIPT_RANGES)}(?:{_I}*{_M})*|{_W}(?:{_I}*(?:[{JOINER}]{_I}*)?{_W})*"
# The same for a text that is all ASCII: word characters are letters, digits and `_`; the joiners are
# `'`, the grave accent and `-`; no ignored character, mark or character-script character is ASCII.
ASCII_WORD_RE = re.compile(r"[A-Za-z0-9_]+(?:['`\-][A-Za-z0-9_]+)*")
CHAR_SCRIPT_RE = re.compile(f"[{CHAR_SCRIPT}]")
# 2.6: what a non-character-script word drops before NFKC: the joiners, Cf and connector punctuation.
# U+02BC (a joiner of 2.3) is also a letter (Lm): it is dropped wherever it stands in a word.
_DROP = tuple(sorted({*_subtract(_ucd.DASH, CHAR_SCRIPT_RANGES), *_points(JOINER_CHARS), *_ucd.IGNORED, *_ucd.PC}))


def _runs(ranges: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    """A regex for runs of characters of `ranges`, led by a lookahead of one plain class (the BMP part
    and every character above U+FFFF), which lets the engine skip quickly to where a run may start."""
    bmp = [(a, min(b, 0xFFFF)) for a, b in ranges if a <= 0xFFFF]
    return re.compile(f"(?=[{_cls(bmp)}\\U00010000-\\U0010ffff]){_alt(ranges)}+")


_DROP_RE = _runs(_DROP)
_IGNORED_RE = _runs(_ucd.IGNORED)
_NON_ASCII_RE = re.compile(r"[^\x00-\x7f]+")
_NOT_ALNUM_RE = re.compile(r"[^a-z0-9]+")
_ASCII_DROP_RE = re.compile(r"['`\-_]+")
_ASCII_DROP = b"'`-_"
"""`_ASCII_DROP_RE`'s characters, deleted from ASCII text as bytes."""
_NOT_ALNUM = bytes(b for b in range(256) if not (ord("a") <= b <= ord("z") or ord("0") <= b <= ord("9")))
"""`_NOT_ALNUM_RE`'s characters in ASCII, deleted as bytes."""


def in_char_script(c: str) -> bool:
    """True when the character lies in one of the character-script ranges of 2.2."""
    o = ord(c)
    return any(a <= o <= b for a, b in CHAR_SCRIPT_RANGES)


def is_word_char(c: str) -> bool:
    """2.1: letter, mark, decimal digit or connector punctuation (any script)."""
    cat = unicodedata.category(c)
    return cat[0] in "LM" or cat in ("Nd", "Pc")


@cache
def word_regex() -> re.Pattern[str]:
    """The word regex of 2.5 for any text (compiled on first use: its classes are large)."""
    return re.compile(WORD_PATTERN)


@lru_cache(maxsize=1 << 16)
def canonical(word: str) -> str:
    """2.6: the canonical form of one word's source text (as cut by `word_re`)."""
    if word and in_char_script(word[0]):
        # A character-script word: NFKC, then case folding (the ignored characters of 2.4 are not
        # part of any word, so they are dropped first).
        return unicodedata.normalize("NFKC", _IGNORED_RE.sub("", word)).casefold()
    # "...; case fold; keep only ASCII letters and digits" (an empty result matches nothing: callers
    # never look up or compare with the empty string)
    return _NOT_ALNUM_RE.sub("", anyascii(unicodedata.normalize("NFKC", _DROP_RE.sub("", word))).casefold())


# 2.6: a word that ends in an apostrophe of 2.3 followed by `s` or `S`, with at least one character
# before the apostrophe (ignored characters not counted).
APOSTROPHES = "\u0027\u0060\u00b4\u02bc\u2018\u2019\uff07"
_POSSESSIVE_RE = re.compile(f"(.+)[{APOSTROPHES}][sS]", re.DOTALL)


@lru_cache(maxsize=1 << 16)
def possessive(word: str) -> str | None:
    """2.6: a possessive word's second canonical form (that of the word without the apostrophe and the
    `s`: `Lee's` is `lees` and `lee`), or None. Sections 3 and 6 compare with both forms, 4 with the
    first only. Read on the word without its ignored characters."""
    m = _POSSESSIVE_RE.fullmatch(_IGNORED_RE.sub("", word))
    if m is None:
        return None
    return canonical(m.group(1)) or None


def ascii_canonical(text: str) -> str:
    """2.6 for ASCII: `'`, the grave accent, `-` and `_` dropped, lower-cased (a non-ASCII text is changed
    only in its ASCII characters)."""
    return _ASCII_DROP_RE.sub("", text).lower()


def canonical_words(text: str) -> list[str]:
    """The canonical forms of the words of `text`, in order (used for a request's names and ids)."""
    return [canonical(m.group()) for m in word_re(text).finditer(text)]


def skeleton(text: str) -> str:
    """A cheap superset view for prefiltering: every word's canonical form (outside the character-scripts)
    is a substring of it. Joiners, Cf and connector punctuation are dropped everywhere, then NFKC, then
    each non-ASCII run is transliterated (anyascii works character by character) and the whole is
    lower-cased (the result is ASCII, where case folding is lower-casing)."""
    if text.isascii():  # ASCII text as bytes: C deletes (a regex substitution cost 10 us a window)
        return text.encode("ascii").translate(None, _ASCII_DROP).decode("ascii").lower()
    t = unicodedata.normalize("NFKC", _DROP_RE.sub("", text))
    # Since 2.6 keeps only ASCII letters and digits, everything else is dropped here too (words run
    # together: a weaker filter, still a superset). U+FFFD (`?` in ASCII) is dropped before the
    # transliteration: bytes read as UTF-8 put one in every few characters, each a call of its own.
    t = t.replace("\ufffd", "")
    return squeeze(_NON_ASCII_RE.sub(lambda m: anyascii(m.group()), t).lower())


def squeeze(skeleton_text: str) -> str:
    """The skeleton with its separators removed too: words run together (6.1b spells an id across words)."""
    if skeleton_text.isascii():  # always, from `skeleton` (anyascii writes ASCII): deleted as bytes
        return skeleton_text.encode("ascii").translate(None, _NOT_ALNUM).decode("ascii")
    return _NOT_ALNUM_RE.sub("", skeleton_text)


def is_capitalised(word: str) -> bool:
    """2.7: the first word character is Lu or Lt, or has no case."""
    c = word[0]
    return unicodedata.category(c) in ("Lu", "Lt") or c.lower() == c.upper()


def is_initial(word: str) -> bool:
    """3.3 "a word of one letter (an initial: exactly one character of category L* in its span)"."""
    return sum(1 for c in word if unicodedata.category(c)[0] == "L") == 1


@dataclass(frozen=True, slots=True)
class Word:
    """One word of a text: its span in the source (2.5) and its source characters."""

    start: int
    end: int
    text: str

    @property
    def canon(self) -> str:
        """The canonical form (2.6)."""
        return canonical(self.text)


def words(text: str) -> list[Word]:
    """Every word of `text` (2.5), in order."""
    return [Word(s, e, text[s:e]) for s, e in word_spans(text)]


_WS_RE = re.compile(r"[ \t\n\r\f\v]")


def word_spans(text: str) -> list[tuple[int, int]]:
    """The spans of the words of `text` (2.5), in order.

    Fast path: no word holds ASCII white space, so the text is cut at it into stretches; the stretches
    that hold a non-ASCII character are read with the full regex, the rest with the ASCII one (which
    gives the same words on ASCII text). Mostly-ASCII text with a few typographic quotes thus costs
    about what ASCII text costs."""
    if text.isascii():
        return [m.span() for m in ASCII_WORD_RE.finditer(text)]
    general = word_regex()
    out: list[tuple[int, int]] = []
    pos = 0  # everything before `pos` is cut
    for m in _NON_ASCII_RE.finditer(text):
        if m.start() < pos:
            continue  # inside the stretch just read
        a = max(text.rfind(c, pos, m.start()) for c in " \t\n\r\f\v") + 1
        a = max(a, pos)
        w = _WS_RE.search(text, m.end())
        b = len(text) if w is None else w.start()
        out.extend(x.span() for x in ASCII_WORD_RE.finditer(text, pos, a))
        out.extend(x.span() for x in general.finditer(text, a, b))
        pos = b
    out.extend(x.span() for x in ASCII_WORD_RE.finditer(text, pos))
    return out


def word_re(text: str) -> re.Pattern[str]:
    """The word regex for `text`: the ASCII one when the text is all ASCII (same words, faster)."""
    return ASCII_WORD_RE if text.isascii() else word_regex()
