"""Raw-byte triggers of the decoded views (`probes.matcher`) for classes of characters the rule reads
where no fragment of an identifier's own spelling stands: format characters (Unicode category Cf), which
words and addresses skip (docs/matching.md 2.4), so an identifier written with one after each character
has no fragment left for its own triggers to find; and decimal digits of other scripts, which phones and
ids are read in (5.2), while their triggers are ASCII digits. A window around them is read instead."""

from __future__ import annotations

from collections.abc import Sequence

from probes.bytescan import _escape
from probes.rule import _ucd


def ignorable_trigger(wide_codecs: Sequence[str]) -> bytes:
    """A format character (docs/matching.md 2.4) touching a letter or digit, in UTF-8 and in UTF-16 and
    UTF-32 (either byte order): a window around it is read by the rule, which skips it. Only where it
    touches one (in wide text, between two): a format character's two or three bytes stand in any binary
    file (4,013 times in a 100k-frame store's database, in floats and page headers; 175 beside a letter),
    and an identifier spelled with one after each character has one between two letters or digits."""
    points = [chr(cp) for lo, hi in _ucd.IGNORED for cp in range(lo, hi + 1)]
    cf = b"(?:" + _encoded_class(points, "utf-8") + b")"
    # after the last byte of a letter (beyond ASCII too), or before the first byte of one
    forms = [b"[0-9A-Za-z\\x80-\\xbf]" + cf, cf + b"[0-9A-Za-z\\xc2-\\xf4]"]
    for codec in wide_codecs:  # between two ASCII letters or digits: wide text has few false starts
        letter = _escape("A".encode(codec)).replace(b"\\x41", b"[0-9A-Za-z]")
        forms.append(letter + b"(?:" + _encoded_class(points, codec) + b")+" + letter)
    return b"|".join(forms)


def other_digits_trigger() -> bytes:
    """Two decimal digits (Unicode category Nd) of a script other than ASCII in a row, in UTF-8: a phone or
    an id written in Eastern Arabic, Persian, Devanagari... digits, which the rule reads as their values
    (docs/matching.md 5.2)."""
    digits = [chr(cp) for lo, hi in _ucd.DIGIT for cp in range(max(lo, 0x80), hi + 1)]
    one = b"(?:" + _encoded_class(digits, "utf-8") + b")"
    return one + one


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
