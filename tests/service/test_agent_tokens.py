"""Confirmation tokens of `erasure mcp` (`service.agent_tokens`), over generated subjects and previews: a
token checks back to exactly the identifiers and preview it was made for, until it expires; any change
to one character, another home's secret, or a moment past its expiry refuses it; and it never shows
an identifier, in any spelling the token's own encodings could give it."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service import agent_tokens
from tests import budget

NOW = datetime(2026, 12, 6, 9, 30, tzinfo=UTC)
words = st.text(st.characters(codec="utf-8"), min_size=4, max_size=40)
subjects = st.fixed_dictionaries(
    {"id": words},
    optional={"email": words, "name": words, "phone": st.from_regex(r"\+[1-9][0-9]{7,12}", fullmatch=True)},
)
previews = st.recursive(
    st.none() | st.integers(0, 10**6) | st.text(max_size=20),
    lambda inner: st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _spellings(value: str) -> list[bytes]:
    """How a value could show in the token's text: as itself, and base64 (either alphabet) of it at any
    of the three alignments a base64 stream can cut it."""
    raw = value.encode()
    out = [raw]
    for pad in range(3):
        enc = base64.b64encode(b"\0" * pad + raw)[(pad * 4 + 2) // 3 + 1 : -4 or None]
        if len(enc) >= 8:
            out += [enc, enc.replace(b"+", b"-").replace(b"/", b"_")]
    return out


@settings(max_examples=budget.examples(60), deadline=None)
@given(subject=subjects, preview=previews)
def test_a_token_checks_back_to_its_subject_and_preview_and_shows_neither(
    subject: dict[str, str], preview: object
) -> None:
    token, claims = agent_tokens.issue("home-secret", subject, preview, now=NOW)
    back = agent_tokens.check("home-secret", token, now=NOW + timedelta(seconds=599))
    assert back == claims and back.subject == subject
    assert back.preview_sha256 == agent_tokens.preview_digest(preview)
    for value in subject.values():
        if len(value.encode()) >= 6:
            assert not any(s in token.encode() for s in _spellings(value)), value


@settings(max_examples=budget.examples(60), deadline=None)
@given(subject=subjects, where=st.integers(min_value=0), char=st.sampled_from("A0_-.x"))
def test_any_change_another_secret_or_expiry_refuses_it(subject: dict[str, str], where: int, char: str) -> None:
    token, _ = agent_tokens.issue("home-secret", subject, {"n": 1}, now=NOW)
    i = where % len(token)
    altered = token[:i] + char + token[i + 1 :]
    if altered != token:
        with pytest.raises(agent_tokens.TokenForged):
            agent_tokens.check("home-secret", altered, now=NOW)
    with pytest.raises(agent_tokens.TokenForged):
        agent_tokens.check("another-home", token, now=NOW)
    with pytest.raises(agent_tokens.TokenExpired):
        agent_tokens.check("home-secret", token, now=NOW + timedelta(seconds=600))


def test_the_lifetime_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(agent_tokens.TTL_ENV, "5")
    token, claims = agent_tokens.issue("s", {"id": "u-1"}, {}, now=NOW)
    assert claims.expires_at == NOW + timedelta(seconds=5)
    with pytest.raises(agent_tokens.TokenExpired, match="expired at 2026-12-06T09:30:05Z"):
        agent_tokens.check("s", token, now=NOW + timedelta(seconds=5))
