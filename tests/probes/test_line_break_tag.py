"""`<br>` is a line break inside a record, as a line feed is, not a record's end (docs/matching.md 1.3.2, v5).

Found by an adversary's second look at issue 33 (family 1): a bystander's message held a shipping label,
`Ship to:<br>Casimir<br/>Szczepanski<br>12 Mill Lane`. The rule made `br` end a record like `p` or `tr`,
so the name never matched across it, while the same label with line feeds (`Casimir\\nSzczepanski`) did:
the request ended all clear (`erased`) with the name readable. Both sides, and the probes' HTML reader,
now read `<br>` as white space. Judged by tests/oracle33 (its HTML reader, apart from both sides).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import erasure.matching as erasing
import probes.rule as probing
from erasure.identity import Identity
from erasure.subject import Subject
from probes.documents import read
from tests import budget
from tests.oracle33.match import Person33
from tests.oracle33.scan import scan_text33

PEOPLE = [("Casimir", "Szczepanski"), ("Ottilie", "Quist"), ("Ирина", "Соколова"), ("Νίκος", "Παππάς")]


@settings(max_examples=budget.examples(200), deadline=None, derandomize=True)
@given(
    who=st.sampled_from(PEOPLE),
    br=st.sampled_from(["<br>", "<br/>", "<BR />", "<br>\n", " <br> "]),
    before=st.sampled_from(["Ship to:<br>", "<p>Guest: ", "", "<td>"]),
    after=st.sampled_from(["<br>12 Mill Lane</p>", "</p>", "", "</td>"]),
    reverse=st.booleans(),
)
def test_a_name_across_a_line_break_tag_is_found_and_redacted(
    who: tuple[str, str], br: str, before: str, after: str, reverse: bool
) -> None:
    given_, family = who
    shown = f"{family}{br}{given_}" if reverse else f"{given_}{br}{family}"
    text = before + shown + after
    p33 = Person33("x", None, given_, family, None, f"{given_} {family}")
    assert scan_text33(text, [p33]).hits, text
    name = f"{given_} {family}"
    mine = erasing.Finder(erasing.Who(names=(name,))).hits(text)
    theirs = probing.Rule(probing.Person(names=(name,))).find(text)
    assert any(h.kind == "name" for h in mine) and any(f.kind == "name" for f in theirs), text
    redacted, _n = Identity.of(Subject(id="x", name=name)).redact(text)
    assert not scan_text33(redacted, [p33]).hits, (text, redacted)


def test_the_probes_html_reader_keeps_a_line_break_inside_its_record() -> None:
    reading = read(b"<html><body><p>Ship to:<br>Casimir<br/>Szczepanski</p><p>Next</p></body></html>", lambda: 1 << 20)
    assert any("Casimir" in r and "Szczepanski" in r for r in reading.records), reading.records
