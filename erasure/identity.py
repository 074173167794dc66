"""A data subject's identity: every identifier a request gives, normalised, in every usual spelling.

Normal forms (what "the same identifier" means everywhere in the engine):
- ids and names: Unicode NFKC, then case folding, then runs of white space folded to one space;
- emails: NFKC, lower-cased, surrounding white space removed;
- phones: the digits in E.164 (`+<country><number>`); `national_digits` gives the national form.

Where a text names the subject is decided by `erasure.spellings` (`Identity.spellings`, `hits`,
`names_in`, `redact`): every spelling of every identifier in the text's canonical views, token-bounded,
so a short id such as `48213` matches `id 48213` but not `a48213f` in a hex digest.
`salted_hashes` gives the keyed hashes kept for sticky erasure by identity.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from erasure.spellings import Hit, Spellings
from erasure.subject import Subject

MIN_MATCH_CHARS = 4
"""An identifier shorter than this is matched only where it stands as a whole token."""
_COUNTRY_CODES = (
    "1",
    "7",
    "20",
    "27",
    "30",
    "31",
    "32",
    "33",
    "34",
    "36",
    "39",
    "40",
    "41",
    "43",
    "44",
    "45",
    "46",
    "47",
    "48",
    "49",
    "51",
    "52",
    "53",
    "54",
    "55",
    "56",
    "57",
    "58",
    "60",
    "61",
    "62",
    "63",
    "64",
    "65",
    "66",
    "81",
    "82",
    "84",
    "86",
    "90",
    "91",
    "92",
    "93",
    "94",
    "95",
    "98",
    "211",
    "212",
    "213",
    "216",
    "218",
    "220",
    "221",
    "233",
    "234",
    "254",
    "255",
    "256",
    "260",
    "263",
    "264",
    "267",
    "351",
    "352",
    "353",
    "354",
    "358",
    "359",
    "370",
    "371",
    "372",
    "380",
    "381",
    "385",
    "386",
    "420",
    "421",
    "852",
    "880",
    "886",
    "961",
    "962",
    "966",
    "971",
    "972",
)


def fold(text: str) -> str:
    """NFKC, case folding and single spaces: the normal form of ids and names."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def normal_email(email: str) -> str:
    return unicodedata.normalize("NFKC", email).strip().lower()


def phone_digits(phone: str) -> str:
    """The phone's digits in E.164 without the `+` (a leading `00` counts as `+`)."""
    text = unicodedata.normalize("NFKC", phone).strip()
    digits = re.sub(r"\D", "", text)
    if text.startswith("00"):
        digits = digits[2:]
    return digits


def national_digits(e164: str) -> str | None:
    """The national spelling with a trunk 0 (`447958331277` -> `07958331277`), when the country code
    is known; None for NANP (+1) numbers, whose national form is the number without the 1."""
    for n in (3, 2, 1):
        cc = e164[:n]
        if cc in _COUNTRY_CODES and len(e164) - n >= 6:
            rest = e164[n:]
            return rest if cc == "1" else "0" + rest
    return None


@dataclass(frozen=True)
class Identity:
    """The normalised identifiers of one subject, as given by a request (and aliases the team confirmed)."""

    ids: tuple[str, ...]
    emails: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    phones: tuple[str, ...] = ()
    """E.164 digits, no `+`."""

    @classmethod
    def of(cls, subject: Subject) -> Identity:
        return cls(
            ids=(fold(subject.id),),
            emails=(normal_email(subject.email),) if subject.email else (),
            names=(fold(subject.name),) if subject.name else (),
            phones=(phone_digits(subject.phone),) if subject.phone and phone_digits(subject.phone) else (),
        )

    def items(self) -> Iterator[tuple[str, str]]:
        """(kind, normal form) of every identifier: kinds id, email, name, phone."""
        for kind, values in (("id", self.ids), ("email", self.emails), ("name", self.names), ("phone", self.phones)):
            for v in values:
                yield kind, v

    def phone_spellings(self) -> list[str]:
        """Digit strings a phone may be written as (international, national)."""
        out: list[str] = []
        for p in self.phones:
            out.append(p)
            nat = national_digits(p)
            if nat:
                out.append(nat)
        return out

    @cached_property
    def spellings(self) -> Spellings:
        """The matchers of every spelling of every identifier (`erasure.spellings`)."""
        return Spellings(
            ids=self.ids, emails=self.emails, names=self.names, phones=self.phones, country_codes=_COUNTRY_CODES
        )

    def hits(self, text: str) -> list[Hit]:
        """Every spelling of an identifier found in `text` (`Spellings.hits`), with its kind and span."""
        return self.spellings.hits(text)

    def names_in(self, text: str) -> bool:
        """Whether `text` names the subject in any spelling, in any of its views (`erasure.spellings`)."""
        return self.spellings.names_in(text)

    def found_in(self, text: str) -> str | None:
        """The kind of the first identifier found in `text` (never its value), or None. Where one hit holds
        another (`annabel.quist@...` holds the name `annabel quist`), the stronger kind is said."""
        hits = self.hits(text)
        if not hits:
            return None
        first = hits[0]
        for h in hits:
            if first.kind == "name" and h.kind != "name" and h.start < first.end and first.start < h.end:
                return h.kind
        return first.kind

    def redact(self, text: str, placeholder: str = "[redacted]", keep: Iterable[Hit] = ()) -> tuple[str, int]:
        """`text` with every spelling that can be redacted in place (but `keep`) replaced by
        `placeholder`, an escaped spelling with its whole escaped span; and how many were replaced.
        The rest of the text keeps its characters."""
        return self.spellings.redact(text, placeholder, keep)

    def salted_hashes(self, salt: bytes) -> list[tuple[str, str]]:
        """(kind, HMAC-SHA256(salt, kind:normal form) hex) for sticky erasure by identity."""
        return [
            (kind, hmac.new(salt, f"{kind}:{value}".encode(), hashlib.sha256).hexdigest())
            for kind, value in self.items()
        ]


def salted_hash(salt: bytes, kind: str, value: str) -> str:
    """The keyed hash of one normalised identifier (see `Identity.salted_hashes`)."""
    return hmac.new(salt, f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()
