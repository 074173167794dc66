"""The red team's own rule of "this text names the person" (issue 33), written apart from the product.

Nothing here comes from `erasure/`, `probes/` or `tasks/`. Text is folded (NFKC, format characters
dropped, every dash one `-`, digits of every script as ASCII, case folded, combining marks stripped;
once more with German transliteration), then:

- **names**: the given-name tokens and the family-name tokens each occur as a run of whole tokens, in
  either order, with at most `MAX_GAP` tokens between them (an initial, a middle name, a tag or a JSON
  key); in scripts written without spaces (CJK, Thai, ...) every character is a token and the two parts
  must touch (with or without a space). Apostrophes, dashes and underscores inside a word are dropped
  (O'Brien = O’Brien = OBrien); a name with a dash is also tried with the dash as a space. A part glued
  inside another word never matches ("Li Na" is not in "Lina");
- **ids**: the id's tokens as whole tokens (an invoice number holding a numeric id is another token);
- **emails**: addr-specs parsed out of the text, compared as (local part without `+tag`, domain as
  Unicode: punycode labels decoded by the standard library's codec), so `mary-lee@acme.com` and
  `lee@acme.com.au` are other addresses; "name at domain dot org" spellings; the md5, sha1 and sha256
  hex digests of the normalised address (lower case, domain in Unicode and in IDNA form);
- **phones**: runs of digits holding the national number are parsed by `phonenumbers` in the subject's
  region and must equal the subject's E.164.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import hashlib
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import phonenumbers
import regex

from tests.oracle_person import _DASH_TABLE, _drop_format

MAX_GAP = 3
"""Tokens allowed between the given and the family name in scripts that separate words."""

_GERMAN = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "ae", "Ö": "oe", "Ü": "ue"})
_MN = regex.compile(r"\p{Mn}+")
_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")
_NOSEP = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
_NOSEP_CHAR = regex.compile(f"[{_NOSEP}]")
_WORD = r"\p{L}\p{M}\p{N}"
_JOINERS = "'\u2019\u02bc\u2018`\u00b4\u2032\u05f3_\\-"
_IN_WORD_JOINER = regex.compile(f"(?<=[{_WORD}])[{_JOINERS}]+(?=[{_WORD}])")
_TOKEN = regex.compile(f"[{_WORD}]+")
_ADDR = regex.compile(r"(?<![\w.+\-])([\w.+\-]+)@([\w\-]+(?:\.[\w\-]+)+)")
_DOTW = r"(?:\s*[\[({<]\s*dot\s*[\])}>]\s*|\s+dot\s+|\.)"
_ATW = r"\s*(?:[\[({<]\s*at\s*[\])}>]|\s+at\s+)\s*"
_OBFUSCATED = regex.compile(
    r"(?<![\w.+\-])([\w+\-]+(?:" + _DOTW + r"[\w+\-]+)*)" + _ATW + r"([\w\-]+(?:" + _DOTW + r"[\w\-]+)+)"
)
_DOT_FORM = regex.compile(_DOTW)
_HEX = re.compile(r"(?<![0-9a-f])(?:[0-9a-f]{64}|[0-9a-f]{40}|[0-9a-f]{32})(?![0-9a-f])")
_PHONE_RUN = re.compile(r"[+0-9(][0-9\s().\-/+]{4,}[0-9]")
_NON_DIGITS = re.compile(r"\D+")


def fold(text: str) -> tuple[str, ...]:
    """The folded forms of `text` (plain; German transliteration), deduplicated (short texts cached:
    the same text is folded for the quick test and for the match)."""
    return _fold_cached(text) if len(text) < 65536 else _fold(text)


@functools.lru_cache(maxsize=8192)
def _fold_cached(text: str) -> tuple[str, ...]:
    return _fold(text)


def _fold(text: str) -> tuple[str, ...]:
    t = unicodedata.normalize("NFKC", text)
    t = _drop_format(t).translate(_DASH_TABLE)
    if _NON_ASCII_DIGIT.search(t):
        t = _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group(0), 0)), t)
    out: list[str] = []
    for variant in (t, t.translate(_GERMAN)):
        v = unicodedata.normalize("NFC", _MN.sub("", unicodedata.normalize("NFD", variant.casefold())))
        if v not in out:
            out.append(v)
    return tuple(out)


def digits_of(folded: str) -> str:
    """The decimal digits of a folded text, in order, nothing between them (kept for short texts: the
    quick test and the match read the same text)."""
    return _digits_cached(folded) if len(folded) < 65536 else _NON_DIGITS.sub("", folded)


@functools.lru_cache(maxsize=8192)
def _digits_cached(folded: str) -> str:
    return _NON_DIGITS.sub("", folded)


def tokens(folded: str, *, split: bool = False) -> tuple[str, ...]:
    """Word tokens of a folded text: in-word apostrophes/dashes/underscores dropped (or, `split`, made
    spaces), every character of a script written without spaces its own token (kept for short texts,
    as `fold`)."""
    return _tokens_cached(folded, split) if len(folded) < 65536 else _tokens(folded, split)


@functools.lru_cache(maxsize=8192)
def _tokens_cached(folded: str, split: bool) -> tuple[str, ...]:
    return _tokens(folded, split)


def _tokens(folded: str, split: bool) -> tuple[str, ...]:
    t = _IN_WORD_JOINER.sub(" " if split else "", folded)
    if _NOSEP_CHAR.search(t):
        t = _NOSEP_CHAR.sub(r" \g<0> ", t)
    return tuple(_TOKEN.findall(t))


def _nosep(toks: Iterable[str]) -> bool:
    return any(_NOSEP_CHAR.search(t) for t in toks)


def domain_unicode(domain: str) -> str:
    """A folded domain with every `xn--` label decoded (stdlib punycode codec), trailing dot dropped."""
    labels = []
    for label in domain.rstrip(".").split("."):
        if label.startswith("xn--"):
            with contextlib.suppress(UnicodeError, ValueError):
                label = codecs.decode(label[4:].encode("ascii"), "punycode")
        labels.append(label)
    return fold(".".join(labels))[0]


def domain_ascii(domain_u: str) -> str:
    """The IDNA (2003, stdlib codec) form of a Unicode domain; the input when it cannot be encoded."""
    try:
        return domain_u.encode("idna").decode("ascii")
    except UnicodeError:
        return domain_u


def email_key(local: str, domain: str) -> tuple[str, str]:
    """(local part without `+tag`, Unicode domain) of a folded address."""
    return fold(local)[0].split("+", 1)[0], domain_unicode(domain)


@dataclass(frozen=True)
class Person33:
    """Whom the oracle looks for: the request's identifiers, with the name given as its two parts."""

    id: str
    email: str | None = None
    given: str | None = None
    family: str | None = None
    phone: str | None = None
    name: str | None = None
    """The name as the request spells it (for the product); the oracle matches `given` and `family`."""

    def digests(self) -> set[str]:
        """md5, sha1, sha256 hex of the normalised address (lower case; domain as Unicode and as IDNA)."""
        if not self.email or "@" not in self.email:
            return set()
        local, _, domain = self.email.strip().rpartition("@")
        labels = []
        for label in unicodedata.normalize("NFKC", domain).lower().rstrip(".").split("."):
            if label.startswith("xn--"):
                with contextlib.suppress(UnicodeError, ValueError):
                    label = codecs.decode(label[4:].encode("ascii"), "punycode")
            labels.append(label)
        du = ".".join(labels)
        out = set()
        for d in {du, domain_ascii(du)}:
            addr = f"{local.lower()}@{d}".encode()
            out |= {hashlib.md5(addr).hexdigest(), hashlib.sha1(addr).hexdigest(), hashlib.sha256(addr).hexdigest()}
        return out


@dataclass(frozen=True)
class _Name:
    who: str
    given: tuple[str, ...]
    family: tuple[str, ...]
    split: bool
    nosep: bool


def _occurrences(seq: tuple[str, ...], toks: Sequence[str], pos: dict[str, list[int]]) -> list[int]:
    n = len(seq)
    return [i for i in pos.get(seq[0], []) if tuple(toks[i : i + n]) == seq]


class Matcher:
    """Every person's identifiers, indexed so that one text is tokenised once for all of them."""

    def __init__(self, people: Iterable[Person33]) -> None:
        self.names: dict[str, list[_Name]] = {}
        self.ids: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        self.emails: dict[tuple[str, str], str] = {}
        self.hexes: dict[str, str] = {}
        self.phones: list[tuple[str, str, str, str]] = []  # who, national number, E.164, region
        self.any_split = False
        for p in people:
            self._add(p)

    def _add(self, p: Person33) -> None:
        if p.given and p.family:
            for split in (False, True) if ("-" in fold(p.given + p.family)[0]) else (False,):
                self.any_split |= split
                for g, f in itertools.product(fold(p.given), fold(p.family)):
                    gt, ft = tuple(tokens(g, split=split)), tuple(tokens(f, split=split))
                    if gt and ft:
                        name = _Name(p.id, gt, ft, split, _nosep(gt + ft))
                        self.names.setdefault(gt[0], []).append(name)
        for f in fold(p.id):
            it = tuple(tokens(f))
            if it:
                self.ids.setdefault(it[0], []).append((p.id, it))
        if p.email and "@" in p.email:
            local, _, domain = p.email.strip().rpartition("@")
            self.emails[email_key(local, domain)] = p.id
            for d in p.digests():
                self.hexes[d] = p.id
        if p.phone:
            num = phonenumbers.parse(p.phone, None)
            e164 = phonenumbers.format_number(num, phonenumbers.PhoneNumberFormat.E164)
            region = phonenumbers.region_code_for_number(num) or "ZZ"
            self.phones.append((p.id, str(num.national_number), e164, region))

    def maybe(self, text: str) -> bool:
        """A quick necessary test: `text` holds a token, digest, address or phone digits of someone (a
        document parser runs only on texts that pass it)."""
        for f in fold(text):
            keys = set(tokens(f))
            if keys & self.names.keys() or keys & self.ids.keys():
                return True
            if self.emails and ("@" in f or " at " in f or "at]" in f or "at)" in f):
                return True
            if self.hexes and set(_HEX.findall(f)) & self.hexes.keys():
                return True
            if self.phones:
                digits = digits_of(f)
                if any(p[1] in digits for p in self.phones):
                    return True
        return False

    def find(self, text: str) -> Iterator[tuple[str, str, str]]:
        """(who, kind, matched text) of every occurrence in any folded form of `text`."""
        seen: set[tuple[str, str, str]] = set()
        for f in fold(text):
            for hit in self._find_folded(f):
                if hit not in seen:
                    seen.add(hit)
                    yield hit

    def _find_folded(self, f: str) -> Iterator[tuple[str, str, str]]:
        for split in (False, True) if self.any_split else (False,):
            toks = tokens(f, split=split)
            keys = set(toks)
            cands = [n for k in keys & self.names.keys() for n in self.names[k] if n.split == split]
            idc = [] if split else [x for k in keys & self.ids.keys() for x in self.ids[k]]
            if not cands and not idc:
                continue
            pos: dict[str, list[int]] = {}
            for i, t in enumerate(toks):
                pos.setdefault(t, []).append(i)
            for n in cands:
                if n.family[0] not in keys:
                    continue
                gap = 0 if n.nosep else MAX_GAP
                for g in _occurrences(n.given, toks, pos):
                    for fa in _occurrences(n.family, toks, pos):
                        ge, fe = g + len(n.given), fa + len(n.family)
                        d = fa - ge if ge <= fa else g - fe if fe <= g else -1
                        if 0 <= d <= gap:
                            lo, hi = min(g, fa), max(ge, fe)
                            yield n.who, "name", " ".join(toks[lo:hi])
            for who, seq in idc:
                if _occurrences(seq, toks, pos):
                    yield who, "id", " ".join(seq)
        if "@" in f and self.emails:
            for m in _ADDR.finditer(f):
                owner = self.emails.get(email_key(m.group(1), m.group(2)))
                if owner:
                    yield owner, "email", m.group(0)
        if self.emails and (" at " in f or "at]" in f or "at)" in f or "at>" in f or "at}" in f):
            for m in _OBFUSCATED.finditer(f, overlapped=True):
                local = _DOT_FORM.sub(".", m.group(1)).replace(" ", "")
                domain = _DOT_FORM.sub(".", m.group(2)).replace(" ", "")
                owner = self.emails.get(email_key(local, domain))
                if owner:
                    yield owner, "email-at-dot", m.group(0)
        if self.hexes:
            for h in set(_HEX.findall(f)) & self.hexes.keys():
                yield self.hexes[h], "email-digest", h
        if self.phones:
            yield from self._phones(f)

    def _phones(self, f: str) -> Iterator[tuple[str, str, str]]:
        digits = digits_of(f)
        wanted = [p for p in self.phones if p[1] in digits]
        if not wanted:
            return
        for m in _PHONE_RUN.finditer(f):
            run_digits = _NON_DIGITS.sub("", m.group(0))
            mine = [p for p in wanted if p[1] in run_digits]
            if not mine:
                continue
            window = f[max(0, m.start() - 8) : m.end() + 8]
            for region in {p[3] for p in mine}:
                for pm in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.POSSIBLE):
                    e164 = phonenumbers.format_number(pm.number, phonenumbers.PhoneNumberFormat.E164)
                    for who, _, want, r in mine:
                        if r == region and e164 == want:
                            yield who, "phone", pm.raw_string
