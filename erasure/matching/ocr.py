"""Text read from an image by OCR (docs/matching.md 1.5), the erasing side's implementation.

Look-alike characters are one for OCR (`O` and `0`, `l`, `I` and `1`, `S` and `5`...). OCR text is read
in two folded views besides itself, each against the subject's identifiers folded by the same table: the
letter view (ids, emails, names) and the digit view (ids, phones). Every fold is one character for one,
so a hit's span is the text's own."""

from __future__ import annotations

import re

from erasure.matching import Finder, Hit, Who

_LETTER_OF = {"o": "0", "l": "1i", "z": "2", "s": "5", "b": "68", "g": "9q", "L": "I", "G": "Q"}
"""1.5 letter view: representative, and the characters that become it."""
_DIGIT_OF = {"0": "OoQD", "1": "lIi", "2": "Zz", "5": "Ss", "6": "bG", "8": "B", "9": "gq"}
"""1.5 digit view: representative, and the characters that become it."""
_RULE_OR_CHARACTER = re.compile(r"\|+(?=[^\W_])|(?<=[^\W_])\|+")
"""A run of `|` next to a letter or digit is characters OCR read (`l`, `1`); between spaces, a table's
rule."""


def _table(classes: dict[str, str]) -> dict[int, str]:
    return {ord(c): rep for rep, chars in classes.items() for c in chars}


LETTERS = _table(_LETTER_OF)
DIGITS = _table(_DIGIT_OF)


def fold(text: str, table: dict[int, str]) -> str:
    """`text` in the view of `table` (`LETTERS` or `DIGITS`), one character for one."""
    bar = "l" if table is LETTERS else "1"
    return _RULE_OR_CHARACTER.sub(lambda m: bar * len(m.group()), text).translate(table)


def _folded(values: tuple[str, ...], table: dict[int, str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(fold(v, table) for v in values))


class OcrFinder:
    """One subject's identifiers compiled for OCR text (1.5)."""

    def __init__(self, who: Who) -> None:
        self.views = (
            (Finder(who), None),
            (Finder(Who(ids=_folded(who.ids, LETTERS), emails=_folded(who.emails, LETTERS),
                        names=_folded(who.names, LETTERS))), LETTERS),
            (Finder(Who(ids=_folded(who.ids, DIGITS), phones=_folded(who.phones, DIGITS))), DIGITS),
        )  # fmt: skip

    def hits(self, text: str) -> list[Hit]:
        """Every hit in OCR text `text`, in it and in its two folded views; one per (kind, start, end)
        (unambiguous where any view says so), sorted."""
        found: dict[tuple[str, int, int], bool] = {}
        for finder, table in self.views:
            for h in finder.hits(text if table is None else fold(text, table)):
                key = (h.kind, h.start, h.end)
                found[key] = found.get(key, True) and h.ambiguous
        return sorted(Hit(k, s, e, a) for (k, s, e), a in found.items())
