"""Text read from an image by OCR (docs/matching.md 1.5), the probes' implementation.

OCR reads characters that look alike one for another (`clientO23` for `client023`, `1ee` for `lee`). Text
that came from OCR is therefore matched in two more views, each the text with every character of the
rule's table folded to its representative, character for character (offsets stay the text's own),
against the person's identifiers folded by the same table: the *letter* view for ids, emails and names,
the *digit* view for ids and phones. The hits are the union with the unfolded text's; a span found
unambiguous in any view is unambiguous."""

from __future__ import annotations

import re
from collections.abc import Callable

from probes.rule import Found, Person, Rule

LETTER_VIEW = str.maketrans("01i2568q9IQ", "olizsbbggLG")
"""1.5 letter view: a digit becomes the letter it is read for; `i` and `I` become `l` and `L`, `q` and
`Q` become `g` and `G`, so that letter case still does not matter."""
DIGIT_VIEW = str.maketrans("OoQDlIiZzSsbGBgq", "0000111225566899")
"""1.5 digit view: a letter becomes the digit it is read for."""
_BARS = re.compile(r"(?<=[^\W_])\|+|\|+(?=[^\W_])")
"""1.5: a run of `|` touching a letter or digit is read for `l` (letter view) or `1` (digit view); one
between spaces is a table's rule."""


def letter_view(text: str) -> str:
    """`text` in the letter view (1.5), character for character."""
    return _BARS.sub(lambda m: "l" * len(m[0]), text).translate(LETTER_VIEW)


def digit_view(text: str) -> str:
    """`text` in the digit view (1.5), character for character."""
    return _BARS.sub(lambda m: "1" * len(m[0]), text).translate(DIGIT_VIEW)


def _fold(values: tuple[str, ...], view: Callable[[str], str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(view(v) for v in values))


class OcrRule:
    """The rule for text read by OCR (1.5): the person's rule, and the two folded views'."""

    def __init__(self, person: Person) -> None:
        """Compile `person` as it is, letter-folded (ids, emails, names) and digit-folded (ids, phones)."""
        self.rule = Rule(person)
        self.letters = Rule(
            Person(
                ids=_fold(person.ids, letter_view),
                emails=_fold(person.emails, letter_view),
                names=_fold(person.names, letter_view),
            )
        )
        self.digits = Rule(Person(ids=_fold(person.ids, digit_view), phones=_fold(person.phones, digit_view)))

    def find(self, text: str) -> list[Found]:
        """Every hit in OCR text `text`: `Rule.find` of the text, of its letter view with the letter-folded
        person, and of its digit view with the digit-folded person; one per (kind, start, end), sorted."""
        hits: dict[tuple[str, int, int], bool] = {}
        for rule, view in (
            (self.rule, text),
            (self.letters, letter_view(text)),
            (self.digits, digit_view(text)),
        ):
            for f in rule.find(view):
                key = (f.kind, f.start, f.end)
                hits[key] = hits.get(key, True) and f.ambiguous
        return sorted(Found(kind, s, e, amb) for (kind, s, e), amb in hits.items())
