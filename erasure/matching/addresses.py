"""Emails, as docs/matching.md section 4 defines them (the erasing side's reading)."""

from __future__ import annotations

import contextlib
import hashlib
import unicodedata
from collections.abc import Iterator

from erasure.matching.words import CHAR, IGNORED, WORD, Word, kind, same_record, words

_LOCAL_EXTRA = frozenset(".+-'")
_COMPATIBLE = str.maketrans(
    {"\uff20": "@", "\ufe6b": "@", "\uff0e": ".", "\ufe52": ".", "\uff0b": "+", "\ufe62": "+", "\uff0d": "-"}
    | {"\ufe63": "-", "\uff07": "'"}
)
"""4.1: the compatibility forms of the address's punctuation, one character for one (offsets unchanged)."""


def _word_char(ch: str) -> bool:
    return kind(ch) == WORD


def _fold(s: str) -> str:
    # 4.1: format characters inside an address are not part of it
    return unicodedata.normalize("NFKC", "".join(c for c in s if kind(c) != IGNORED)).casefold()


def canonical_domain(domain: str) -> str:
    """4.2: NFKC, case folded, `xn--` labels decoded from punycode."""
    out = []
    for label in _fold(domain).split("."):
        if label.startswith("xn--"):
            with contextlib.suppress(UnicodeError, ValueError):
                label = _fold(label[4:].encode("ascii").decode("punycode"))
        out.append(label)
    return ".".join(out)


def canonical_local(local: str) -> str:
    """4.2: NFKC, case folded, from the first `+` on removed."""
    return _fold(local).split("+", 1)[0]


def addresses(text: str) -> Iterator[tuple[int, int, str, str]]:
    """4.1: (start, end, local, domain) of every address in `text`."""
    text = text.translate(_COMPATIBLE)
    at = text.find("@")
    n = len(text)
    while at >= 0:
        s = at
        while s > 0 and (_word_char(text[s - 1]) or text[s - 1] in _LOCAL_EXTRA or kind(text[s - 1]) == IGNORED):
            s -= 1
        while s < at and not _word_char(text[s]):
            s += 1
        e = at + 1
        labels = 0
        end = -1
        while True:  # labels separated by single dots; format characters skipped (4.1)
            k = e
            last = -1
            while k < n and (_word_char(text[k]) or text[k] == "-" or kind(text[k]) == IGNORED):
                if kind(text[k]) != IGNORED:
                    last = k
                k += 1
            if last < 0:
                break
            labels += 1
            end = last + 1
            if k < n and text[k] == ".":
                e = k + 1
            else:
                break
        if s < at and labels >= 2:
            yield s, end, text[s:at], text[at + 1 : end]
        at = text.find("@", at + 1)


class Email:
    """One request email, ready to match."""

    def __init__(self, email: str) -> None:
        value = email.strip()
        local, at, domain = value.rpartition("@")
        self.valid = bool(at and local and domain)
        self.local = canonical_local(local)
        self.domain = canonical_domain(domain)
        lowered = value.lower().encode("utf-8")
        self.digests = frozenset(
            {hashlib.md5(lowered).hexdigest(), hashlib.sha1(lowered).hexdigest(), hashlib.sha256(lowered).hexdigest()}
        )
        spelt = [w.canon for w in words(local.split("+", 1)[0])] + ["at"]
        for label in domain.split("."):
            spelt += [w.canon for w in words(canonical_domain(label))]
        self.spelt = tuple(spelt)

    def find_addresses(self, text: str) -> Iterator[tuple[int, int]]:
        """4.1-4.2."""
        if not self.valid:
            return
        for s, e, local, domain in addresses(text):
            if canonical_local(local) == self.local and canonical_domain(domain) == self.domain:
                yield s, e

    def find_words(self, view: str, ws: list[Word], records: str) -> Iterator[tuple[int, int]]:
        """4.3 (spelt out) and 4.4 (digests) among the words of `view` (records: the structure view's)."""
        if not self.valid:
            return
        for w in ws:
            if w.canon in self.digests:
                yield w.start, w.end
        seq = self.spelt
        if not seq or any(not p for p in seq):
            return
        for i, w in enumerate(ws):
            if w.canon != seq[0]:
                continue
            k, j = 1, i + 1
            last = w
            while k < len(seq) and j < len(ws):
                if ws[j].canon == seq[k]:
                    last = ws[j]
                    k, j = k + 1, j + 1
                elif ws[j].canon == "dot" and j + 1 < len(ws) and ws[j + 1].canon == seq[k] and k > 0:
                    j += 1
                else:
                    break
            if k < len(seq) or not same_record(records, w.start, last.end):
                continue
            if w.start > 0 and view[w.start - 1] in ".+@-":
                continue
            if j < len(ws) and ws[j].canon == "dot" and same_record(records, last.end, ws[j].start):
                continue
            after = last.end
            if after + 1 < len(view) and view[after] == "." and kind(view[after + 1]) in (WORD, CHAR):
                continue
            yield w.start, last.end
