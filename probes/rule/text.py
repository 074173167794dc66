"""One view of a text, cut into words (docs/matching.md 2.5) with records (1.4), shared by every section."""

from __future__ import annotations

import re
from functools import cached_property

from probes.rule import views
from probes.rule.words import APOSTROPHES, ascii_canonical, canonical, possessive, word_spans

# 3.4 "only white space or nothing between them, in the source": read on the source characters, so an
# ignored character (2.4) between two words of a character name breaks the sequence. (A question on the
# document: 2.4 says Cf characters are skipped; 3.4 says "in the source". The zero-width view of 1.3.3
# turns U+200B, U+2060 and U+FEFF into spaces, so those still match there; a soft hyphen does not.)
_GAP_RE = re.compile(r"\s*")


class ViewText:
    """A view (1.3.1 raw, 1.3.2 structure, or 1.3.3 zero-width) of one text: its words, their canonical
    forms, its records."""

    def __init__(
        self, view: str, starts: list[int], ends: list[int], texts: list[str], canon: list[str] | None = None
    ) -> None:
        self.view = view
        self.starts = starts
        self.ends = ends
        self.texts = texts
        if canon is not None:
            self.__dict__["canon"] = canon  # the cached_property's slot

    @classmethod
    def cut(cls, view: str) -> ViewText:
        """Cut a view into its words."""
        spans = word_spans(view)
        starts = [s for s, _ in spans]
        ends = [e for _, e in spans]
        return cls(view, starts, ends, [view[s:e] for s, e in spans])

    def restrict(self, view: str) -> ViewText:
        """The same text's structure view, from the raw view's words: blanking (1.3.2) only turns whole
        runs that begin and end on separators (`<`...`>`, `"`...`:`, brackets) into spaces or U+001E, so
        the structure view's words are exactly the raw words whose characters it did not blank (a word
        is blanked whole or not at all; its first character tells)."""
        keep = [i for i, s in enumerate(self.starts) if view[s] == self.view[s]]
        canon = self.canon
        return ViewText(
            view,
            [self.starts[i] for i in keep],
            [self.ends[i] for i in keep],
            [self.texts[i] for i in keep],
            [canon[i] for i in keep],
        )

    @cached_property
    def canon(self) -> list[str]:
        """Each word's canonical form (2.6).

        In bulk: for an ASCII word the canonical form is the word without `'`, the grave accent, `-` and
        `_`, lower-cased (NFKC and anyascii leave ASCII as it is; case folding ASCII is lower-casing), so
        every word is done by a few string operations on the words joined, and the non-ASCII words are
        then done one by one."""
        joined = "\x00".join(self.texts)
        if not self.texts:
            return []
        canon = ascii_canonical(joined).split("\x00")
        if not joined.isascii():
            for i, t in enumerate(self.texts):
                if not t.isascii():
                    canon[i] = canonical(t)
        return canon

    targets: frozenset[str] | None = None  # the canonical forms `where` is asked for (None: all)

    @cached_property
    def second(self) -> list[str | None]:
        """Each word's second canonical form (2.6: a possessive's, without its apostrophe and `s`)."""
        out: list[str | None] = [None] * len(self.texts)
        for i, t in enumerate(self.texts):
            # a possessive ends in `s` (a word ends on a word character) and holds an apostrophe
            if t[-1] in "sS" and len(t) > 2 and any(a in t for a in APOSTROPHES):
                out[i] = possessive(t)
        return out

    def _index(self, forms: list[str | None]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        targets = self.targets
        for i, c in enumerate(forms):
            if c and (targets is None or c in targets):
                out.setdefault(c, []).append(i)
        return out

    @cached_property
    def index(self) -> dict[str, list[int]]:
        """The indices of the words of each (first) canonical form of `targets`, in order."""
        return self._index(list(self.canon))

    @cached_property
    def index2(self) -> dict[str, list[int]]:
        """The indices of the words of each second (possessive) canonical form of `targets`, in order."""
        return self._index(self.second)

    def where(self, forms: frozenset[str] | set[str] | tuple[str, ...], possessives: bool = False) -> list[int]:
        """The indices of the words whose canonical form is one of `forms` (with `possessives`, also the
        words whose second form is: sections 3 and 6), in order, each once. An empty form matches
        nothing (2.6)."""
        assert self.targets is None or self.targets.issuperset(forms)
        found = {i for f in forms if f for i in self.index.get(f, ())}
        if possessives:
            found.update(i for f in forms if f for i in self.index2.get(f, ()))
        return sorted(found)

    def equals(self, i: int, forms: frozenset[str]) -> bool:
        """Whether word `i` equals one of `forms` in either of its canonical forms (sections 3 and 6)."""
        c = self.canon[i]
        if c and c in forms:
            return True
        c2 = self.second[i]
        return c2 is not None and c2 in forms

    @cached_property
    def bounds(self) -> list[int]:
        """The record boundaries of the view (1.4)."""
        return views.record_bounds(self.view)

    def record(self, i: int) -> int:
        """The record index of word `i`."""
        return views.record_of(self.bounds, self.starts[i])

    def same_record(self, i: int, j: int) -> bool:
        """Whether words `i` and `j` are in one record (1.4)."""
        if not self.bounds:
            return True
        return self.record(i) == self.record(j)

    def adjacent(self, i: int, j: int) -> bool:
        """3.4: only white space, or nothing, between word `i`'s end and word `j`'s start in the view, and no
        record boundary between them."""
        m = _GAP_RE.match(self.view, self.ends[i], self.starts[j])
        return m is not None and m.end() == self.starts[j] and self.same_record(i, j)
