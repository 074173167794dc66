"""A name or an address with one of its letters or digits written as an escape is found by the decoded
views, as the rule reads it (docs/matching.md: text is read through its JSON, percent, HTML and
quoted-printable escapes).

Found by the lead on 2026-12-06 with the kinds' mention test (tests/targets/test_mentions_by_the_rule.py):
`Ad\\u0061 Lovel\\u0061ce` in a bystander's record was a mention to the eraser and nothing to the views. The
views read a file around triggers; a name's trigger is its last word, which one escaped letter breaks, and
the escape triggers wanted two escapes in a row. The class: any of an identifier's ASCII letters or digits
written as a JSON, percent, HTML (decimal or hex) or quoted-printable escape, one or several, in a plain
file or a SQLite value. The oracle is the planting: each escape is written here from the character's
code point, apart from either side's decoders; the control is the same text with the escaped character
replaced by another one, which names nobody.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from hypothesis import example, given, settings
from hypothesis import strategies as st

from erasure.subject import Subject
from probes.identity import spellings
from probes.views import scan_views
from tests import budget
from tests.views_plant import found_in_views, planted

SUBJECT = Subject(id="usr-esc-4417", email="ada.lovelace@example.org", name="Ada Lovelace")
ESCAPES = {
    "json": lambda c: f"\\u{ord(c):04x}",
    "json-upper": lambda c: f"\\u{ord(c):04X}",
    "percent": lambda c: f"%{ord(c):02X}",
    "percent-lower": lambda c: f"%{ord(c):02x}",
    "entity-decimal": lambda c: f"&#{ord(c)};",
    "entity-hex": lambda c: f"&#x{ord(c):x};",
    "quoted-printable": lambda c: f"={ord(c):02X}",
}


def _escaped(text: str, at: list[int], how: str) -> str:
    out = list(text)
    for i in at:
        if out[i].isalnum() and out[i].isascii():
            out[i] = ESCAPES[how](out[i])
    return "".join(out)


def _found(tmp: Path, text: str, where: str, kind: str) -> bool:
    return found_in_views(tmp, text, where, SUBJECT, kind)


@settings(max_examples=budget.examples(150), deadline=None)
@given(
    kind=st.sampled_from(["name", "email", "id"]),
    how=st.sampled_from(sorted(ESCAPES)),
    at=st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=3),
    where=st.sampled_from(["file", "sqlite"]),
)
@example(kind="name", how="json", at=[2, 9], where="file")  # Ad\u0061 Lovel\u0061ce
@example(kind="email", how="percent", at=[10], where="sqlite")
def test_an_identifier_with_an_escaped_letter_is_found(
    tmp_path_factory: object, kind: str, how: str, at: list[int], where: str
) -> None:
    written = {"name": SUBJECT.name, "email": SUBJECT.email, "id": SUBJECT.id}[kind]
    assert written
    positions = sorted({i % len(written) for i in at})
    text = _escaped(written, positions, how)
    tmp = Path(str(tmp_path_factory.mktemp("esc")))  # type: ignore[attr-defined]
    assert _found(tmp, text, where, kind), (kind, how, where, text)
    # The control: the first escaped character replaced by another before escaping names nobody.
    i = next((p for p in positions if written[p].isalnum()), None)
    if i is not None:
        other = written[:i] + ("q" if written[i] != "q" else "z") + written[i + 1 :]
        assert not _found(tmp, _escaped(other, positions, how), where, kind), (kind, how, where, other)


@settings(max_examples=budget.examples(80), deadline=None)
@given(
    kind=st.sampled_from(["name", "email", "id"]),
    at=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=2),
    crlf=st.booleans(),
    where=st.sampled_from(["file", "sqlite"]),
)
@example(kind="name", at=[11], crlf=True, where="file")  # Johann Quis=\r\nt
def test_an_identifier_cut_by_a_quoted_printable_soft_line_break_is_found(
    tmp_path_factory: object, kind: str, at: list[int], crlf: bool, where: str
) -> None:
    """A quoted-printable body wraps its lines with a soft line break (`=` at the line's end), anywhere,
    inside a word too; the text it encodes has none (found by the lead comparing the erasing side's
    reading with the views: `Johann Quis=\\r\\nt`)."""
    written = {"name": SUBJECT.name, "email": SUBJECT.email, "id": SUBJECT.id}[kind]
    assert written
    cuts = sorted({1 + i % (len(written) - 1) for i in at}, reverse=True)
    text = written
    for i in cuts:
        text = text[:i] + ("=\r\n" if crlf else "=\n") + text[i:]
    tmp = Path(str(tmp_path_factory.mktemp("qpsoft")))  # type: ignore[attr-defined]
    assert _found(tmp, text, where, kind), (kind, where, text)


@settings(max_examples=budget.examples(60), deadline=None)
@given(
    kind=st.sampled_from(["name", "email", "id", "phone"]),
    every=st.booleans(),
    where=st.sampled_from(["file", "sqlite"]),
)
@example(kind="phone", every=False, where="file")  # 020%25C2%25A07946%25C2%25A00123
def test_an_identifier_percent_encoded_twice_is_found(
    tmp_path_factory: object, kind: str, every: bool, where: str
) -> None:
    """A URL inside a URL (a redirect's `next=`) is percent-encoded twice: `%2520` for a space (found by the
    lead comparing the erasing side's reading with the views: a phone with no-break spaces encoded twice)."""
    written = {"name": SUBJECT.name, "email": SUBJECT.email, "id": SUBJECT.id, "phone": "+44 20 7946 0123"}[kind]
    assert written
    if kind == "phone":
        written = written.replace(" ", "\u00a0")
    once = "".join(f"%{b:02X}" for b in written.encode()) if every else quote(written, safe="")
    text = quote(once, safe="")
    tmp = Path(str(tmp_path_factory.mktemp("twice")))  # type: ignore[attr-defined]
    store = planted(tmp, text, where, line="Bystander's note: {} tomorrow.\n")
    subject = Subject(id=SUBJECT.id, email=SUBJECT.email, name=SUBJECT.name, phone="+44 20 7946 0123")
    needles = [(f"identifier:{k}", v) for k, v in spellings(subject, [subject.id]) if k == kind]
    assert scan_views(store, needles).found, (kind, where, text)


@settings(max_examples=budget.examples(60), deadline=None)
@given(
    sep=st.sampled_from([" ", "-", ".", "\u00a0", "/"]),
    how=st.sampled_from(["json", "json-upper", "percent", "entity-decimal", "entity-hex"]),
    at=st.integers(min_value=0, max_value=3),
    where=st.sampled_from(["file", "sqlite"]),
)
@example(sep=" ", how="json", at=3, where="file")  # +44 (0)20 7946\u00200123
def test_a_phone_with_a_separator_written_as_an_escape_is_found(
    tmp_path_factory: object, sep: str, how: str, at: int, where: str
) -> None:
    """One separator between a phone's digit groups written as an escape (found by the lead comparing the
    erasing side's reading with the views: `\\u0020` between two groups left no trigger)."""
    groups = ["+44", "(0)20", "7946", "0123"]
    # percent-encoding escapes a character's UTF-8 bytes (`%C2%A0` for a no-break space), the others its code point
    escaped = "".join(ESCAPES[how](chr(b)) for b in sep.encode()) if how == "percent" else ESCAPES[how](sep)
    joined = "".join(g + (escaped if i == at else " ") for i, g in enumerate(groups[:-1])) + groups[-1]
    tmp = Path(str(tmp_path_factory.mktemp("phonesep")))  # type: ignore[attr-defined]
    store = planted(tmp, joined, where, line="Bystander's note: call {} tomorrow.\n")
    subject = Subject(id="usr-ph-0001", phone="+44 20 7946 0123")
    needles = [(f"identifier:{k}", v) for k, v in spellings(subject, [subject.id]) if k == "phone"]
    assert scan_views(store, needles).found, (how, where, joined)
