"""Names, as docs/matching.md section 3 defines them (the erasing side's reading)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from erasure.matching.words import Word, canonical_word, capitalised, one_letter, same_record, words

EVERYDAY_ZIPF = 3.5
"""3.6: a name word at least this frequent in English is an everyday word."""
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "Ae", "Ö": "Oe", "Ü": "Ue"})
_CONTRACT = re.compile(r"(?<=[^aeiou])(ae|oe|ue)")


def variants(source: str, canon: str) -> frozenset[str]:
    """3.1: a part's canonical form and its umlaut variants."""
    out = {canon, canonical_word(source.translate(_UMLAUTS), False), _CONTRACT.sub(lambda m: m.group(1)[0], canon)}
    return frozenset(v for v in out if v)


def everyday(canon: str) -> bool:
    """3.6."""
    return zipf(canon) >= EVERYDAY_ZIPF


def zipf(word: str) -> float:
    """The word's Zipf frequency in English (wordfreq, imported on first use: 0.1 s that a command
    which matches nothing, `erasure sla`, does not pay)."""
    from wordfreq import zipf_frequency

    return float(zipf_frequency(word, "en"))


def _ends_sentence(view: str, source: str, before: Word, after: Word) -> bool:
    """3.3: between two words a sentence ends (`.`, `!` or `?`, then white space, after a word that is no
    initial): `April. May we ...` is no name."""
    gap = view[before.end : after.start]
    return len(gap) > 1 and gap[0] in ".!?" and gap[1].isspace() and not one_letter(source[before.start : before.end])


def _any(w: Word, forms: frozenset[str]) -> bool:
    return w.canon in forms or (bool(w.bare) and w.bare in forms)


@dataclass(frozen=True)
class NameHit:
    """A name's span in the view, and whether it is ambiguous (3.6)."""

    start: int
    end: int
    ambiguous: bool


class Name:
    """One request name, ready to match (3.1)."""

    def __init__(self, name: str) -> None:
        parts = words(name)
        self.empty = not parts or any(not p.canon for p in parts)
        self.character = any(p.char_script for p in parts)
        if self.character:
            # 3.4: groups are the runs of parts the request wrote without a space between them
            groups: list[list[str]] = []
            prev_end = -1
            for p in parts:
                if groups and name[prev_end : p.start].strip() == "" and prev_end == p.start:
                    groups[-1].append(p.canon)
                else:
                    groups.append([p.canon])
                prev_end = p.end
            seqs = {tuple(c for g in groups for c in g)}
            for i in range(len(groups) - 1):
                swapped = [*groups[:i], groups[i + 1], groups[i], *groups[i + 2 :]]
                seqs.add(tuple(c for g in swapped for c in g))
            self.sequences = sorted(seqs)
            return
        forms = [variants(name[p.start : p.end], p.canon) for p in parts]
        self.given, self.family = forms[0], forms[-1]
        self.middles: frozenset[str] = frozenset().union(*forms[1:-1]) if len(forms) > 2 else frozenset()
        self.single = len(parts) == 1
        self.all_everyday = all(everyday(p.canon) for p in parts)
        self.parts = frozenset().union(*forms)

    def find(self, view: str, source: str, ws: list[Word], records: str) -> Iterator[NameHit]:
        """Every hit of this name among the words `ws` of `view` (a view of `source`, same offsets);
        `records` is the structure view, whose record boundaries hold in every view (1.4)."""
        if self.empty:
            return
        if self.character:
            yield from self._characters(view, ws, records)
            return
        if self.single:
            for w in ws:
                if _any(w, self.given):
                    yield NameHit(w.start, w.end, self.all_everyday)
            return
        for i, w in enumerate(ws):
            first_given = _any(w, self.given)
            first_family = _any(w, self.family)
            if not (first_given or first_family):
                continue
            crossed = False  # a sentence ended between them: still a hit, but ambiguous (3.3)
            for j in range(i + 1, min(len(ws), i + 4)):
                x = ws[j]
                if not same_record(records, w.end, x.start):
                    break
                crossed = crossed or _ends_sentence(view, source, ws[j - 1], x)
                pair = (first_given and _any(x, self.family)) or (first_family and _any(x, self.given))
                if pair and all(self._between(source, b) for b in ws[i + 1 : j]):
                    ambiguous = crossed or (
                        self.all_everyday
                        and not (capitalised(source[w.start : w.end]) and capitalised(source[x.start : x.end]))
                    )
                    yield NameHit(w.start, x.end, ambiguous)

    def _between(self, source: str, w: Word) -> bool:
        text = source[w.start : w.end]
        return _any(w, self.middles) or one_letter(text) or capitalised(text)

    def _characters(self, view: str, ws: list[Word], records: str) -> Iterator[NameHit]:
        for seq in self.sequences:
            n = len(seq)
            for i in range(len(ws) - n + 1):
                if all(ws[i + k].canon == seq[k] for k in range(n)) and all(
                    view[ws[i + k].end : ws[i + k + 1].start].strip() == ""
                    and same_record(records, ws[i + k].end, ws[i + k + 1].start)
                    for k in range(n - 1)
                ):
                    yield NameHit(ws[i].start, ws[i + n - 1].end, False)
