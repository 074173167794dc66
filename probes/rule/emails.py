"""Emails: docs/matching.md section 4."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from probes.rule.text import ViewText
from probes.rule.words import IGNORED, WORD_OUTSIDE, canonical, is_word_char, word_re

# 4.1: local characters are word characters outside the character-scripts, and `.`, `+`, `-`, `'`; the
# local part is the maximal run of them directly before the `@`, less its leading characters that are
# not word characters.
# Format characters (Cf, 2.4) are skipped inside an address: part of the run they stand in, never its
# first or last character, removed before comparison.
_LOCAL = f"[{WORD_OUTSIDE}{IGNORED}.+\\-']"
_LOCAL_PUNCT = frozenset(".+-'")
# 4.1: the longest run of labels separated by single `.`, a label being a non-empty run of word characters
# (outside the character-scripts) and `-`; two labels or more. Greedy, so a final `.` is left out.
_LABEL = f"[{IGNORED}]*[{WORD_OUTSIDE}\\-](?:[{IGNORED}]*[{WORD_OUTSIDE}\\-])*"
_DOMAIN = f"{_LABEL}(?:[{IGNORED}]*\\.{_LABEL})+"
_IGNORED_RE = re.compile(f"[{IGNORED}]+")
_PRECEDED_BY = frozenset(".+@-")  # 4.3
# 4.1, last sentence: characters NFKC maps one for one to the address's punctuation stand for it.
PUNCTUATION_FORMS = {
    "@": "\uff20\ufe6b",
    ".": "\uff0e\ufe52",
    "+": "\uff0b\ufe62",
    "-": "\uff0d\ufe63",
    "'": "\uff07",
}
_AS_ASCII = {ord(form): ascii_char for ascii_char, forms in PUNCTUATION_FORMS.items() for form in forms}
AT_SIGNS = ("@", *PUNCTUATION_FORMS["@"])
_AS_ASCII_RE = re.compile("[" + "".join(re.escape(chr(c)) for c in _AS_ASCII) + "]")
"""Any character `_AS_ASCII` changes: a view without one is its own translation (`str.translate` with a
dict looks up every character: 50 us a window)."""


@cache
def _regexes() -> tuple[re.Pattern[str], re.Pattern[str]]:
    # compiled on first use (large classes)
    return re.compile(_LOCAL), re.compile(_DOMAIN)


def norm_local(local: str) -> str:
    """4.2: NFKC, case folded, everything from the first `+` removed."""
    return unicodedata.normalize("NFKC", _IGNORED_RE.sub("", local)).casefold().split("+", 1)[0]


def _label(label: str) -> str:
    # 4.2: a label that starts with `xn--` is decoded from punycode (the rest of the label, by the
    # standard library's codec), then NFKC and case folded again; a label that fails stays as it is.
    if label.startswith("xn--"):
        try:
            return unicodedata.normalize("NFKC", label[4:].encode("ascii").decode("punycode")).casefold()
        except UnicodeError:
            return label
    return label


def norm_domain(domain: str) -> str:
    """4.2: NFKC, case folded, each `xn--` label decoded from punycode to Unicode."""
    return ".".join(_label(x) for x in unicodedata.normalize("NFKC", _IGNORED_RE.sub("", domain)).casefold().split("."))


@dataclass(frozen=True)
class EmailPattern:
    """One request address, compiled."""

    local: str | None  # 4.2 normalised; None when the request's value has no `@`
    domain: str | None
    spelt: tuple[str, ...]  # 4.3: canonical words, `at` included
    digests: frozenset[str]  # 4.4

    def may_spell(self, skeleton: str) -> bool:
        """Prefilter for 4.3: every word of the spelt-out form is in the skeleton."""
        return bool(self.spelt) and all(w in skeleton for w in self.spelt)

    def may_digest(self, skeleton: str) -> bool:
        """Prefilter for 4.4."""
        return any(d in skeleton for d in self.digests)


def compile_email(address: str) -> EmailPattern:
    """Compile a request's address.

    Readings: the request's address is split at its last `@`. The spelt-out form (4.3) uses the request
    address as compared by 4.2: its local part without the `+tag`, and its domain in Unicode (punycode
    labels decoded), cut into words by section 2. The digests (4.4) are of the address as given, with
    surrounding white space removed and lower-cased (`str.lower`), in UTF-8."""
    norm = address.strip().lower().encode("utf-8")
    digests = frozenset(
        (hashlib.md5(norm).hexdigest(), hashlib.sha1(norm).hexdigest(), hashlib.sha256(norm).hexdigest())
    )
    stripped = address.strip()
    if "@" not in stripped:
        return EmailPattern(None, None, (), digests)
    raw_local, raw_domain = stripped.rsplit("@", 1)
    local, domain = norm_local(raw_local), norm_domain(raw_domain)
    local_words = [canonical(m.group()) for m in word_re(local).finditer(local)]
    domain_words = [canonical(m.group()) for label in domain.split(".") for m in word_re(label).finditer(label)]
    spelt = [*local_words, "at", *domain_words]
    # 2.6: a word whose canonical form is empty matches nothing, so such an address is never spelt out.
    ok = bool(local_words) and bool(domain_words) and all(spelt)
    return EmailPattern(local, domain, tuple(spelt) if ok else (), digests)


def find_addresses(ps: list[EmailPattern], view: str) -> Iterator[tuple[int, int]]:
    """4.1/4.2: every address in the view equal to one of the patterns' addresses."""
    wanted = {(p.local, p.domain) for p in ps if p.local is not None}
    if not wanted:
        return
    local_re, domain_re = _regexes()
    if _AS_ASCII_RE.search(view):
        view = view.translate(_AS_ASCII)  # one character for one: the offsets are the view's
    at = view.find("@")
    while at >= 0:
        start = at
        while start > 0 and local_re.match(view, start - 1):
            start -= 1
        while start < at and (view[start] in _LOCAL_PUNCT or _IGNORED_RE.match(view, start)):
            start += 1  # less its leading characters that are not word characters
        d = domain_re.match(view, at + 1)
        if start < at and d is not None and (norm_local(view[start:at]), norm_domain(d.group())) in wanted:
            yield start, d.end()
        at = view.find("@", at + 1)


def find_spelt(p: EmailPattern, t: ViewText) -> Iterator[tuple[int, int]]:
    """4.3: the address spelt out in words, with `at` and optional `dot`s, within one record."""
    canon = t.canon
    n = len(canon)
    s = p.spelt
    for i in t.index.get(s[0], ()):
        states = {i}
        for k in range(1, len(s)):
            nxt: set[int] = set()
            for e in states:
                if e + 1 < n and canon[e + 1] == s[k]:
                    nxt.add(e + 1)
                if e + 2 < n and canon[e + 1] == "dot" and canon[e + 2] == s[k]:
                    nxt.add(e + 2)
            states = nxt
            if not states:
                break
        for j in sorted(states):
            if not t.same_record(i, j):
                continue
            st, en = t.starts[i], t.ends[j]
            if st > 0 and t.view[st - 1] in _PRECEDED_BY:
                continue
            # "the last is followed by the word `dot`": read as the next word of the view, whatever record
            # it is in.
            if j + 1 < n and canon[j + 1] == "dot":
                continue
            if en + 1 < len(t.view) and t.view[en] == "." and is_word_char(t.view[en + 1]):
                continue
            yield st, en


def find_digests(p: EmailPattern, t: ViewText) -> Iterator[tuple[int, int]]:
    """4.4: a word equal (case-insensitively: compared in canonical form) to a digest of the address."""
    for i in t.where(p.digests):
        yield t.starts[i], t.ends[i]
