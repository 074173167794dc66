"""Names: docs/matching.md section 3."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from probes.rule.text import ViewText
from probes.rule.words import canonical, in_char_script, is_capitalised, is_initial, word_re

EVERYDAY_ZIPF = 3.5  # 3.6
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "Ae", "Ö": "Oe", "Ü": "Ue"})
# 3.1 "after a consonant": the canonical form is ASCII here; a consonant is read as an ASCII letter other
# than a e i o u (so `y` counts as a consonant).
_CONTRACT_RE = re.compile(r"(?<=[b-df-hj-np-tv-z])(ae|oe|ue)")


def forms(part: str) -> frozenset[str]:
    """3.1: a part's canonical form and its two variants (`ä ö ü` written `ae oe ue`; `ae oe ue` after a
    consonant contracted). The umlauts are looked for in the part's NFC form, so a decomposed `ü` counts.

    Only the request's part has variants; a text word is compared in its canonical form. So a request
    `Muller` (no `ü`, no `ue`) meets `Müller` and `Muller` but not `Mueller`: 3.1's "so Müller, Mueller
    and Muller meet" holds for requests `Müller` and `Mueller` only (a question on docs/matching.md)."""
    canon = canonical(part)
    written = canonical(unicodedata.normalize("NFC", part).translate(_UMLAUTS))
    contracted = _CONTRACT_RE.sub(lambda m: m.group()[0], canon)
    return frozenset(f for f in (canon, written, contracted) if f)  # 2.6: an empty form matches nothing


def everyday(canon: str) -> bool:
    """3.6: a Zipf frequency of at least 3.5 in English."""
    from wordfreq import zipf_frequency  # imported on first use: 0.2 s

    return zipf_frequency(canon, "en") >= EVERYDAY_ZIPF


@dataclass(frozen=True)
class NamePattern:
    """One request name, compiled."""

    parts: tuple[frozenset[str], ...]  # each word's forms, in the request's order
    character: bool  # 3.1 a character name (at least one word in a character-script)
    sequences: tuple[tuple[frozenset[str], ...], ...]  # 3.4: the orders that match
    all_everyday: bool  # 3.6

    @property
    def given(self) -> frozenset[str]:
        """The given name's forms (3.1: the first word)."""
        return self.parts[0]

    @property
    def family(self) -> frozenset[str]:
        """The family name's forms (3.1: the last word)."""
        return self.parts[-1]

    @property
    def middle(self) -> frozenset[str]:
        """Every middle name's forms (3.1: the words between)."""
        return frozenset().union(*self.parts[1:-1])

    def lookups(self) -> frozenset[str]:
        """The canonical forms `find_names` looks up in a view's index."""
        if self.character:
            return frozenset().union(*(seq[0] for seq in self.sequences))
        return self.given | self.family

    def may_occur(self, skeleton: str, has_char_script: bool) -> bool:
        """Prefilter: could a hit exist in a text with this skeleton (see `words.skeleton`)?"""
        if self.character:
            return has_char_script
        ends = (self.given, self.family)
        return all(any(f in skeleton for f in fs) for fs in ends)


def compile_name(name: str) -> NamePattern | None:
    """Compile a request's name (3.1); None when it has no word."""
    ms = list(word_re(name).finditer(name))
    if not ms:
        return None
    parts = tuple(forms(m.group()) for m in ms)
    character = any(in_char_script(m.group()[0]) for m in ms)
    sequences: list[tuple[frozenset[str], ...]] = [parts]
    if character and len(ms) > 1:
        # 3.4 "where the request wrote a space between two parts, the order with those parts swapped
        # matches too". Read: the parts are the request's space-separated groups of words; each place
        # with white space between two groups gives one more order, with those two groups swapped.
        groups: list[list[frozenset[str]]] = [[parts[0]]]
        for k in range(1, len(ms)):
            gap = name[ms[k - 1].end() : ms[k].start()]
            if any(c.isspace() for c in gap):
                groups.append([])
            groups[-1].append(parts[k])
        for g in range(len(groups) - 1):
            swapped = [*groups[:g], groups[g + 1], groups[g], *groups[g + 2 :]]
            sequences.append(tuple(p for grp in swapped for p in grp))
    # 3.6: character names are never ambiguous by this rule
    all_everyday = not character and all(everyday(canonical(m.group())) for m in ms)
    return NamePattern(parts, character, tuple(dict.fromkeys(sequences)), all_everyday)


def _ambiguous(p: NamePattern, t: ViewText, matched: list[int]) -> bool:
    # 3.6: a one-word everyday name is always ambiguous; a longer name of everyday words is ambiguous
    # unless both matched words (given and family) are capitalised; a character name never is.
    if not p.all_everyday:
        return False
    if len(p.parts) == 1:
        return True
    return not all(is_capitalised(t.texts[i]) for i in matched)


def _sentence_end(t: ViewText, k: int) -> bool:
    """3.3: a sentence ends after word `k`: `.`, `!` or `?` then white space, the word not an initial."""
    gap = t.view[t.ends[k] : t.starts[k + 1]]
    return len(gap) > 1 and gap[0] in ".!?" and gap[1].isspace() and not is_initial(t.texts[k])


def find_names(p: NamePattern, t: ViewText) -> Iterator[tuple[int, int, bool]]:
    """Every (start, end, ambiguous) hit of the name in the view. A text word equals a part in either of
    its canonical forms (2.6: a possessive also reads without its `'s`)."""
    n = len(t.texts)
    if p.character:
        # 3.4 (a one-word character name is the one-word case of it, as 3.2)
        for seq in p.sequences:
            size = len(seq)
            for i in t.where(seq[0], possessives=True):
                if i + size > n:
                    continue
                if all(t.equals(i + k, seq[k]) and t.adjacent(i + k - 1, i + k) for k in range(1, size)):
                    yield t.starts[i], t.ends[i + size - 1], False
        return
    if len(p.parts) == 1:
        # 3.2
        for i in t.where(p.parts[0], possessives=True):
            yield t.starts[i], t.ends[i], _ambiguous(p, t, [i])
        return
    # 3.3: every pair (i, j), i < j, of a given and a family word (either order) in one record, with at
    # most two words between, each a middle name (any variant), an initial or a capitalised word.
    given, family, middle = p.given, p.family, p.middle
    for i in t.where(given | family, possessives=True):
        gi, fi = t.equals(i, given), t.equals(i, family)
        for j in range(i + 1, min(i + 4, n)):
            if not ((gi and t.equals(j, family)) or (fi and t.equals(j, given))):
                continue
            if not all(
                t.equals(k, middle) or is_initial(t.texts[k]) or is_capitalised(t.texts[k]) for k in range(i + 1, j)
            ):
                continue
            if not t.same_record(i, j):
                continue
            # 3.3: across a sentence end the pair is still a hit, but ambiguous
            crossed = any(_sentence_end(t, k) for k in range(i, j))
            yield t.starts[i], t.ends[j], crossed or _ambiguous(p, t, [i, j])
