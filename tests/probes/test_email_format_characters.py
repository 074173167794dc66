"""An address with format characters inside it is the address (docs/matching.md 4.1, rule version 3).

Found by an adversary's second look at issue 33 (family 2, international forms): a bystander's message
held the subject's address with a soft hyphen in the local part (`clie\u00adnt009.q@mail.example`), a
zero-width space before the `@`, or a left-to-right mark inside the domain (`mail\u200e.example`), as
text copied from a web page or a right-to-left document carries them. Words skip these characters (2.4),
addresses did not: both sides read no address, and the request ended all clear (`erased`) with the
address readable to anyone who pastes it. The class: any Cf character at any place inside an address.
The oracle is tests/oracle33 (it drops format characters before it parses addresses), apart from both
sides; the eraser's redaction must leave nothing it finds.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from erasure.identity import Identity
from erasure.subject import Subject
from probes.rule import Person, Rule
from tests import budget
from tests.oracle33.match import Person33
from tests.oracle33.scan import scan_text33

FORMAT_CHARS = "\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\u2066\u2069\u202a\u202c\ufeff"
"""Soft hyphen, zero-width space / non-joiner / joiner, LRM, RLM, word joiner, bidi isolates and
embeddings, BOM: all of category Cf (written out here, not taken from either side)."""

locals_ = st.from_regex(r"[a-z]{2,8}([.+\-][a-z0-9]{2,8}){0,2}", fullmatch=True)
domains = st.from_regex(r"[a-z]{2,8}(-[a-z]{2,6})?\.(org|com|co\.uk|example)", fullmatch=True)


@settings(max_examples=budget.examples(300), deadline=None)
@given(
    local=locals_,
    domain=domains,
    at=st.lists(st.integers(1, 200), min_size=1, max_size=3),
    marks=st.lists(st.sampled_from(FORMAT_CHARS), min_size=3, max_size=3),
    before=st.sampled_from(["Mail ", "mail: ", "(", "«", "<a>"]),
    after=st.sampled_from([" today.", ")", ", thanks", "»", "</a>"]),
)
@example(local="client009.q", domain="mail.example", at=[4], marks=["\u00ad"] * 3, before="Mail ", after=" today.")
@example(local="client010.q", domain="mail.example", at=[11], marks=["\u200b"] * 3, before="Mail ", after=" today.")
@example(local="client011.q", domain="mail.example", at=[16], marks=["\u200e"] * 3, before="Mail ", after=" today.")
def test_an_address_with_format_characters_inside_is_found_and_redacted(
    local: str, domain: str, at: list[int], marks: list[str], before: str, after: str
) -> None:
    email = f"{local}@{domain}"
    written = email
    for k, (pos, mark) in enumerate(zip(sorted(set(at)), marks, strict=False)):
        p = 1 + (pos + k) % (len(written) - 1)  # strictly inside the address
        written = written[:p] + mark + written[p:]
    text = before + written + after
    who = Subject(id="subj-x-1", email=email)
    assert scan_text33(text, [Person33(who.id, email, None, None, None, None)]).hits, text

    erasing = Identity.of(who)
    assert any(h.kind == "email" and not h.ambiguous for h in erasing.hits(text)), (text, erasing.hits(text))
    probing = Rule(Person(emails=(email,)))
    assert any(f.kind == "email" and not f.ambiguous for f in probing.find(text)), (text, probing.find(text))

    redacted, _n = erasing.redact(text)
    assert not scan_text33(redacted, [Person33(who.id, email, None, None, None, None)]).hits, (text, redacted)
    assert not [f for f in probing.find(redacted) if not f.ambiguous], (text, redacted)
