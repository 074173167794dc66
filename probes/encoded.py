"""The needles' encoded spellings, as hyperscan expressions: the decoded views encode the needles, not the
haystack, wherever an encoding is a mapping of characters (`probes.matcher` puts these forms into the
one database of its triggers, so one pass over a file's bytes finds raw and encoded spellings alike).

- `escaped`: a text with each character in any of its escaped forms, mixed freely (a JSON string may
  escape only some characters): itself (either case), percent-encoding of its UTF-8 bytes, a JSON
  `\\uXXXX` escape (a surrogate pair above U+FFFF), an HTML entity (decimal, hex, any named one for it),
  quoted-printable octets, its full-width form; an escape's own introducer may be escaped once more
  (`%2540`, `&amp;#64;`). A quoted-printable soft line break inside the needle is not in it: an optional
  `(?:=\r?\n)?` between characters made hyperscan 0.9.1 miss matches (`\u0031\u0030\u0030` after a
  line of other escapes); a needle split by one is found by a fragment on either side of it.

Base64 is no mapping of characters (each character holds bits of two bytes, and a needle's spelling in it
depends on its alignment, its letter case, and whatever encoding sits inside the base64): base64 runs are
decoded in bulk instead (`probes.view_payloads.base64_stream`), at C speed.
"""

from __future__ import annotations

import html.entities
from functools import cache

from probes.bytescan import _escape

_PCT = rb"(?:%|%25)"
_BSL = rb"(?:\x5c|\x5c\x5c|%5[cC])"
_AMP = rb"(?:&|&amp;|&#38;|&#[xX]26;|%26)"
_EQ = rb"(?:=|=3[dD])"
_SPACE = rb"(?:\s|\+|%20|&nbsp;|&#32;|&#[xX]20;|\x5cu0020|=20|\xc2\xa0)+"


@cache
def _named() -> dict[str, list[str]]:
    """Per character, the names of the HTML entities that stand for it (`html.unescape` reads them)."""
    out: dict[str, list[str]] = {}
    for name, value in html.entities.html5.items():
        if len(value) == 1:
            out.setdefault(value, []).append(name)
    return out


def _char(c: str) -> bytes:
    """One character as a hyperscan alternation of its spellings (raw, escaped, doubly introduced)."""
    if c.isspace():
        return _SPACE
    forms: list[bytes] = []
    for v in dict.fromkeys((c, c.lower(), c.upper())):
        if len(v) != 1:
            continue
        raw = v.encode("utf-8")
        point = ord(v)
        forms.append(_escape(raw))
        forms.append(b"".join(_PCT + b"%02x" % b for b in raw))
        forms.append(b"".join(_EQ + b"%02X" % b for b in raw))
        if point > 0xFFFF:
            hi, lo = 0xD800 + ((point - 0x10000) >> 10), 0xDC00 + ((point - 0x10000) & 0x3FF)
            forms.append(_BSL + b"u%04x" % hi + _BSL + b"u%04x" % lo)
        else:
            forms.append(_BSL + b"u%04x" % point)
        # numeric references with the `;` writers put (`html.unescape` reads them without it too), in
        # hex with or without zeros to four digits: optional parts cost seconds of compile time
        forms.append(_AMP + b"#%d;" % point)
        forms += [_AMP + b"#[xX]" + hexa + b";" for hexa in (b"%x" % point, b"%04x" % point)]
        forms += [_AMP + _escape(name.encode()) for name in _named().get(v, ())]
        if 0x21 <= point <= 0x7E:
            forms.append(_escape(chr(point + 0xFEE0).encode("utf-8")))
    return b"(?:" + b"|".join(dict.fromkeys(forms)) + b")"


def escaped(text: str) -> bytes:
    """`text` in any mix of its characters' escaped spellings (see the module docstring); matched with
    hyperscan's caseless flag (hex digits and ASCII letters in either case)."""
    return b"".join(_char(c) for c in text)
