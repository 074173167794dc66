"""The red team's oracle (`tests.oracle`): a person, their identifiers in canonical form, and the
patterns that match them in any spelling (id groups with any separators, email with any `+tag`, name
tokens in any order, phone digits with any separators and prefixes). Standard library only; nothing of
the product."""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

# --- the person -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    """The identifiers of whom we look for. Any may be None (except `id`)."""

    id: str
    email: str | None = None
    name: str | None = None
    phone: str | None = None

    @classmethod
    def of(cls, obj: object) -> Person:
        """From anything with `id`, `email`, `name`, `phone` attributes, or a mapping."""
        if isinstance(obj, Person):
            return obj
        if isinstance(obj, dict):
            return cls(str(obj["id"]), obj.get("email"), obj.get("name"), obj.get("phone"))
        return cls(
            str(getattr(obj, "id")),  # noqa: B009 (an object of any class with an id)
            getattr(obj, "email", None),
            getattr(obj, "name", None),
            getattr(obj, "phone", None),
        )


# --- canonical text -------------------------------------------------------------------------------

_DASHES = "".join(chr(c) for c in range(0x30000) if unicodedata.category(chr(c)) == "Pd") + "\u2212\u2043\ufe63\uff0d"
_DASH_TABLE = {ord(c): "-" for c in _DASHES}
_GERMAN = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "ae", "Ö": "oe", "Ü": "ue"})
_WS = re.compile(r"\s+")
_NON_DIGITS = re.compile(r"\D+")
_COMBINING = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def _drop_format(text: str) -> str:
    if not any(unicodedata.category(c) == "Cf" for c in set(text)):
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def canonical_forms(text: str) -> tuple[str, ...]:
    """The canonical forms of `text` (diacritics stripped; German transliteration), deduplicated."""
    t = unicodedata.normalize("NFKC", text)
    t = _drop_format(t).translate(_DASH_TABLE)
    t = _WS.sub(" ", t)
    out = []
    for variant in (t, t.translate(_GERMAN)):
        v = variant.casefold()
        v = _COMBINING.sub("", unicodedata.normalize("NFD", v))
        v = unicodedata.normalize("NFC", v)
        if v not in out:
            out.append(v)
    return tuple(out)


# --- patterns of a person -------------------------------------------------------------------------

_ALNUM_BEFORE = r"(?<![^\W_])"  # not preceded by a letter or digit
_ALNUM_AFTER = r"(?![^\W_])"
_SEP = r"[\W_]{0,4}"
_PHONE_SEP = r"[\s\-./()\[\]]{0,3}"
# ITU calling codes of one and two digits; everything else here is three digits.
_CC2 = {
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
}


def split_phone(phone: str) -> tuple[str, str]:
    """(country code, national significant number) of a phone in international form; ("", digits)
    when it has no `+`/`00` prefix (then it is taken as national, a leading trunk 0 dropped)."""
    s = phone.strip().replace("(0)", "")
    digits = re.sub(r"\D", "", s)
    if s.startswith("+") or digits.startswith("00"):
        d = digits if s.startswith("+") else digits[2:]
        n = 1 if d[:1] in ("1", "7") else 2 if d[:2] in _CC2 else 3
        nsn = d[n:]
        if nsn.startswith("0") and d[:n] != "39":
            nsn = nsn[1:]
        return d[:n], nsn
    return "", digits[1:] if digits.startswith("0") else digits


def _digits_pattern(digits: str) -> str:
    return _PHONE_SEP.join(re.escape(d) for d in digits)


def _token_alternatives(name_forms: Iterable[str]) -> list[str]:
    alts: list[str] = []
    for form in name_forms:
        tokens = [t for t in re.split(r"[\W_]+", form) if t]
        if not tokens:
            continue
        orders = itertools.permutations(tokens) if len(tokens) <= 4 else [tokens, tokens[1:] + tokens[:1]]
        for order in orders:
            alts.append(_SEP.join(re.escape(t) for t in order))
    return list(dict.fromkeys(alts))


@dataclass
class Patterns:
    """One compiled alternation per identifier kind (kinds: id, email, name, phone)."""

    by_kind: dict[str, re.Pattern[str]] = field(default_factory=dict)
    needs: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    """Per kind, the literal pieces one alternative's every match contains (a fast necessary test:
    the kind's pattern runs only on a text holding all pieces of some alternative)."""
    nsn: str = ""
    """The phone's national number: every phone match holds its digits in a row once non-digits are
    removed."""

    @classmethod
    def of(cls, person: Person) -> Patterns:
        out: dict[str, list[str]] = {}
        needs: dict[str, list[tuple[str, ...]]] = {}
        for form in canonical_forms(person.id):
            groups = [g for g in re.split(r"[\W_]+", form) if g]
            if groups:
                out.setdefault("id", []).append(_ALNUM_BEFORE + _SEP.join(re.escape(g) for g in groups) + _ALNUM_AFTER)
                needs.setdefault("id", []).append(tuple(groups))
        if person.email:
            for form in canonical_forms(person.email):
                local, _, domain = form.rpartition("@")
                out.setdefault("email", []).append(
                    r"(?<![0-9a-z._+\-])"
                    + re.escape(local)
                    + r"(?:\+[^@\s\"'<>]{0,64})?\s?@\s?"
                    + re.escape(domain)
                    + _ALNUM_AFTER
                )
                needs.setdefault("email", []).append((local, domain))
        if person.name:
            alts = _token_alternatives(canonical_forms(person.name))
            if alts:
                out["name"] = [_ALNUM_BEFORE + "(?:" + "|".join(alts) + ")" + _ALNUM_AFTER]
                needs["name"] = [tuple(t for t in re.split(r"[\W_]+", f) if t) for f in canonical_forms(person.name)]
        nsn = ""
        if person.phone:
            cc, nsn = split_phone(person.phone)
            nsn_p = _digits_pattern(nsn)
            alts = [r"0" + _PHONE_SEP + nsn_p]  # national, trunk 0
            if cc:
                cc_p = _digits_pattern(cc)
                alts.append(r"(?:\+|00)?" + _PHONE_SEP + cc_p + _PHONE_SEP + r"(?:\(0\)" + _PHONE_SEP + ")?" + nsn_p)
            out["phone"] = [r"(?<![0-9])(?:" + "|".join(alts) + r")(?![0-9])"]
        return cls({k: re.compile("|".join(f"(?:{p})" for p in v)) for k, v in out.items()}, needs, nsn)

    def find(self, text: str) -> Iterator[tuple[str, str]]:
        """(kind, matched canonical text) of every match in every canonical form of `text`."""
        for form in canonical_forms(text):
            yield from self.find_in_form(form, _NON_DIGITS.sub("", form))

    def find_in_form(self, form: str, digits: str) -> Iterator[tuple[str, str]]:
        """(kind, matched text) in one canonical form (`digits`: its digits alone)."""
        for kind, pat in self.by_kind.items():
            if kind == "phone":
                if not self.nsn or self.nsn not in digits:
                    continue
            elif not any(all(piece in form for piece in alt) for alt in self.needs.get(kind, [()])):
                continue
            for m in pat.finditer(form):
                yield kind, m.group(0)
