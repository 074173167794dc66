"""Hardening (issue 23, item 12): an email field holds one addr-spec. `postmaster,someone@elsewhere.example`
used to be accepted (one '@', no white space) and became two recipients of the requester's
notification. Lists, display names, groups, angle brackets, quoted local parts and comments are refused,
in a request envelope (through `erasure request submit`) and in an ingest line alike."""

from __future__ import annotations

import json
import string
from email.message import EmailMessage
from email.utils import getaddresses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from erasure.config import Home
from erasure.subject import Subject
from tests import budget
from tests.cli_fixtures import erasure

FIXTURES = Path(__file__).parents[1] / "fixtures" / "requests"


def _envelope(tmp_path: Path, email: str) -> Path:
    body = json.loads((FIXTURES / "gdpr.json").read_text())
    body["subject"]["email"] = email
    p = tmp_path / "envelope.json"
    p.write_text(json.dumps(body))
    return p


# --- attack fixtures, named after the attack -----------------------------------------------------

LIST_OF_TWO = "postmaster,someone@elsewhere.example"
ATTACKS = {
    "comma_list": LIST_OF_TWO,
    "semicolon_list": "ada.example@example.org;someone@elsewhere.example",
    "display_name": "Ada <someone@elsewhere.example>",
    "angle_brackets": "<someone@elsewhere.example>",
    "group": "undisclosed:someone@elsewhere.example;",
    "quoted_local_part_with_comma": '"a,b"@elsewhere.example',
    "comment": "ada(someone@elsewhere.example)@example.org",
    "domain_literal": "ada@[127.0.0.1]",
    "two_ats": "a@b@elsewhere.example",
    "header_injection": "ada@example.org\r\nBcc: someone@elsewhere.example",
}


def test_the_list_becomes_two_recipients_of_a_notification() -> None:
    """Why it matters: the notification's To header is the field as given."""
    msg = EmailMessage()
    msg["To"] = LIST_OF_TWO
    assert len(getaddresses([str(msg["To"])])) == 2


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_submit_refuses_an_email_that_is_not_one_addr_spec(home: Home, tmp_path: Path, attack: str) -> None:
    res = erasure("request", "submit", str(_envelope(tmp_path, ATTACKS[attack])), "--home", str(home.root))
    assert res.code == 2, (res.out, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "subject.email" in lines[0] and "one address" in lines[0], res.err
    assert "elsewhere" not in res.err  # the message names the rule, not the value
    assert (
        not home.engine_db.exists()
        or "req-gdpr-0001" not in erasure("request", "list", "--json", "--home", str(home.root)).out
    )


def test_submit_accepts_one_plain_address(home: Home, tmp_path: Path) -> None:
    res = erasure(
        "request",
        "submit",
        str(_envelope(tmp_path, "o'brien+erasure@mail.example.org")),
        "--home",
        str(home.root),
        "--json",
    )
    assert res.code == 0, res.err
    assert json.loads(res.out)["created"] is True


def test_ingest_refuses_a_list_in_the_subjects_email(home: Home, tmp_path: Path) -> None:
    line = {
        "source": "chat",
        "source_ref": "conv-1",
        "subject": {"id": "u-1", "email": LIST_OF_TWO},
        "content": "hello",
    }
    f = tmp_path / "items.jsonl"
    f.write_text(json.dumps(line) + "\n")
    assert erasure("store", "init", "--home", str(home.root)).code == 0
    res = erasure("ingest", str(f), "--home", str(home.root))
    assert res.code == 2, (res.out, res.err)
    assert "one address" in res.err


# --- the class: one addr-spec against everything that names more (or other) than one -------------

ATEXT = string.ascii_letters + string.digits + "!#$%&'*+/=?^_`{|}~-"
atoms = st.text(alphabet=ATEXT, min_size=1, max_size=8)
labels = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)


@st.composite
def addr_specs(draw: st.DrawFn) -> str:
    """One RFC 5322 dot-atom addr-spec, built from its grammar (local@domain, domain of 2+ labels)."""
    local = ".".join(draw(st.lists(atoms, min_size=1, max_size=3)))
    domain = ".".join(draw(st.lists(labels, min_size=2, max_size=3)))
    return f"{local}@{domain}"


@st.composite
def not_one_addr_spec(draw: st.DrawFn) -> str:
    """Built to name more than one mailbox, or one wrapped in syntax that is not a bare addr-spec."""
    a, b = draw(addr_specs()), draw(addr_specs())
    local_b = b.split("@", 1)[0]
    name = draw(st.text(alphabet=string.ascii_letters + " ", min_size=1, max_size=6))
    form = draw(
        st.sampled_from(
            ["comma", "semicolon", "local-comma", "display", "angle", "group", "quoted", "comment", "space", "crlf"]
        )
    )
    return {
        "comma": f"{a}{draw(st.sampled_from([',', ', ', ' ,']))}{b}",
        "semicolon": f"{a};{b}",
        "local-comma": f"{local_b},{a}",  # the reported attack: `postmaster,someone@elsewhere.example`
        "display": f"{name} <{a}>",
        "angle": f"<{a}>",
        "group": f"{name.strip() or 'g'}:{a};",
        "quoted": f'"{local_b},x"@{a.split("@", 1)[1]}',
        "comment": f"{a}({local_b})",
        "space": f"{local_b} {a}",
        "crlf": f"{a}\r\nBcc: {b}",
    }[form]


@settings(max_examples=budget.examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=addr_specs())
def test_property_one_addr_spec_is_accepted_and_notifies_one_recipient(spec: str) -> None:
    subject = Subject(id="u-1", email=spec)
    msg = EmailMessage()
    msg["To"] = subject.email
    assert getaddresses([str(msg["To"])]) == [("", spec)]


@settings(max_examples=budget.examples(300), deadline=None)
@given(bad=not_one_addr_spec())
def test_property_anything_but_one_addr_spec_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="one address"):
        Subject(id="u-1", email=bad)
