"""The eraser reads every escape view the probes read (docs/matching.md 1.3.4), or a request never ends.

Found by an adversary's second look at issue 33 (family 6, requests that can never finish): the probes
read a text through each of their decoders alone and in pairs, one of them percent-decoding with `+` as a
space, and HTML character references as `html.unescape` reads them (with or without the `;`); the eraser
decoded every kind of escape at once, never `+` as a space and only references closed by `;`. So
`tel=020%207946%200007` (`=02` read as quoted-printable)
and `Ad&#97 Lovelace &amp; co` were seen by the probes and never redacted: exit 7 on every rerun.

Judged by the issue-33 oracle (tests/oracle33, written apart from both sides) and by the probes' own
matcher: after the eraser's redaction of a bystander's text, neither finds the subject.
"""

from __future__ import annotations

import html
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.identity import Identity
from erasure.subject import Subject
from probes.matcher import Matcher
from tests import budget
from tests.oracle33.match import Person33
from tests.oracle33.scan import scan_text33

ADA = Subject(id="usr-x-007-q", email="adam.quist@mail.example", name="Ada Lovelace", phone="+44 20 7946 0007")


def person33(s: Subject) -> Person33:
    given, _, family = (s.name or "").partition(" ")
    return Person33(s.id, s.email, given, family, s.phone, s.name)


def probes_find(s: Subject, text: str) -> dict[int, int]:
    """The probes' matcher (every decoded view): needle index -> unambiguous hits."""
    values = (("id", s.id), ("email", s.email), ("name", s.name), ("phone", s.phone))
    m = Matcher([(f"identifier:{k}", v) for k, v in values if v])
    hits: dict[int, int] = {}
    m.match_text(text, hits)
    return {k: v for k, v in hits.items() if v}


def assert_erased(s: Subject, text: str) -> None:
    """The oracle finds `s` in `text`; after the eraser's redaction neither the oracle nor the probes do."""
    assert scan_text33(text, [person33(s)]).hits, f"the oracle does not see the subject in {text!r}"
    redacted, n = Identity.of(s).redact(text)
    assert n, f"the eraser finds nothing in {text!r}"
    assert not probes_find(s, redacted), f"the probes still see the subject in {redacted!r} (from {text!r})"
    left = scan_text33(redacted, [person33(s)]).hits
    assert not left, f"the oracle still sees {[h.kind for h in left]} in {redacted!r} (from {text!r})"


@pytest.mark.parametrize(
    "text",
    [
        "tel=020%207946%200007",  # `=02` beside percent escapes
        "<p>Ad&#97 Lovelace &amp; co</p>",  # a numeric reference without its `;`
        "adam.quist&#64mail.example &amp; more",
        "Ada&nbspLovelace &amp; co",  # a legacy named reference without its `;`
    ],
)
def test_an_escape_the_probes_decode_is_redacted_by_the_eraser(text: str) -> None:
    assert_erased(ADA, text)


# --- generated: identifiers in URLs and HTML as software writes them --------------------------------

KEYS = ("tel", "phone", "name", "email", "ad", "fe", "cb", "e", "q", "dc")
"""Query keys: several end in hex digits, so `key=0…` reads as a quoted-printable escape."""
PEOPLE = (
    ("Ada", "Lovelace"), ("Bea", "Fenwick"), ("Dace", "Ormsby"), ("Edda", "Quist"), ("Faye", "Marlow"),
    ("Cecil", "Brandt"), ("Abe", "Tennant"), ("Dee", "Halvorsen"),
)  # fmt: skip
"""Given names that begin with hex letters (`name=Ad…` is `=AD` to a quoted-printable reader)."""


def _entities(text: str, every: int, close: bool) -> str:
    """Every `every`-th letter as a decimal reference, with or without its `;` (never before a digit,
    which would read into the number)."""
    out = []
    for k, c in enumerate(text):
        nxt = text[k + 1 : k + 2]
        if c.isalpha() and k % every == 0 and (close or not nxt.isdigit()):
            out.append(f"&#{ord(c)}" + (";" if close else ""))
        else:
            out.append(c)
    return "".join(out)


@st.composite
def urls(draw: st.DrawFn) -> tuple[Subject, str]:
    given, family = draw(st.sampled_from(PEOPLE))
    n = draw(st.integers(0, 9999))
    s = Subject(
        id=f"usr-g-{n:04d}",
        email=f"{given.lower()}.{family.lower()}{n}@mail.example",
        name=f"{given} {family}",
        phone=f"+44 20 7946 {n:04d}",
    )
    value = draw(
        st.sampled_from(
            [
                s.phone or "",
                f"020 7946 {n:04d}",
                f"+44 (0)20 7946 {n:04d}",
                s.email or "",
                s.name or "",
                f"{family}, {given}",
            ]
        )
    )
    key = draw(st.sampled_from(KEYS))
    params = [(key, value), ("ref", draw(st.sampled_from(["x/y", "é", "a&b", "50%"])))]
    form = draw(st.sampled_from(["percent", "entities", "entities-open"]))
    if form == "percent":
        text = "https://crm.example/s?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
    else:
        shown = _entities(value, draw(st.integers(2, 4)), close=form == "entities")
        text = f"<p>Contact: {shown} &amp; {html.escape('walnut & oak')}</p>"
    return s, draw(st.sampled_from(["{}", "See {} today.", '<a href="{}">link</a>', "{}\n"])).format(text)


@settings(max_examples=budget.examples(200), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=urls())
def test_generated_urls_and_references_the_probes_decode_are_redacted(case: tuple[Subject, str]) -> None:
    s, text = case
    assert_erased(s, text)


@pytest.mark.parametrize(
    "text",
    [
        "see https://x.example/a%20b and call +1 (207) 946-0007",
        "ref%3D1 +1 207 946 0007",
        "+1-207-946-0007 https://x.example/?q=a%2Fb",
    ],
)
def test_a_plus_outside_a_form_encoded_run_is_a_plus_for_the_probes(text: str) -> None:
    """`+` reads as a space only inside a whitespace-free run that is percent-encoded (a URL query, a form
    body): elsewhere in the same text a bystander's `+1 207 946 0007` is a US number, never the subject's
    London number without its trunk zero (the CI-size red team's `no-trunk-zero` beside `escaped-url`)."""
    assert not probes_find(ADA, text)
    assert not scan_text33(text, [person33(ADA)]).hits


@given(
    prefix=st.sampled_from(["", "note: ", "Ref ", "see x.example/a%20b then "]),
    sep=st.sampled_from([" ", "-", "."]),
    escape=st.sampled_from(["%20", "%2F", "%3D", "%40"]),
)
@settings(max_examples=budget.examples(60), suppress_health_check=[HealthCheck.too_slow])
def test_generated_foreign_plus_numbers_beside_escapes_are_not_the_subject(prefix: str, sep: str, escape: str) -> None:
    text = f"{prefix}call +1{sep}207{sep}946{sep}0007 or see https://x.example/p{escape}q"
    assert not scan_text33(text, [person33(ADA)]).hits  # the oracle: a US number
    assert not probes_find(ADA, text)


def test_a_form_encoded_phone_is_still_found_by_the_probes() -> None:
    assert probes_find(ADA, "tel=%2B44+20+7946+0007")
