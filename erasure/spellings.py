"""Where a subject is named in a text, as the erasing side finds it: docs/matching.md, through
`erasure.matching` (the erasing side's implementation of the rule; the probes have their own).

A text is read as it is and with its escapes decoded, as software writes them: percent-encoding
(`%40`), JSON/Python escapes (`\\u0040`, `\\n`), HTML character references (`&#64;`, `&commat;`) and
quoted-printable (`=40`, soft line breaks) (docs/matching.md 1.3.3). A hit there maps back to the whole
escaped span, so a redaction replaces it. In the text as it is, a name's hit redacts only its words
(`Hit.parts`): the tags, separators and JSON keys between them stay.

Base64 runs of 16 characters or more (standard and url-safe, any alignment) are decoded too, and the
decoded text read as above; a hit there is a hit on the whole run that cannot be redacted in place
(`Hit.inline` is False): it is reported.

`canonical` is the plain comparison form of identifiers (NFKC, case folding, format characters
removed, dashes as `-`, white space runs as one space), used where identifiers are compared as values
(an id that reads as a word), not for finding them in text.
"""

from __future__ import annotations

import base64
import binascii
import html
import html.entities
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from erasure.matching import Finder, Who
from erasure.matching.words import structure_view, words

DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u058a\u05be\u1806\u2053\u2e3a\u2e3b\ufe58\ufe63\uff0d"
"""Characters read as a hyphen."""
_DASH_MAP = dict.fromkeys(map(ord, DASHES), "-")
_LEGACY_REFS = "|".join(sorted((k for k in html.entities.html5 if not k.endswith(";")), key=len, reverse=True))
ESCAPE_PATTERN = (
    r"%[0-9A-Fa-f]{2}|=\r?\n|=[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|\\[nrtbf/\"'\\]"
    r"|&#[0-9]{1,7};?|&#[xX][0-9A-Fa-f]{1,6};?|&[A-Za-z][A-Za-z0-9]{1,31};|&(?:" + _LEGACY_REFS + ")"
)
_ESCAPE = re.compile(ESCAPE_PATTERN)
"""One escape as software writes text (see the module docstring)."""
_SPACES = re.compile(r"\s+")
BASE64_RUN = r"[A-Za-z0-9+/_-]{16}"
"""The shortest run of base64 characters that is decoded (12 bytes)."""
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}")
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "/": "/", '"': '"', "'": "'", "\\": "\\"}
MAX_ESCAPE_DEPTH = 2
"""Escapes are decoded this many times over (a pasted tool result's `\\u0040` inside a JSON string)."""


def _fold_char(cluster: str) -> str:
    out = unicodedata.normalize("NFKC", cluster).casefold().translate(_DASH_MAP)
    out = out.replace("i\u0307", "i").replace("\u0131", "i")
    return "".join(" " if c.isspace() else c for c in out if unicodedata.category(c) != "Cf")


def canonical(text: str) -> str:
    """The canonical form of `text` for comparison (module docstring)."""
    return View.of(text).text


@dataclass(frozen=True)
class View:
    """A canonical text and, per character of it, the span of the source text it came from."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    @classmethod
    def of(cls, text: str, spans: list[tuple[int, int]] | None = None) -> View:
        """`text` canonicalised; `spans` (one per character of `text`, default its own positions) say
        where each character of `text` came from."""
        out: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        if spans is None and text.isascii():
            low = text.lower()
            at = 0
            for m in _SPACES.finditer(low):
                out += [low[at : m.start()], " "]
                starts += [*range(at, m.start()), m.start()]
                ends += [*range(at + 1, m.start() + 1), m.end()]
                at = m.end()
            out.append(low[at:])
            starts += range(at, len(low))
            ends += range(at + 1, len(low) + 1)
            return cls("".join(out), tuple(starts), tuple(ends))
        i, n = 0, len(text)
        while i < n:
            j = i + 1
            while j < n and unicodedata.combining(text[j]):
                j += 1
            lo, hi = (i, j) if spans is None else (spans[i][0], spans[j - 1][1])
            for c in _fold_char(text[i:j]):
                if c == " " and out and out[-1] == " ":
                    ends[-1] = hi
                    continue
                out.append(c)
                starts.append(lo)
                ends.append(hi)
            i = j
        return cls("".join(out), tuple(starts), tuple(ends))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The source span of the canonical characters [start, end)."""
        return self.starts[start], max(self.ends[start:end])


def _utf8_run(data: list[tuple[int, int, int]], out: list[str], spans: list[tuple[int, int]], text: str) -> None:
    """Decode (byte, start, end) escapes as UTF-8, character by character; a byte that starts no
    character keeps its escape as written."""
    k = 0
    while k < len(data):
        lead = data[k][0]
        size = 1 if lead < 0x80 else 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4 if lead >> 3 == 30 else 0
        chunk = data[k : k + size] if size else []
        try:
            ch = bytes(b for b, _, _ in chunk).decode("utf-8") if len(chunk) == size and size else ""
        except UnicodeDecodeError:
            ch = ""
        if ch:
            out.append(ch)
            spans.append((chunk[0][1], chunk[-1][2]))
            k += size
        else:
            _, s, e = data[k]
            out.extend(text[s:e])
            spans.extend((p, p + 1) for p in range(s, e))
            k += 1


ESCAPE_KINDS = ("%", "=", "\\", "&")
"""The kinds of escape, by their first character: percent-encoding, quoted-printable, JSON/Python
backslash escapes, HTML character references."""


def decode_escapes(text: str, kinds: str = "".join(ESCAPE_KINDS)) -> tuple[str, list[tuple[int, int]]] | None:
    """`text` with its escapes of `kinds` (first characters, see ESCAPE_KINDS) decoded, and per decoded
    character its source span; None if it has none."""
    found = [m for m in _ESCAPE.finditer(text) if m.group(0)[0] in kinds]
    if not found:
        return None
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    pending: list[tuple[int, int, int]] = []
    units: list[tuple[str, int, int]] = []

    def flush() -> None:
        if pending:
            _utf8_run(pending, out, spans, text)
            pending.clear()
        if units:
            joined = "".join(u for u, _, _ in units)
            try:
                decoded = joined.encode("utf-16", "surrogatepass").decode("utf-16")
            except UnicodeDecodeError:
                decoded = ""
            if len(decoded) == len(units):
                out.extend(decoded)
                spans.extend((s, e) for _, s, e in units)
            else:  # surrogate pairs: whole run as one span
                out.extend(decoded or joined)
                spans.extend([(units[0][1], units[-1][2])] * len(decoded or joined))
            units.clear()

    for m in found:
        if m.start() != at:
            flush()
            out.extend(text[at : m.start()])
            spans.extend((p, p + 1) for p in range(at, m.start()))
        esc = m.group(0)
        if esc[0] in "%=" and len(esc) == 3 and esc[1] not in "\r\n":
            if units:
                flush()
            pending.append((int(esc[1:], 16), m.start(), m.end()))
        elif esc.startswith("\\x"):
            if units:
                flush()
            pending.append((int(esc[2:], 16), m.start(), m.end()))
        elif esc.startswith("\\u"):
            if pending:
                flush()
            units.append((chr(int(esc[2:], 16)), m.start(), m.end()))
        else:
            flush()
            if esc[0] == "=":
                pass  # a quoted-printable soft line break: nothing
            elif esc[0] == "\\":
                out.append(_SIMPLE[esc[1]])
                spans.append((m.start(), m.end()))
            else:
                ch = html.unescape(esc)
                if ch == esc:
                    out.extend(esc)
                    spans.extend((p, p + 1) for p in range(m.start(), m.end()))
                else:
                    out.extend(ch)
                    spans.extend([(m.start(), m.end())] * len(ch))
        at = m.end()
    flush()
    out.extend(text[at:])
    spans.extend((p, p + 1) for p in range(at, len(text)))
    return "".join(out), spans


def escape_views(text: str) -> list[tuple[str, list[tuple[int, int]] | None]]:
    """`text` as it is (no span map), and with its escapes decoded (when it has any, up to
    `MAX_ESCAPE_DEPTH` times: a JSON escape inside a JSON string), each with its source span per character;
    and each JSON string literal with escapes in it decoded on its own (a tool result pasted as a string
    into a JSON document: decoding the whole document would run its quotes into the outer ones)."""
    out: list[tuple[str, list[tuple[int, int]] | None]] = [(text, None)]
    sources = [text]
    seen = {text}
    for source in sources:
        # every kind of escape decoded at once, and each kind alone (docs/matching.md 1.3.4: `tel=020...`
        # is no quoted-printable `=02` in a URL whose percent escapes are read)
        for kinds in ("".join(ESCAPE_KINDS), *ESCAPE_KINDS):
            decoded = decode_escapes(source, kinds)
            for _ in range(MAX_ESCAPE_DEPTH):
                if decoded is None or decoded[0] in seen:
                    break
                seen.add(decoded[0])
                out.append(decoded)
                inner = decode_escapes(decoded[0], kinds)
                decoded = (
                    None
                    if inner is None
                    else (inner[0], [(decoded[1][a][0], decoded[1][b - 1][1]) for a, b in inner[1]])
                )
    if "\\" in text and '"' in text:
        for m in list(_JSON_LITERAL.finditer(text))[:MAX_LITERALS]:
            interior = m.group(0)[1:-1]
            if "\\" not in interior or len(interior) < 8:
                continue
            base = m.start() + 1
            for view, spans in escape_views(interior)[1:] if "\\" in interior else []:
                out.append((view, [(base + a, base + b) for a, b in (spans or [])]))
    return out


_JSON_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
MAX_LITERALS = 64
"""JSON string literals of one text decoded on their own (`escape_views`)."""


def base64_views(text: str) -> Iterable[tuple[int, int, bytes]]:
    """(start, end, bytes) of each run of base64 characters in `text` (standard or url-safe alphabet),
    decoded from each of its four alignments."""
    for m in _B64_RUN.finditer(text):
        run = m.group(0)
        alt = b"-_" if ("-" in run or "_" in run) else b"+/"
        for off in range(4):
            body = run[off:]
            body = body[: len(body) - 1] if len(body) % 4 == 1 else body
            if len(body) < 16:
                continue
            try:
                data = base64.b64decode((body + "=" * (-len(body) % 4)).encode("ascii"), altchars=alt, validate=True)
            except (binascii.Error, ValueError):
                continue
            yield m.start(), m.end(), data


@dataclass(frozen=True)
class Hit:
    """One identifier found in a text (docs/matching.md 7.1): its kind (id, email, name, phone), its span
    in the text as written, whether it can be redacted in place there, whether it is ambiguous (3.6,
    6.2: reported, never redacted), and the spans a redaction replaces (`parts`; empty: the whole span)."""

    kind: str
    start: int
    end: int
    inline: bool = True
    ambiguous: bool = False
    parts: tuple[tuple[int, int], ...] = ()

    def spans(self) -> tuple[tuple[int, int], ...]:
        """What a redaction of this hit replaces."""
        return self.parts or ((self.start, self.end),)


def country_split(e164: str, codes: Iterable[str]) -> tuple[str, str] | None:
    """(country code, national significant number) of E.164 digits, when the code is known."""
    known = set(codes)
    for n in (3, 2, 1):
        if e164[:n] in known and len(e164) - n >= 6:
            return e164[:n], e164[n:]
    return None


@dataclass(frozen=True)
class Spellings:
    """One subject's normalised identifiers (`erasure.identity.Identity`), matched by docs/matching.md."""

    ids: tuple[str, ...]
    emails: tuple[str, ...]
    names: tuple[str, ...]
    phones: tuple[str, ...]
    """E.164 digits without the `+`."""
    country_codes: tuple[str, ...]

    @cached_property
    def finder(self) -> Finder:
        """The rule's matcher for these identifiers."""
        return Finder(
            Who(ids=self.ids, emails=self.emails, names=self.names, phones=tuple("+" + p for p in self.phones))
        )

    def _found(self, text: str) -> list[Hit]:
        found: list[Hit] = []
        for view, spans in escape_views(text):
            hits = self.finder.hits(view)
            if not hits:
                continue
            structure = structure_view(view) if any(h.kind == "name" for h in hits) else view
            for h in hits:
                # a name's words (never the tags or keys between them), mapped back to their escaped spans
                parts = _word_spans(structure, h.start, h.end) if h.kind == "name" else ()
                if spans is None:
                    found.append(Hit(h.kind, h.start, h.end, True, h.ambiguous, parts))
                else:
                    back = tuple((spans[a][0], spans[b - 1][1]) for a, b in parts)
                    found.append(Hit(h.kind, spans[h.start][0], spans[h.end - 1][1], True, h.ambiguous, back))
        return found

    def hits(self, text: str) -> list[Hit]:
        """Every hit in `text`, spans merged where they overlap, in text order; a hit inside a base64 run
        is a hit on the whole run that cannot be redacted in place."""
        if self.finder.empty:
            return []
        found = self._found(text)
        for s, e, data in base64_views(text):
            inner = self._found(data.decode("utf-8", "replace"))
            for kind, ambiguous in sorted({(h.kind, h.ambiguous) for h in inner}):
                found.append(Hit(kind, s, e, inline=False, ambiguous=ambiguous))
        return _merged(found)

    def names_in(self, text: str) -> bool:
        """Whether any identifier is in `text` (ambiguous hits included)."""
        return bool(self.hits(text))

    def redact(self, text: str, placeholder: str, keep: Iterable[Hit] = ()) -> tuple[str, int]:
        """`text` with every inline, unambiguous hit (but those in `keep`) replaced by `placeholder`
        (a name word by word); and how many hits."""
        kept = set(keep)
        spans: list[tuple[int, int]] = []
        n = 0
        for h in self.hits(text):
            if not h.inline or h.ambiguous or h in kept:
                continue
            spans += h.spans()
            n += 1
        return (replace_spans(text, spans, placeholder), n) if n else (text, 0)


def _word_spans(structure: str, start: int, end: int) -> tuple[tuple[int, int], ...]:
    """The words of a name's hit, as the structure view reads them (its tags and JSON keys are not words)."""
    return tuple((start + w.start, start + w.end) for w in words(structure[start:end]))


def replace_spans(text: str, spans: Iterable[tuple[int, int]], placeholder: str) -> str:
    """`text` with each of `spans` (overlapping ones merged into one) replaced by `placeholder`."""
    merged: list[list[int]] = []
    for s, e in sorted(spans):
        if merged and s < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    out: list[str] = []
    at = 0
    for s, e in merged:
        out += [text[at:s], placeholder]
        at = e
    return "".join(out) + text[at:]


def _merged(hits: list[Hit]) -> list[Hit]:
    """Overlapping hits of one kind merged into one; hits of different kinds stay apart (a name inside an
    email address is not the email: each is attributed on its own)."""
    out: list[Hit] = []
    for kind in sorted({h.kind for h in hits}):
        mine: list[Hit] = []
        for h in sorted((h for h in hits if h.kind == kind), key=lambda h: (h.start, -h.end)):
            if mine and h.start < mine[-1].end:
                last = mine[-1]
                parts = () if not (last.parts and h.parts) else tuple(sorted(set(last.spans()) | set(h.spans())))
                mine[-1] = Hit(
                    kind,
                    last.start,
                    max(last.end, h.end),
                    last.inline and h.inline,
                    last.ambiguous and h.ambiguous,
                    parts,
                )
            else:
                mine.append(h)
        out += mine
    return sorted(out, key=lambda h: (h.start, h.end, h.kind))
