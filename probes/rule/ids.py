"""Ids: docs/matching.md section 6."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from probes.rule.text import ViewText
from probes.rule.words import canonical_words

WORD_ZIPF = 3.0  # 6.2 (an everyday word, 3.5, is above it too)


@dataclass(frozen=True)
class IdPattern:
    """One request id, compiled."""

    canon: str  # 6.1: its words' canonical forms joined
    ambiguous: bool  # 6.2
    spaced: bool = False  # 6.1b applies: the canonical form holds a letter and a digit


def compile_id(value: str) -> IdPattern | None:
    """6.1/6.2; None when the id has no word."""
    from wordfreq import zipf_frequency  # imported on first use: 0.2 s

    canon = "".join(canonical_words(value))
    if not canon:
        return None
    # 6.2 "an id of digits only": read on the canonical form (so `4471-0093` and `٤٥` are digits only).
    digits_only = all("0" <= c <= "9" for c in canon)
    spaced = any(c.isdigit() for c in canon) and any(c.isalpha() for c in canon)
    return IdPattern(canon, digits_only or zipf_frequency(canon, "en") >= WORD_ZIPF, spaced)


def find_ids(p: IdPattern, t: ViewText) -> Iterator[tuple[int, int]]:
    """6.1: every word whose canonical form (either, 2.6) equals the id's."""
    for i in t.where((p.canon,), possessives=True):  # 2.6: section 6 compares with both forms
        yield t.starts[i], t.ends[i]
    if p.spaced:
        yield from _spaced(p.canon, t)


_NOT_A_SEPARATOR = frozenset("\n\r\x1e")  # 6.1b: nor a line break nor U+001E (a word character never lies in a gap)


def _spaced(canon: str, t: ViewText) -> Iterator[tuple[int, int]]:
    """6.1b: runs of two or more consecutive words, one separator character between each, whose canonical
    forms (the first form: 6.1b speaks of canonical forms joined) spell the id."""
    forms = t.canon
    for first in range(len(forms)):
        if not forms[first] or not canon.startswith(forms[first]) or forms[first] == canon:
            continue
        spelt, last = forms[first], first
        while len(spelt) < len(canon) and last + 1 < len(forms):
            gap = t.view[t.ends[last] : t.starts[last + 1]]
            if len(gap) != 1 or gap in _NOT_A_SEPARATOR:
                break
            last += 1
            spelt += forms[last]
            if not canon.startswith(spelt):
                break
        if spelt == canon and last > first:
            yield t.starts[first], t.ends[last]
