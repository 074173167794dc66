"""The rule's prefilters on ASCII as bytes (docs/benchmarks.md 2026-12-06, branch h-views6): each against
the old code, kept here as its oracle, on text drawn from the characters they treat apart (the dropped
apostrophes and dashes, capitals, digits, full-width and other scripts' letters and digits, U+FFFD,
controls, the full-width `@`):
- `words.skeleton` (ASCII text and the transliterated rest deleted from as bytes) against the regexes;
- `words.squeeze` against `_NOT_ALNUM_RE`;
- `emails.find_addresses`, which translates a view only where a character of `_AS_ASCII` stands in it."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

from anyascii import anyascii
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.rule import emails, words
from tests import budget

ALPHABET = (
    "aZq9 -_'`.@+\ufffd\u00e9\u00df\u65e5\u0660\u200b\ufb01\u2460\u0301\x00\x80\uff20\ufe6b\uff0e\uff0d\uff21\u00ad"
)
TEXT = st.text(alphabet=st.sampled_from(ALPHABET), max_size=60)


def _old_skeleton(text: str) -> str:
    if text.isascii():
        return words._ASCII_DROP_RE.sub("", text).lower()
    t = unicodedata.normalize("NFKC", words._DROP_RE.sub("", text)).replace("\ufffd", "")
    return words._NOT_ALNUM_RE.sub("", words._NON_ASCII_RE.sub(lambda m: anyascii(m.group()), t).lower())


@settings(max_examples=budget.examples(3000), deadline=None)
@given(TEXT)
def test_the_skeleton_is_the_old_one(text: str) -> None:
    assert words.skeleton(text) == _old_skeleton(text)


@settings(max_examples=budget.examples(1000), deadline=None)
@given(st.binary(max_size=200))
def test_the_skeleton_of_bytes_read_as_utf8_is_the_old_one(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    assert words.skeleton(text) == _old_skeleton(text)
    assert words.skeleton(data.decode("latin-1")) == _old_skeleton(data.decode("latin-1"))


@settings(max_examples=budget.examples(2000), deadline=None)
@given(TEXT)
def test_squeeze_is_the_old_one(text: str) -> None:
    assert words.squeeze(text) == words._NOT_ALNUM_RE.sub("", text)
    assert words.squeeze(text.lower()) == words._NOT_ALNUM_RE.sub("", text.lower())


def _old_find_addresses(ps: list[emails.EmailPattern], view: str) -> Iterator[tuple[int, int]]:
    wanted = {(p.local, p.domain) for p in ps if p.local is not None}
    if not wanted:
        return
    local_re, domain_re = emails._regexes()
    view = view.translate(emails._AS_ASCII)
    at = view.find("@")
    while at >= 0:
        start = at
        while start > 0 and local_re.match(view, start - 1):
            start -= 1
        while start < at and (view[start] in emails._LOCAL_PUNCT or emails._IGNORED_RE.match(view, start)):
            start += 1
        d = domain_re.match(view, at + 1)
        found = d is not None and (emails.norm_local(view[start:at]), emails.norm_domain(d.group())) in wanted
        if start < at and d is not None and found:
            yield start, d.end()
        at = view.find("@", at + 1)


PATTERNS = [emails.compile_email("farid.q@mail.example"), emails.compile_email("zoë+x@exämple.org")]
ADDRESS_PIECES = ["farid.q", "FARID.Q", "zoë+x", "@", "\uff20", "\ufe6b", "mail", ".", "\uff0e", "example"]
ADDRESS_PIECES += ["exämple", "org", " ", "\ufffd", "x"]


@settings(max_examples=budget.examples(2000), deadline=None)
@given(st.lists(st.sampled_from(ADDRESS_PIECES), max_size=20))
def test_addresses_are_found_as_the_old_reading_finds_them(pieces: list[str]) -> None:
    view = "".join(pieces)
    assert list(emails.find_addresses(PATTERNS, view)) == list(_old_find_addresses(PATTERNS, view))


def test_the_positive_control_a_fullwidth_at_is_read() -> None:
    assert list(emails.find_addresses(PATTERNS, "write to farid.q\uff20mail.example now")) == [(9, 29)]
