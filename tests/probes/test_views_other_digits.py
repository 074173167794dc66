"""A phone written in another script's digits is found by the decoded views, as the rule finds it
(docs/matching.md 5.2: a digit is any decimal digit, Nd, read as its value).

Found by the lead on 2026-12-06, looking at the classes around the issue-33 red team's `other-digits`
attack: `+٤٤ ٢٠ ٧٩٤٦ ٠١٢٣` in a plain file of the store is the subject's phone to the rule, but the views
read such a file only around triggers, and a phone's trigger was its ASCII digits: no window was read,
and the verification said nothing was left. The class: a phone in E.164, `00` or national form, its
digits drawn from several scripts (one script per phone, or mixed), any separators, in a plain file or
as a SQLite value. The oracle is the planting: the digits are written out here by their values, apart
from either side's tables.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from erasure.subject import Subject
from probes.identity import spellings
from probes.views import scan_views
from tests import budget
from tests.views_plant import planted

SCRIPTS = {
    "arabic-indic": 0x0660,
    "persian": 0x06F0,
    "devanagari": 0x0966,
    "bengali": 0x09E6,
    "thai": 0x0E50,
    "myanmar": 0x1040,
    "fullwidth": 0xFF10,
    "ascii": 0x30,
}
"""The zero of each script's digits (each script's ten digits are consecutive code points)."""

PHONE = "+44 20 7946 0123"


def _written(form: str, zeros: list[int], seps: list[str]) -> str:
    digits = {"e164": "442079460123", "00": "00442079460123", "national": "02079460123"}[form]
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    out = []
    for g, group in enumerate(groups):
        out.append("".join(chr(zeros[(g + k) % len(zeros)] + int(d)) for k, d in enumerate(group)))
    return ("+" if form == "e164" else "") + "".join(p + seps[i % len(seps)] for i, p in enumerate(out)).rstrip(
        "".join(seps)
    )


def _found(tmp: Path, text: str, where: str) -> dict[int, int]:
    store = planted(tmp, f"call {text}", where, line="Bystander's note: {} tomorrow.\n")
    subject = Subject(id="usr-ph-0001", phone=PHONE)
    needles = [(f"identifier:{k}", v) for k, v in spellings(subject, [subject.id]) if k == "phone"]
    return scan_views(store, needles).found


@settings(max_examples=budget.examples(120), deadline=None)
@given(
    form=st.sampled_from(["e164", "00", "national"]),
    zeros=st.lists(st.sampled_from([z for s, z in SCRIPTS.items() if s != "ascii"]), min_size=1, max_size=2),
    seps=st.lists(st.sampled_from([" ", "-", ".", "\u00a0", " / "]), min_size=1, max_size=2),
    where=st.sampled_from(["file", "sqlite"]),
)
@example(form="e164", zeros=[0x0660], seps=[" "], where="file")  # +٤٤٢ ٠٧٩ ٤٦٠ ١٢٣
def test_a_phone_in_another_scripts_digits_is_found(
    tmp_path_factory: object, form: str, zeros: list[int], seps: list[str], where: str
) -> None:
    text = _written(form, zeros, seps)
    tmp = Path(str(tmp_path_factory.mktemp("digits")))  # type: ignore[attr-defined]
    assert _found(tmp, text, where), (form, where, text)
    # The control: the same digits one off are no phone of the subject's.
    other = text[:-1] + chr(ord(text[-1]) + (1 if text[-1] not in "9\u0669\u06f9" else -1))
    assert not _found(tmp, other, where), (form, where, other)
