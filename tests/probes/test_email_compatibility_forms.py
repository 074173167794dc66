"""An address written with compatibility forms of its punctuation is the address (docs/matching.md 4.1).

Found by the red team (tests/redteam/test_redteam.py): a bystander wrote the subject's address in full-width
characters, `ａｎｎａｂｅｌ．ｑｕｉｓｔ＠ｅｘａｍｐｌｅ．ｏｒｇ`. Both sides read only the name `annabel quist` in
it; beside a namesake of that name the name is ambiguous, so it was kept, and the request ended all
clear with the address readable. The class: any address, any of `@ . + - '` written in any of the
forms NFKC maps to it one for one, its letters as they are or full-width, inside other words. Both
sides must find an email over exactly the address; the oracle is NFKC itself, apart from either side."""

from __future__ import annotations

import unicodedata

from hypothesis import example, given, settings
from hypothesis import strategies as st

from erasure.identity import Identity
from erasure.subject import Subject
from probes.rule import Person, Rule
from tests import budget

FORMS = {"@": "@\uff20\ufe6b", ".": ".\uff0e\ufe52", "+": "+\uff0b\ufe62", "-": "-\uff0d\ufe63", "'": "'\uff07"}
"""Each punctuation of an address and the characters NFKC maps to it one for one (written out here, not
taken from either side)."""


def _fullwidth(ch: str) -> str:
    return chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch


locals_ = st.from_regex(r"[a-z]{2,8}([.+\-'][a-z]{2,8}){0,2}", fullmatch=True)
domains = st.from_regex(r"[a-z]{2,8}(-[a-z]{2,6})?\.(org|com|co\.uk|example)", fullmatch=True)


@settings(max_examples=budget.examples(300), deadline=None)
@given(
    local=locals_,
    domain=domains,
    choices=st.lists(st.integers(0, 2), min_size=40, max_size=40),
    wide_letters=st.booleans(),
    before=st.sampled_from(["My colleague ", "mail: ", "(", "«"]),
    after=st.sampled_from([" asked about the refund.", ")", ", thanks", "»"]),
)
@example(
    local="annabel.quist",
    domain="example.org",
    choices=[1] * 40,
    wide_letters=True,
    before="My colleague ",
    after=" asked about the refund.",
)
def test_an_address_in_compatibility_forms_is_found_by_both_sides(
    local: str, domain: str, choices: list[int], wide_letters: bool, before: str, after: str
) -> None:
    email = f"{local}@{domain}"
    k = iter(choices)
    written = "".join(
        FORMS[c][next(k) % len(FORMS[c])] if c in FORMS else (_fullwidth(c) if wide_letters else c) for c in email
    )
    assert unicodedata.normalize("NFKC", written) == email  # the oracle: NFKC reads it as the address
    text = before + written + after
    span = (len(before), len(before) + len(written))

    erasing = Identity.of(Subject(id="subj-x-1", email=email))
    assert any((h.start, h.end) == span for h in erasing.hits(text) if h.kind == "email"), (text, erasing.hits(text))

    probing = Rule(Person(emails=(email,)))
    assert any((f.start, f.end) == span for f in probing.find(text) if f.kind == "email"), (text, probing.find(text))
