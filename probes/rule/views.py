"""The structure view (docs/matching.md 1.3.2) and records (1.4).

The structure view blanks markup and JSON keys character for character, so every offset in it is an
offset of the text. Reading of 1.3.2 (not spelled out by the document): the three kinds of blanking are
applied in the order the document lists them: tags first, on the text; then JSON string literals are
recognised on the tag-blanked text (a `"` inside a tag, such as an attribute's quotes, never starts a
literal), and keys and brackets are blanked from that.
"""

from __future__ import annotations

import re
from bisect import bisect_left

RS = "\x1e"  # U+001E RECORD SEPARATOR (1.2)

# 1.3.2: a tag.
TAG_RE = re.compile(r"<[A-Za-z/!?][^<>]{0,2000}>")
# 1.3.2: a tag's name, `[A-Za-z][A-Za-z0-9]*` after `<` or `</`, case-insensitive.
_TAG_NAME_RE = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)")
BLOCK_TAGS = frozenset(
    (
        "p",
        "div",
        "tr",
        "li",
        "ul",
        "ol",
        "table",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "section",
        "article",
        "header",
        "footer",
        "blockquote",
        "pre",
        "dd",
        "dt",
        "hr",
        "body",
        "html",
        "head",
        "title",
    )
)
# 1.3.2: a string literal: `"`, then characters other than `"` and `\` or `\` and any character, then `"`.
_LITERAL_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# ... followed by optional white space (read as Python's white space, `str.isspace`) and `:`. The whole
# key (literal, white space, colon) becomes spaces.
_KEY_TAIL_RE = re.compile(r"\s*:")
_BRACKET_RE = re.compile(r"[{}\[\]]")
# 1.4: a blank line: a line break (CR LF, CR or LF), optional white space other than line breaks, a line
# break.
_BLANK_LINE_RE = re.compile(r"(?>\r\n|\r|\n)[^\S\r\n]*(?>\r\n|\r|\n)")
_RS_RE = re.compile(RS)
# (the lookahead lets the regex engine skip to the next candidate character)
_BOUNDARY_RE = re.compile(r"(?=[\x1e\r\n])(?:\x1e|(?>\r\n|\r|\n)[^\S\r\n]*(?>\r\n|\r|\n))")
_TAG_TRIGGER_RE = re.compile(r"<[A-Za-z/!?]")


def _tag_blanks(text: str) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    if _TAG_TRIGGER_RE.search(text) is None:
        return out
    for m in TAG_RE.finditer(text):
        n = _TAG_NAME_RE.match(m.group())
        name = n.group(1).lower() if n else ""
        size = m.end() - m.start()
        out.append((m.start(), m.end(), RS + " " * (size - 1) if name in BLOCK_TAGS else " " * size))
    return out


def _apply(text: str, blanks: list[tuple[int, int, str]]) -> str:
    if not blanks:
        return text
    parts: list[str] = []
    pos = 0
    for start, end, repl in blanks:
        parts.append(text[pos:start])
        parts.append(repl)
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


# 1.3.2: a key is a string literal right after `{` or `,` (white space between allowed), then optional
# white space and `:`. Read without pairing every quote of the text from its start, so JSON pasted into
# prose between quotes (`They said: "Tool result: {"tool": ...}"`) has its keys found all the same.
_KEY_RE = re.compile(r'(?<=[{,])\s*("[^"\\]*(?:\\.[^"\\]*)*"\s*:)', re.DOTALL)


def _json_blanks(text: str) -> list[tuple[int, int, str]]:
    if '"' not in text and _BRACKET_RE.search(text) is None:
        return []
    blanks: list[tuple[int, int, str]] = []
    for m in _KEY_RE.finditer(text):
        start, end = m.span(1)
        blanks.append((start, end, " " * (end - start)))
    # every brace is a record boundary, every square bracket a space (1.3.2)
    blanks += [(b.start(), b.start() + 1, RS if b.group() in "{}" else " ") for b in _BRACKET_RE.finditer(text)]
    blanks.sort()
    return blanks


def structure_view(text: str) -> str:
    """1.3.2: the text with tags, JSON keys and brackets outside string literals blanked (same length)."""
    t1 = _apply(text, _tag_blanks(text))
    return _apply(t1, _json_blanks(t1))


def record_bounds(view: str) -> list[int]:
    """1.4: the sorted start offsets of the record boundaries (each U+001E, each blank line) of a view.

    Boundaries are made only of separators, so two words are in one record exactly when
    `record_of(bounds, a.start) == record_of(bounds, b.start)`."""
    if "\n" not in view and "\r" not in view:
        return [m.start() for m in _RS_RE.finditer(view)]
    # A blank line's white space may hold a U+001E too: one boundary or two there, the records of the
    # words are told apart the same way.
    return [m.start() for m in _BOUNDARY_RE.finditer(view)]


def record_of(bounds: list[int], offset: int) -> int:
    """The index of the record holding `offset` (the number of boundaries before it)."""
    return bisect_left(bounds, offset)


# 1.3.3: the zero-width view writes these as spaces.
ZERO_WIDTH = "\u200b\u2060\ufeff"
_ZERO_WIDTH_RE = re.compile(f"[{ZERO_WIDTH}]")
_ZERO_WIDTH_SPACES = str.maketrans(dict.fromkeys(ZERO_WIDTH, " "))


def has_zero_width(text: str) -> bool:
    """Whether the text holds a character the zero-width view (1.3.3) rewrites."""
    return not text.isascii() and _ZERO_WIDTH_RE.search(text) is not None


def zero_width(view: str) -> str:
    """1.3.3: the view with each U+200B, U+2060 and U+FEFF written as a space (same length)."""
    return view.translate(_ZERO_WIDTH_SPACES)
