"""Every spelling of a subject's identifiers, as the erasing side finds them in text (its own code).

Text is compared in one canonical form (`canonical`): NFKC, case folding, format characters removed
(soft hyphen, zero-width characters, BOM), every dash a hyphen, every run of white space one space.
A text is read in two views, each canonicalised with a map back to the text's own characters:

- as it is;
- with its escapes decoded, as software writes them: percent-encoding (`%40`), JSON/Python escapes
  (`\\u0040`, `\\n`), HTML character references (`&#64;`, `&#x40;`, `&commat;`) and quoted-printable
  (`=40`, soft line breaks). A hit there maps back to the whole escaped span, so a redaction replaces it.

In those views the `Spellings` of an identity find (token-bounded):

- ids as they are (canonical);
- emails with any `+tag` on the mailbox (`jane.doe+news@mail.example`);
- phones as their digits with any separators between them, with `+CC`, `00CC`, a trunk `0` after the
  country code (`+44 (0)20 ...`) or the national trunk prefix alone (`020 ...`);
- names with their tokens in the request's order or with the last one first (`Quist, Annabel`),
  any separators between them, each token in its transliterations (`ß`/`ss` by case folding;
  `Müller`, `Muller`, `Mueller`).

Base64 runs of 16 characters or more (standard and url-safe, any alignment) are decoded too, and the
decoded text read as above; a spelling there is a hit on the whole run that cannot be redacted in
place (`Hit.inline` is False): it is reported.
"""

from __future__ import annotations

import base64
import binascii
import html
import itertools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u058a\u05be\u1806\u2053\u2e3a\u2e3b\ufe58\ufe63\uff0d"
"""Characters read as a hyphen."""
_DASH_MAP = dict.fromkeys(map(ord, DASHES), "-")
_TRANSLIT = {"ø": ("o", "oe"), "ł": ("l",), "đ": ("d",), "æ": ("ae",), "œ": ("oe",), "þ": ("th",), "ð": ("d",)}
_UMLAUTS = {"ä": "ae", "ö": "oe", "ü": "ue"}
ESCAPE_PATTERN = (
    r"%[0-9A-Fa-f]{2}|=\r?\n|=[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|\\[nrtbf/\"'\\]"
    r"|&#[0-9]{1,7};|&#[xX][0-9A-Fa-f]{1,6};|&[A-Za-z][A-Za-z0-9]{1,31};"
)
_ESCAPE = re.compile(ESCAPE_PATTERN)
"""One escape as software writes text (see the module docstring)."""
_SPACES = re.compile(r"\s+")
BASE64_RUN = r"[A-Za-z0-9+/_-]{16}"
"""The shortest run of base64 characters that is decoded (12 bytes)."""
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}")
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "/": "/", '"': '"', "'": "'", "\\": "\\"}
_PHONE_SEP = r"[ \-.()/\[\]]*"
_B = r"(?<![^\W_])"
_E = r"(?![^\W_])"
_NAME_SEP = r"[\W_]{0,4}"
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

    def stripped(self) -> View:
        """This view with combining marks removed and `ø ł đ æ œ þ ð` transliterated (one character
        may become two: both keep its span)."""
        out: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        for c, s, e in zip(self.text, self.starts, self.ends, strict=True):
            for d in unicodedata.normalize("NFD", c):
                if unicodedata.combining(d):
                    continue
                for x in _TRANSLIT.get(d, (d,))[0]:
                    out.append(x)
                    starts.append(s)
                    ends.append(e)
        return View("".join(out), tuple(starts), tuple(ends))

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


def decode_escapes(text: str) -> tuple[str, list[tuple[int, int]]] | None:
    """`text` with its escapes decoded, and per decoded character its source span; None if it has none."""
    found = list(_ESCAPE.finditer(text))
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


def views(text: str) -> list[View]:
    """The canonical views of `text`: as it is, and with its escapes decoded (when it has any, up to
    `MAX_ESCAPE_DEPTH` times: a JSON escape inside a JSON string); each
    also with its diacritics stripped when it has any (`Müller` read as `muller` too)."""
    out = [View.of(text)]
    decoded = decode_escapes(text)
    for _ in range(MAX_ESCAPE_DEPTH):
        if decoded is None:
            break
        out.append(View.of(*decoded))
        inner = decode_escapes(decoded[0])
        decoded = None if inner is None else (inner[0], [(decoded[1][a][0], decoded[1][b - 1][1]) for a, b in inner[1]])
    for v in list(out):
        if not v.text.isascii():
            out.append(v.stripped())
    return out


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


def token_variants(token: str) -> set[str]:
    """A canonical name token's transliterations: diacritics stripped, umlauts spelt out or contracted."""

    def strip(t: str) -> str:
        t = "".join(c for c in unicodedata.normalize("NFD", t) if not unicodedata.combining(c))
        for src, dst in _TRANSLIT.items():
            t = t.replace(src, dst[0])
        return unicodedata.normalize("NFC", t)

    def expand(t: str) -> str:
        for src, dst in {**_UMLAUTS, **{k: v[-1] for k, v in _TRANSLIT.items()}}.items():
            t = t.replace(src, dst)
        return t

    def contract(t: str) -> str:
        for src, dst in _UMLAUTS.items():
            t = t.replace(dst, src)
        return t

    out = {
        token,
        strip(token),
        expand(token),
        strip(expand(token)),
        contract(token),
        strip(contract(token)),
        expand(contract(token)),
    }
    return {v for v in out if v}


@dataclass(frozen=True)
class Hit:
    """One spelling of one identifier found in a text: its kind (id, email, name, phone), its span in
    the text as written, and whether it can be redacted in place there."""

    kind: str
    start: int
    end: int
    inline: bool = True


def country_split(e164: str, codes: Iterable[str]) -> tuple[str, str] | None:
    """(country code, national significant number) of E.164 digits, when the code is known."""
    known = set(codes)
    for n in (3, 2, 1):
        if e164[:n] in known and len(e164) - n >= 6:
            return e164[:n], e164[n:]
    return None


@dataclass(frozen=True)
class Spellings:
    """The spelling matchers of one subject's normalised identifiers (`erasure.identity.Identity`)."""

    ids: tuple[str, ...]
    emails: tuple[str, ...]
    names: tuple[str, ...]
    phones: tuple[str, ...]
    country_codes: tuple[str, ...]

    @cached_property
    def patterns(self) -> tuple[tuple[str, re.Pattern[str]], ...]:
        """(kind, regex over canonical text) per identifier."""
        out: list[tuple[str, re.Pattern[str]]] = []
        for v in self.ids:
            c = canonical(v).strip()
            groups = [g for g in re.split(r"[\W_]+", c) if g]
            if c:  # as it is, and its letter/digit groups with any separators (`subj ann 7731`)
                body = re.escape(c) + ("|" + _NAME_SEP.join(map(re.escape, groups)) if len(groups) > 1 else "")
                out.append(("id", re.compile(_B + "(?:" + body + ")" + _E)))
        for v in self.emails:
            local, at, domain = canonical(v).strip().rpartition("@")
            if not at:
                out.append(("email", re.compile(_B + re.escape(domain) + _E)))
                continue
            base = local.split("+", 1)[0] or local
            tag = r"(?:\+[^\s@\"'<>]{0,64})? ?@ ?"
            out.append(("email", re.compile(_B + re.escape(base) + tag + re.escape(domain) + _E)))
        for v in self.names:
            rx = self._name_regex(v)
            if rx:
                out.append(("name", re.compile(rx)))
        for p in self.phones:
            out.append(("phone", re.compile(self._phone_regex(p))))
        return tuple(out)

    @staticmethod
    def _name_regex(name: str) -> str | None:
        tokens = [t for t in re.split(r"[\s,]+", canonical(name)) if t]
        if not tokens:
            return None
        alts = [
            "(?:" + "|".join(re.escape(v) for v in sorted(token_variants(t), key=lambda s: (-len(s), s))) + ")"
            for t in tokens
        ]
        orders = itertools.permutations(alts) if len(alts) <= 4 else [alts, [alts[-1], *alts[:-1]]]
        return "|".join(_B + _NAME_SEP.join(o) + _E for o in orders)

    def _phone_regex(self, e164: str) -> str:
        def digits(d: str) -> str:
            return _PHONE_SEP.join(re.escape(c) for c in d)

        split = country_split(e164, self.country_codes)
        forms = [rf"(?:\+{_PHONE_SEP}|00{_PHONE_SEP})?{digits(e164)}"]
        if split:
            cc, nsn = split
            forms.append(rf"(?:\+{_PHONE_SEP}|00{_PHONE_SEP})?{digits(cc)}{_PHONE_SEP}(?:0{_PHONE_SEP})?{digits(nsn)}")
            forms.append(digits(nsn) if cc == "1" else rf"0{_PHONE_SEP}{digits(nsn)}")
        return "|".join(rf"(?<![^\W_+]){f}(?!\d)" for f in forms)

    def _found(self, text: str) -> list[Hit]:
        found: list[Hit] = []
        for view in views(text):
            for kind, rx in self.patterns:
                for m in rx.finditer(view.text):
                    if m.end() > m.start():
                        s, e = view.span(m.start(), m.end())
                        found.append(Hit(kind, s, e))
        return found

    def hits(self, text: str) -> list[Hit]:
        """Every spelling found in `text`, spans merged where they overlap, in text order; a spelling
        inside a base64 run is a hit on the whole run that cannot be redacted in place."""
        if not self.patterns:
            return []
        found = self._found(text)
        for s, e, data in base64_views(text):
            for kind in sorted({h.kind for h in self._found(data.decode("utf-8", "replace"))}):
                found.append(Hit(kind, s, e, inline=False))
        return _merged(found)

    def names_in(self, text: str) -> bool:
        """Whether any spelling of any identifier is in `text`."""
        return bool(self.hits(text))

    def redact(self, text: str, placeholder: str, keep: Iterable[Hit] = ()) -> tuple[str, int]:
        """`text` with every inline hit (but those in `keep`) replaced by `placeholder`; and how many."""
        kept = set(keep)
        out: list[str] = []
        at = n = 0
        for h in self.hits(text):
            if not h.inline or h in kept:
                continue
            out += [text[at : h.start], placeholder]
            at = h.end
            n += 1
        return ("".join(out) + text[at:], n) if n else (text, 0)


def _merged(hits: list[Hit]) -> list[Hit]:
    out: list[Hit] = []
    for h in sorted(hits, key=lambda h: (h.start, -h.end)):
        if out and h.start < out[-1].end:
            last = out[-1]
            out[-1] = Hit(last.kind, last.start, max(last.end, h.end), last.inline and h.inline)
        else:
            out.append(h)
    return out
