"""A name written with Cyrillic or Greek letters that the rule transliterates to it is found by the decoded
views, as the rule finds it (docs/matching.md: name tokens are read transliterated, so `Оrtiz` with a
Cyrillic `О`, `Ортиз` and `Ορτιζ` are `Ortiz`).

Found by the lead on 2026-12-06: the rule read `Dana Оrtiz` as the subject, the views read the file only
around triggers, and the name's trigger is its last word in Latin letters (or with Latin diacritics):
no window was read, and the verification said nothing was left. The class: any of the last word's
letters (or all) written as a Cyrillic or Greek letter that transliterates to it, in either case, in a
plain file or a SQLite value. The oracle is the planting, by a table written here; the control writes
one letter as a Cyrillic or Greek letter that transliterates to another letter."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from erasure.subject import Subject
from tests import budget
from tests.views_plant import found_in_views

SUBJECT = Subject(id="usr-cy-0001", name="Dana Ortiz")
CYRILLIC = dict(zip("abvgdeziklmnoprstuf", "абвгдезиклмнопрстуф", strict=True))
GREEK = dict(zip("avgdeziklmnxoprstf", "αβγδεζικλμνξοπρστφ", strict=True))
WRONG = {"o": "п", "r": "с", "t": "д", "i": "л", "z": "к"}
"""A Cyrillic letter that transliterates to another letter than the key."""


def _written(word: str, at: list[int], script: dict[str, str]) -> str:
    out = list(word)
    for i in at:
        c = out[i].lower()
        if c in script:
            out[i] = script[c].upper() if out[i].isupper() else script[c]
    return "".join(out)


def _found(tmp: Path, text: str, where: str) -> bool:
    return found_in_views(tmp, text, where, SUBJECT, "name")


@settings(max_examples=budget.examples(120), deadline=None)
@given(
    at=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=5),
    script=st.sampled_from(["cyrillic", "greek"]),
    upper=st.booleans(),
    where=st.sampled_from(["file", "sqlite"]),
)
@example(at=[0], script="cyrillic", upper=False, where="file")  # Dana Оrtiz
@example(at=[0, 1, 2, 3, 4], script="greek", upper=False, where="sqlite")  # Dana Ορτιζ
def test_a_name_with_letters_of_another_script_is_found(
    tmp_path_factory: object, at: list[int], script: str, upper: bool, where: str
) -> None:
    table = CYRILLIC if script == "cyrillic" else GREEK
    family = "ORTIZ" if upper else "Ortiz"
    text = f"Dana {_written(family, at, table)}"
    tmp = Path(str(tmp_path_factory.mktemp("scripts")))  # type: ignore[attr-defined]
    assert _found(tmp, text, where), (script, where, text)
    # The control: one letter written as a letter of another script that transliterates to another one.
    i = at[0]
    wrong = family[:i] + WRONG[family[i].lower()] + family[i + 1 :]
    assert not _found(tmp, f"Dana {_written(wrong, at[1:], table)}", where), (script, where, wrong)
