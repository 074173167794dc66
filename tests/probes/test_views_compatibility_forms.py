"""An identifier with one of its letters or digits written in a compatibility form (fullwidth `Ｑ`, or a
mathematical alphanumeric `𝐐`) is found by the decoded views, as the rule finds it (NFKC, docs/matching.md
2.1).

Found by the lead on 2026-12-06 comparing the erasing side's reading with the views on generated
spellings: `Johann Ｑuist`, `+44 20 ７946 0123` and `ada.pastｅd@mail.example` named the subject to both
sides' rules and to nothing in the views, whose fullwidth trigger wanted three such characters in a row,
and whose identifier triggers are ASCII. The class: any of an identifier's ASCII letters or digits (one,
several, or all) written fullwidth or as a mathematical bold, italic or double-struck letter or digit,
in a plain file or a SQLite value. The oracle is the planting (its table is checked against NFKC here);
the control writes the same form of another character.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from erasure.subject import Subject
from tests import budget
from tests.views_plant import found_in_views

SUBJECT = Subject(id="usr-jd-4471", email="ada.pasted@mail.example", name="Johann Quist", phone="+44 20 7946 0123")
MATH = {"bold": (0x1D400, 0x1D7CE), "italic": (0x1D434, None), "double-struck": (0x1D538, 0x1D7D8)}
"""Capital A and digit zero of each mathematical alphabet (lower case follows 26 after the capitals)."""


def form(c: str, style: str) -> str:
    """`c` (an ASCII letter or digit) in `style`; `c` itself where the style has no such character."""
    if style == "fullwidth":
        out = chr(ord(c) + 0xFEE0)
    elif c.isdigit():
        zero = MATH[style][1]
        out = c if zero is None else chr(zero + int(c))
    else:
        out = chr(MATH[style][0] + (ord(c) - 65 if c.isupper() else 26 + ord(c) - 97))
    if out != c and unicodedata.normalize("NFKC", out) != c:  # a reserved hole of the alphabet (italic h)
        return c
    return out


def _written(text: str, at: list[int], style: str) -> str:
    return "".join(form(c, style) if i in at and c.isascii() and c.isalnum() else c for i, c in enumerate(text))


def _found(tmp: Path, text: str, where: str, kind: str) -> bool:
    return found_in_views(tmp, text, where, SUBJECT, kind)


@settings(max_examples=budget.examples(150), deadline=None)
@given(
    kind=st.sampled_from(["name", "email", "phone", "id"]),
    style=st.sampled_from(["fullwidth", *MATH]),
    at=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=4),
    every=st.booleans(),
    where=st.sampled_from(["file", "sqlite"]),
)
@example(kind="name", style="fullwidth", at=[7], every=False, where="file")  # Johann Ｑuist
@example(kind="phone", style="fullwidth", at=[7], every=False, where="sqlite")  # +44 20 ７946 0123
@example(kind="name", style="bold", at=[0], every=True, where="file")
def test_an_identifier_in_compatibility_forms_is_found(
    tmp_path_factory: object, kind: str, style: str, at: list[int], every: bool, where: str
) -> None:
    written = {"name": SUBJECT.name, "email": SUBJECT.email, "phone": SUBJECT.phone, "id": SUBJECT.id}[kind]
    assert written
    positions = list(range(len(written))) if every else sorted({i % len(written) for i in at})
    text = _written(written, positions, style)
    assert unicodedata.normalize("NFKC", text) == written
    tmp = Path(str(tmp_path_factory.mktemp("compat")))  # type: ignore[attr-defined]
    assert _found(tmp, text, where, kind), (kind, style, where, text)
    # The control: the first written position's character replaced by another before the forms.
    i = next((p for p in positions if written[p].isascii() and written[p].isalnum()), None)
    if i is not None:
        other_c = ("8" if written[i] != "8" else "6") if written[i].isdigit() else ("k" if written[i] != "k" else "w")
        other = written[:i] + other_c + written[i + 1 :]
        assert not _found(tmp, _written(other, positions, style), where, kind), (kind, style, where, other)
