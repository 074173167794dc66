"""A phone written with its `+` after a path or key separator is the phone (docs/matching.md 5.2, rule v4).

Found by an adversary's second look at issue 33 (family 6): a bystander's conversation key
`sms/+442079460040` holds the subject's number, as SMS and WhatsApp bridges key their threads. 5.2 read the
`/` after `sms` as tying the number to another token (as it rightly does for `INV-2079460001`), so neither
side saw a phone, and the request ended all clear (`erased`) with the number in the store. A number that
begins with its plus sign is a number: nothing glues onto a `+`. Judged by tests/oracle33, apart from both
sides; an invoice or a path of bare digits stays another token on both sides.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import erasure.matching as erasing
import probes.rule as probing
from tests import budget
from tests.oracle33.match import Person33
from tests.oracle33.scan import scan_text33


def _found(phone: str, text: str) -> tuple[bool, bool]:
    mine = erasing.Finder(erasing.Who(phones=(phone,))).hits(text)
    theirs = probing.Rule(probing.Person(phones=(phone,))).find(text)
    return any(h.kind == "phone" for h in mine), any(f.kind == "phone" for f in theirs)


@settings(max_examples=budget.examples(200), deadline=None, derandomize=True)
@given(
    n=st.integers(0, 9999),
    key=st.sampled_from(["sms", "wa", "dm", "users", "thread", "tel"]),
    sep=st.sampled_from(["/", "-", "_"]),
    form=st.sampled_from(["+44207946{n:04d}", "+44 20 7946 {n:04d}", "\uff0b44 20 7946 {n:04d}"]),
    tail=st.sampled_from(["", "/", " ", "/inbox", "\n"]),
)
def test_a_signed_number_after_a_key_separator_is_found_by_both_sides(
    n: int, key: str, sep: str, form: str, tail: str
) -> None:
    phone = f"+44 20 7946 {n:04d}"
    text = f"{key}{sep}{form.format(n=n)}{tail}"
    assert scan_text33(text, [Person33("x", None, None, None, phone, None)]).hits, text
    assert _found(phone, text) == (True, True), text


@settings(max_examples=budget.examples(100), deadline=None, derandomize=True)
@given(n=st.integers(0, 9999), key=st.sampled_from(["INV", "sms", "R", "order"]), sep=st.sampled_from(["/", "-", "_"]))
def test_bare_digits_after_a_key_separator_stay_another_token(n: int, key: str, sep: str) -> None:
    phone = f"+44 20 7946 {n:04d}"
    assert _found(phone, f"{key}{sep}207946{n:04d}") == (False, False)
    assert _found(phone, f"{key}{sep}0207946{n:04d}") == (False, False)
