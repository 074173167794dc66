"""Phones: docs/matching.md section 5."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property

import phonenumbers

from probes.rule import _ucd

_E164 = phonenumbers.PhoneNumberFormat.E164
_NON_DIGITS_RE = re.compile(r"\D+")  # Python's \d is Unicode Nd, as libphonenumber's digits


@cache
def _to_ascii() -> dict[int, int]:
    """Every script's decimal digits written as ASCII (for the prefilter; built on first use)."""
    return {
        cp: ord("0") + unicodedata.decimal(chr(cp))
        for a, b in _ucd.WORD
        for cp in range(max(a, 0x80), b + 1)
        if unicodedata.category(chr(cp)) == "Nd"
    }


@cache
def _digit_class(d: str) -> str:
    """A regex class of every decimal digit (Nd, any script) of value `d`."""
    table = _to_ascii()
    return "[" + d + "".join(chr(cp) for cp, v in table.items() if chr(v) == d) + "]"


@dataclass(frozen=True)
class PhonePattern:
    """One request phone, parsed (5.1)."""

    e164: str
    region: str  # 5.1: `phonenumbers.region_code_for_country_code` (the main region of its country code)
    tail: str  # the national significant number's last 6 digits (prefilter)

    @cached_property
    def tail_in_line(self) -> re.Pattern[str]:
        """The tail's digits (any script) in order, with anything but digits and line feeds between:
        a line's digits hold the tail exactly when this matches in it."""
        return re.compile("[^\\d\\n]*".join(_digit_class(d) for d in self.tail))


def compile_phone(value: str) -> PhonePattern | None:
    """5.1/5.3: parse the request's phone (a leading `00` read as `+`; no default region: a value without
    a country code does not parse); None when it cannot be parsed (`phone_unparsed`). Its region is the
    main region of its country code. Reading: the leading `00` is looked for after surrounding white
    space is removed."""
    value = value.strip()
    if value.startswith("00"):
        value = "+" + value[2:]
    try:
        num = phonenumbers.parse(value, None)
    except phonenumbers.NumberParseException:
        return None
    nsn = phonenumbers.national_significant_number(num)
    region = phonenumbers.region_code_for_country_code(num.country_code or 0)
    return PhonePattern(phonenumbers.format_number(num, _E164), region, nsn[-6:])


def digits(view: str) -> str:
    """All the decimal digits of the view, in order, as ASCII."""
    ds = _NON_DIGITS_RE.sub("", view)
    return ds if ds.isascii() else ds.translate(_to_ascii())


def subsequence(needle: str, haystack: str) -> bool:
    """Whether `needle`'s characters occur in `haystack` in order (not necessarily together)."""
    it = iter(haystack)
    return all(c in it for c in needle)


def _alnum(c: str) -> bool:
    # 5.2 "a letter or digit": read as general category L* or Nd.
    cat = unicodedata.category(c)
    return cat[0] == "L" or cat == "Nd"


def _glued(view: str, start: int, end: int) -> bool:
    """5.2: directly preceded or followed by a letter or digit, or by `-`, `_` or `/` that is itself next
    to a letter or digit on the other side (only when the candidate does not begin with `+`)."""
    # a candidate that begins with its plus sign (or the full-width one) is tied by no `-`, `_` or `/`
    signed = view[start] in "+\uff0b"
    if start > 0:
        c = view[start - 1]
        if _alnum(c) or (not signed and c in "-_/" and start > 1 and _alnum(view[start - 2])):
            return True
    if end < len(view):
        c = view[end]
        if _alnum(c) or (not signed and c in "-_/" and end + 1 < len(view) and _alnum(view[end + 1])):
            return True
    return False


def find_phones(ps: list[PhonePattern], view: str) -> Iterator[tuple[int, int]]:
    """5.1/5.2: every PhoneNumberMatcher candidate (leniency POSSIBLE, default region the number's) whose
    E.164 is one of the patterns', not glued to another token."""
    ds = digits(view)
    live = [p for p in ps if p.tail in ds]
    if not live:
        return
    by_region: dict[str, set[str]] = {}
    for p in live:
        by_region.setdefault(p.region, set()).add(p.e164)
    if not by_region:
        return
    # The matcher is run line by line (LF), on the lines whose digits hold a tail. This is the whole text's
    # result: libphonenumber's candidate pattern cannot match a line feed, so no candidate spans two lines;
    # its scan restarts after each candidate, so a line's candidates do not depend on the lines before;
    # and with leniency POSSIBLE only the characters right after a candidate are looked at (a time's
    # `:ss`), which a line feed never is. (One difference: the matcher gives up after 65,535 rejected
    # candidates, counted per line here and per text when run whole.)
    lines: set[int] = set()  # the start offsets of the lines to read
    for p in live:
        for m in p.tail_in_line.finditer(view):
            lines.add(view.rfind("\n", 0, m.start()) + 1)
    for pos in sorted(lines):
        nl = view.find("\n", pos)
        line = view[pos:] if nl < 0 else view[pos:nl]
        for region, e164s in by_region.items():
            for pm in phonenumbers.PhoneNumberMatcher(line, region, leniency=phonenumbers.Leniency.POSSIBLE):
                s, e = pos + pm.start, pos + pm.end
                if phonenumbers.format_number(pm.number, _E164) in e164s and not _glued(view, s, e):
                    yield s, e
