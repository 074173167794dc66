"""An identifier with a format character after every letter is found by the decoded views, not only by
the rule (docs/matching.md 2.4: characters of category Cf are skipped inside a word and an address).

Found by the lead (noticed in the issue-33 follow-up, taken up 2026-12-06): `u\\u00ads\\u00adr\\u00ad-…`,
the subject's id with a soft hyphen after each character, in a plain file of the store. `Rule.find` reads
it as the id, but the views read a file's bytes only around triggers (fragments of an identifier's
spelling): a format character inside every fragment leaves no trigger, no window is decoded, and the
verification said nothing is left while the id was there for any reader who copies the text. The class:
any Cf character (soft hyphen, zero-width space and joiners, bidi marks, BOM, word joiner) inserted
densely into an id, an email or a name, in a file of the store written in UTF-8 or UTF-16. The oracle
is the planting: the identifier was written into the file, so it must be found; a file that holds
another person's identifier written the same way is the control.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from probes.views import scan_views
from tests import budget
from tests.views_plant import planted

FORMAT_CHARS = "\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2066\u2069\u202a\u202c\u202e\ufeff\u061c\u180e"
"""Soft hyphen, zero-width space / non-joiner / joiner, LRM, RLM, word joiner, function application,
bidi isolates, embeddings and override, BOM, Arabic letter mark, Mongolian vowel separator: all of
category Cf (written out here, not taken from either side)."""

ids = st.from_regex(r"[a-z]{2,5}-[a-z0-9]{2,6}-[0-9]{3,6}", fullmatch=True)
emails = st.from_regex(r"[a-z]{3,8}\.[a-z]{2,8}@[a-z]{3,8}\.(org|com|example)", fullmatch=True)
names = st.tuples(
    st.sampled_from(["Johann", "Annabel", "Casimir", "Oluwaseun", "Zoë", "Björn"]),
    st.sampled_from(["Quist", "Szczepanski", "Okonkwo", "Lindqvist", "Marwick"]),
).map(" ".join)


def _spelled(value: str, marks: list[str], every: bool, keep: list[bool]) -> str:
    """`value` with a format character after each of its characters (`every`) or after most of them."""
    out = []
    for i, ch in enumerate(value):
        out.append(ch)
        if i < len(value) - 1 and (every or keep[i % len(keep)]):
            out.append(marks[i % len(marks)])
    return "".join(out)


def _found(tmp: Path, text: str, codec: str, needle: tuple[str, str], where: str = "file") -> dict[int, int]:
    return scan_views(planted(tmp, text if where == "file" else text.strip(), where, codec=codec), [needle]).found


@settings(max_examples=budget.examples(200), deadline=None)
@given(
    kind=st.sampled_from(["id", "email", "name"]),
    data=st.data(),
    marks=st.lists(st.sampled_from(FORMAT_CHARS), min_size=1, max_size=4),
    every=st.booleans(),
    keep=st.lists(st.booleans(), min_size=2, max_size=5).filter(lambda k: sum(k) * 2 >= len(k)),
    codec=st.sampled_from(["utf-8", "utf-16-le", "utf-16", "sqlite"]),
    filler=st.integers(0, 3000),
)
@example(
    kind="id", data=None, marks=["\u00ad"], every=True, keep=[True, True], codec="utf-8", filler=0
)  # the finding: a soft hyphen after every character of the id
@example(kind="id", data=None, marks=["\u200b"], every=True, keep=[True, True], codec="sqlite", filler=0)
def test_an_identifier_spelled_with_format_characters_is_found_in_a_file(
    tmp_path_factory: object,
    kind: str,
    data: st.DataObject | None,
    marks: list[str],
    every: bool,
    keep: list[bool],
    codec: str,
    filler: int,
) -> None:
    value = {"id": "usr-jd-4471", "email": "jo.quist@mail.example", "name": "Johann Quist"}[kind]
    if data is not None:
        value = data.draw({"id": ids, "email": emails, "name": names}[kind])
    tmp = Path(str(tmp_path_factory.mktemp("fmt")))  # type: ignore[attr-defined]
    around = "A walrus on the shore at dawn; bystanders' notes. " * (filler // 50 + 1)
    text = around[:filler] + "\nnote: " + _spelled(value, marks, every, keep) + " end.\n" + around[:filler]
    if codec == "sqlite":
        text = _spelled(value, marks, every, keep)  # the whole value, nothing around it on its page
    where = "sqlite" if codec == "sqlite" else "file"
    codec = "utf-8" if codec == "sqlite" else codec
    assert _found(tmp, text, codec, ("identifier", value), where), (kind, where, codec, ascii(text[:200]))
    # The control: someone else's identifier of the same shape is not read into this one.
    other = {"id": "zzq-qq-9090", "email": "no.body@else.example", "name": "Imogen Thistlewood"}[kind]
    assert _found(tmp, text, codec, ("identifier", other), where) == {}
