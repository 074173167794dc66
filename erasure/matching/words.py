"""Words and records, as docs/matching.md sections 1.3-1.4 and 2 define them (the erasing side's reading).

A text is cut into `Word`s, each with its span in the source and its canonical form. The structure
view (1.3.2) is the text with markup and JSON keys blanked character for character, so that its
offsets are the source's own.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from anyascii import anyascii

RS = "\x1e"
"""The record separator (1.2)."""

_CHAR_SCRIPTS = (
    (0x0E00, 0x0EFF),
    (0x1000, 0x109F),
    (0x1100, 0x11FF),
    (0x1780, 0x17FF),
    (0x3040, 0x312F),
    (0x3130, 0x318F),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA000, 0xA4CF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0x20000, 0x3FFFF),
)
"""2.2, adjacent ranges merged (Thai and Lao; Hiragana, Katakana and Bopomofo)."""
_APOSTROPHES = frozenset("'\u0060\u00b4\u02bc\u2018\u2019\uff07")
_EXTRA_DASHES = frozenset("\u2212\ufe63\uff0d")

WORD, CHAR, JOINER, IGNORED, OTHER = "W", "C", "J", "I", "S"


@lru_cache(maxsize=65536)
def kind(ch: str) -> str:
    """The class of one character for 2.1-2.4: `WORD`, `CHAR` (a character-script one), `JOINER`,
    `IGNORED` or `OTHER`. A mark is `WORD` here; after a `CHAR` it joins that character's word."""
    cp = ord(ch)
    for lo, hi in _CHAR_SCRIPTS:
        if lo <= cp <= hi:
            return CHAR
    cat = unicodedata.category(ch)
    if cat[0] in "LM" or cat in ("Nd", "Pc"):
        return WORD
    if ch in _APOSTROPHES or ch in _EXTRA_DASHES or cat == "Pd":
        return JOINER
    if cat == "Cf":
        return IGNORED
    return OTHER


@dataclass(frozen=True)
class Word:
    """One word (2.5): its span in the source text and its canonical form (2.6)."""

    start: int
    end: int
    canon: str
    char_script: bool
    bare: str = ""
    """2.6: a word that ends in an apostrophe and `s` (a possessive) is also read without them."""

    def forms(self) -> tuple[str, ...]:
        """The canonical forms this word matches as."""
        return (self.canon, self.bare) if self.bare else (self.canon,)


def canonical_word(source: str, char_script: bool) -> str:
    """2.6: the canonical form of a word's source characters."""
    if char_script:
        return unicodedata.normalize("NFKC", source).casefold()
    kept = "".join(c for c in source if kind(c) == WORD and unicodedata.category(c) != "Pc")
    folded = anyascii(unicodedata.normalize("NFKC", kept)).casefold()
    return "".join(c for c in folded if c.isascii() and c.isalnum())


_ASCII_WORD = re.compile(r"[A-Za-z0-9_]+(?:['`\-][A-Za-z0-9_]+)*")


def words(text: str) -> list[Word]:
    """Every word of `text` in order (2.5)."""
    if text.isascii():
        out = []
        for m in _ASCII_WORD.finditer(text):
            canon = m.group(0).replace("_", "").replace("'", "").replace("`", "").replace("-", "").lower()
            bare = _possessive(text, m.start(), m.end())
            out.append(Word(m.start(), m.end(), canon, False, bare))
        return out
    return _words(text)


def _words(text: str) -> list[Word]:
    out: list[Word] = []
    start = -1  # start of the open word, -1 when none
    last = -1  # its last word character
    joiner = False  # a joiner seen after the open word's last word character
    char_word = False  # the open word is a character-script word

    def close() -> None:
        nonlocal start, joiner, char_word
        if start >= 0:
            bare = "" if char_word else _possessive(text, start, last + 1)
            out.append(Word(start, last + 1, canonical_word(text[start : last + 1], char_word), char_word, bare))
        start, joiner, char_word = -1, False, False

    for i, ch in enumerate(text):
        k = kind(ch)
        if k == IGNORED:
            continue
        if k == CHAR:
            if char_word and unicodedata.category(ch)[0] == "M":
                last = i  # a mark in the range joins the character before it (2.2)
                continue
            close()
            start, last, char_word = i, i, True
        elif k == WORD:
            if char_word:
                if unicodedata.category(ch)[0] == "M":
                    last = i
                    continue
                close()
            if start < 0:
                start = i
            elif joiner:
                joiner = False
            last = i
        elif k == JOINER and start >= 0 and not char_word and not joiner and last == _prev_significant(text, i):
            joiner = True
        else:
            close()
    close()
    return out


def _possessive(text: str, start: int, end: int) -> str:
    """The canonical form of a word without its final apostrophe and `s`, or "" (2.6)."""
    if end - start >= 3 and text[end - 1] in "sS" and text[end - 2] in _APOSTROPHES:
        return canonical_word(text[start : end - 2], False)
    return ""


def _prev_significant(text: str, i: int) -> int:
    """Index of the character before `i` that is not ignored (2.4), -1 at the start."""
    j = i - 1
    while j >= 0 and kind(text[j]) == IGNORED:
        j -= 1
    return j


_TAG = re.compile(r"<[A-Za-z/!?][^<>]{0,2000}>")
_TAG_NAME = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)")
BLOCK_TAGS = frozenset(
    {
        *("p", "div", "tr", "li", "ul", "ol", "table", "h1", "h2", "h3", "h4", "h5", "h6", "section"),
        *("article", "header", "footer", "blockquote", "pre", "dd", "dt", "hr", "body", "html", "head", "title"),
    }
)
_KEY = re.compile(r'[{,]\s*("(?:[^"\\]|\\.)*"\s*:)', re.S)


def structure_view(text: str) -> str:
    """1.3.2: markup and JSON keys blanked, braces as record separators, brackets as spaces; same length."""
    if "<" not in text and '"' not in text and not any(c in text for c in "{}[]"):
        return text
    chars = list(text)
    for m in _TAG.finditer(text):
        name = _TAG_NAME.match(m.group(0))
        block = bool(name) and name.group(1).lower() in BLOCK_TAGS  # type: ignore[union-attr]
        chars[m.start() : m.end()] = [RS if block else " "] + [" "] * (m.end() - m.start() - 1)
    tagless = "".join(chars)  # keys and braces are read on the text with its tags blanked
    for m in _KEY.finditer(tagless):  # a key: right after `{` or `,`, whatever quotes came before it
        chars[m.start(1) : m.end(1)] = [" "] * (m.end(1) - m.start(1))
    for i, c in enumerate(tagless):
        if c in "{}":
            chars[i] = RS
        elif c in "[]":
            chars[i] = " "
    return "".join(chars)


_ZERO_WIDTH = str.maketrans(dict.fromkeys(map(ord, "\u200b\u2060\ufeff"), " "))


def views(text: str) -> list[str]:
    """1.3.1-1.3.3: the raw, structure and zero-width views of `text` (distinct ones only)."""
    out = [text]
    structure = structure_view(text)
    if structure != text:
        out.append(structure)
    if any(c in text for c in "\u200b\u2060\ufeff"):
        out += [v.translate(_ZERO_WIDTH) for v in list(out)]
    return out


_BLANK_LINE = re.compile(r"\n\s*\n")


def same_record(view: str, a: int, b: int) -> bool:
    """Whether offsets a <= b of `view` lie in one record (1.4): no separator or blank line between."""
    gap = view[a:b]
    return RS not in gap and not (gap.count("\n") >= 2 and _BLANK_LINE.search(gap))


def capitalised(source: str) -> bool:
    """2.7, for a word's source characters."""
    for c in source:
        if kind(c) in (WORD, CHAR) and unicodedata.category(c)[0] != "M":
            cat = unicodedata.category(c)
            return cat in ("Lu", "Lt") or c.lower() == c.upper()
    return False


def one_letter(source: str) -> bool:
    """3.3: exactly one character of category L* in the word."""
    return sum(1 for c in source if unicodedata.category(c)[0] == "L") == 1
