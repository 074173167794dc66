"""Phones, as docs/matching.md section 5 defines them (the erasing side's reading)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

_PLUS = "+\uff0b"
"""A plus sign, and its full-width form (libphonenumber reads both)."""


def _alnum(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "L" or unicodedata.category(ch) == "Nd"


def _ascii_digits(text: str) -> str:
    return "".join(str(unicodedata.decimal(c)) for c in text if unicodedata.category(c) == "Nd")


class Phone:
    """One request phone, ready to match (5.1)."""

    def __init__(self, phone: str) -> None:
        value = phone.strip()
        if value.startswith("00"):
            value = "+" + value[2:]
        self.e164: str | None = None
        self.region = "ZZ"
        self.nsn = ""
        import phonenumbers  # on first use: 20 ms that a command which matches no phone does not pay

        try:
            number = phonenumbers.parse(value, None)
        except phonenumbers.NumberParseException:
            return
        self.e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
        self.region = phonenumbers.region_code_for_country_code(number.country_code or 0)
        self.nsn = phonenumbers.national_significant_number(number)

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        """5.1-5.2."""
        if self.e164 is None or self.nsn not in _ascii_digits(text):
            return
        import phonenumbers

        for m in phonenumbers.PhoneNumberMatcher(text, self.region, leniency=phonenumbers.Leniency.POSSIBLE):
            if phonenumbers.format_number(m.number, phonenumbers.PhoneNumberFormat.E164) != self.e164:
                continue
            # 5.2: a candidate written with its `+` is tied by no `-`, `_` or `/` (`sms/+44…/inbox`)
            signed = text[m.start] in _PLUS
            if _glued(text, m.start - 1, -1, signed) or _glued(text, m.end, 1, signed):
                continue
            yield m.start, m.end


def _glued(text: str, i: int, step: int, signed: bool) -> bool:
    """5.2: the character at `i` (next to a candidate; `signed`: one that begins with `+`) ties it to
    another token."""
    if not 0 <= i < len(text):
        return False
    if _alnum(text[i]):
        return True
    if signed:
        return False
    j = i + step
    return text[i] in "-_/" and 0 <= j < len(text) and _alnum(text[j])
