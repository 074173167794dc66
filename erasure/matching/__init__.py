"""The erasing side's implementation of docs/matching.md (rule version `RULE_VERSION`).

`Finder(who).hits(text)` gives every hit of one subject in a text read in the raw, structure and zero-width
views (1.3.1-1.3.3). The probes implement the same document in their own code (`probes.rule`), and
tests/probes/test_matching_differential.py holds the two to the same spans. Escapes (1.3.3) are the
caller's: `erasure.spellings` decodes them with a map back to the source and asks this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from erasure.matching.addresses import Email
from erasure.matching.names import Name, everyday, zipf
from erasure.matching.phones import Phone
from erasure.matching.words import RS, Word, canonical_word, structure_view, views, words

RULE_VERSION = "6"
ID_WORD_ZIPF = 3.0
"""6.2: an id that is a word at least this frequent in English is ambiguous."""


@dataclass(frozen=True)
class Who:
    """A subject's identifiers as a request gives them (1.1)."""

    ids: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    phones: tuple[str, ...] = ()


@dataclass(frozen=True, order=True)
class Hit:
    """One hit (7.1): kind (`id`, `email`, `name`, `phone`), span in the text, ambiguous or not."""

    kind: str
    start: int
    end: int
    ambiguous: bool = False


class Finder:
    """One subject's identifiers compiled for matching (docs/matching.md)."""

    def __init__(self, who: Who) -> None:
        self.who = who
        self.names = [n for n in (Name(v) for v in who.names) if not n.empty]
        self.emails = [e for e in (Email(v) for v in who.emails) if e.valid]
        self.phones = [p for p in (Phone(v) for v in who.phones) if p.e164]
        self.ids: list[tuple[str, bool]] = []
        for v in who.ids:
            joined = "".join(w.canon for w in words(v))
            if joined:
                ambiguous = joined.isdigit() or everyday(joined) or zipf(joined) >= ID_WORD_ZIPF
                self.ids.append((joined, ambiguous))
        self.unparsed_phones = len(who.phones) - len(self.phones)

    @property
    def empty(self) -> bool:
        """No identifier can match anything."""
        return not (self.names or self.emails or self.phones or self.ids)

    def hits(self, text: str) -> list[Hit]:
        """Every hit in `text` (raw, structure and zero-width views), one per (kind, start, end), sorted."""
        found: dict[tuple[str, int, int], bool] = {}

        def add(kind: str, s: int, e: int, ambiguous: bool = False) -> None:
            key = (kind, s, e)
            found[key] = found.get(key, True) and ambiguous

        for e in self.emails:
            for s, t in e.find_addresses(text):
                add("email", s, t)
        for p in self.phones:
            for s, t in p.find(text):
                add("phone", s, t)
        records = structure_view(text)  # 1.4: its record boundaries hold in every view
        for view in views(text):
            ws = words(view)
            if not ws:
                continue
            for n in self.names:
                for h in n.find(view, text, ws, records):
                    add("name", h.start, h.end, h.ambiguous)
            for e in self.emails:
                for s, t in e.find_words(view, ws, records):
                    add("email", s, t)
            for joined, ambiguous in self.ids:
                for s, t in _id_hits(view, ws, joined):
                    add("id", s, t, ambiguous)
        return sorted(Hit(k, s, e, a) for (k, s, e), a in found.items())


def _id_hits(view: str, ws: list[Word], joined: str) -> list[tuple[int, int]]:
    """6.1 (one word) and 6.1b (consecutive words with one separator between each)."""
    out = [(w.start, w.end) for w in ws if joined in w.forms()]
    if not (any(c.isdigit() for c in joined) and any(c.isalpha() for c in joined)):
        return out
    for i, w in enumerate(ws):
        if not joined.startswith(w.canon) or w.canon == joined or not w.canon:
            continue
        acc, j = w.canon, i
        while j + 1 < len(ws) and len(acc) < len(joined):
            gap = view[ws[j].end : ws[j + 1].start]
            if len(gap) != 1 or gap in ("\n", "\r", RS):
                break
            j += 1
            acc += ws[j].canon
            if not joined.startswith(acc):
                break
        if acc == joined and j > i:
            out.append((w.start, ws[j].end))
    return out


_JOINED = "[-'`_]*"


def _joinable(canon: str) -> str:
    """A regex an ASCII text's word with canonical form `canon` must match (joiners between its letters)."""
    return _JOINED.join(re.escape(c) for c in canon)


def ascii_triggers(finder: Finder) -> list[str]:
    """Regexes (matched without regard to letter case) one of which every ASCII text with a hit of
    `finder`'s subject matches: a prefilter's, never the rule itself. Empty when only a non-ASCII text
    can hold a hit; `[""]`-like catch-alls are never returned (an empty name part matches nothing)."""
    out: list[str] = []
    for joined, _ambiguous in finder.ids:  # 6.1b: one separator between any two of its words
        out.append("[^A-Za-z0-9]*".join(re.escape(c) for c in joined))
    for n in finder.names:
        if n.character:
            continue
        part = max((n.given, n.family), key=lambda forms: min(len(f) for f in forms))
        out += [_joinable(f) for f in sorted(part)]
    for e in finder.emails:
        out.append(re.escape(e.local) if e.local.isascii() else "")
        if e.spelt and e.spelt[0]:
            out.append(_joinable(e.spelt[0]))
        out += sorted(e.digests)
    for p in finder.phones:
        out.append(r"\D{0,8}".join(p.nsn))
    return [t for t in dict.fromkeys(out) if t]


__all__ = ["RULE_VERSION", "Finder", "Hit", "Who", "ascii_triggers", "canonical_word"]
