"""Ids: docs/matching.md section 6."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from probes.rule.text import ViewText
from probes.rule.words import canonical_words

WORD_ZIPF = 3.0  # 6.2 (an everyday word, 4.5, is above it too)


@dataclass(frozen=True)
class IdPattern:
    """One request id, compiled."""

    canon: str  # 6.1: its words' canonical forms joined
    ambiguous: bool  # 6.2


def compile_id(value: str) -> IdPattern | None:
    """6.1/6.2; None when the id has no word."""
    from wordfreq import zipf_frequency  # imported on first use: 0.2 s

    canon = "".join(canonical_words(value))
    if not canon:
        return None
    # 6.2 "an id of digits only": read on the canonical form (so `4471-0093` and `٤٥` are digits only).
    digits_only = all("0" <= c <= "9" for c in canon)
    return IdPattern(canon, digits_only or zipf_frequency(canon, "en") >= WORD_ZIPF)


def find_ids(p: IdPattern, t: ViewText) -> Iterator[tuple[int, int]]:
    """6.1: every word whose canonical form (either, 2.6) equals the id's."""
    for i in t.where((p.canon,), possessives=True):  # 2.6: section 6 compares with both forms
        yield t.starts[i], t.ends[i]
