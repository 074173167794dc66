"""Issue 9, cases 4 and 7 (request ids): a request id matches the documented pattern and contains
none of the subject's identifiers in any spelling (nor the email's local part, nor a name token of
3+ characters), nor an identifier of any subject already in the vault. Refused at submit (exit 2)
and at intake from the inbox, with a message that names the field and the kind, never the value."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import InputError
from erasure.mentions import mentions_subject
from erasure.subject import Subject
from service.intake import drain_inbox
from tests.engine_of import EngineOf

SUBJECT = {
    "id": "subj-zqvxk-4471",
    "email": "annabel.quist@example.org",
    "name": "Annabel Quist",
    "phone": "+44 79 5833 1277",
}
OTHER = {"id": "user-bob-0042", "email": "bob.marsh@example.net", "name": "Bob Marsh", "phone": "+1 555 0100"}
VALUES = [v for s in (SUBJECT, OTHER) for v in s.values()] + ["annabel", "quist", "447958331277"]


@pytest.fixture
def cli_home(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    return home


def envelope(request_id: str, subject: dict[str, str] = SUBJECT) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "tenant_id": "default",
        "subject": subject,
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(hours=1)).isoformat(),
        "requester_identity_proof_ref": "idv/2231",
        "reason": "Art.17 request via the privacy portal",
    }


def submit(h: Home, tmp_path: Path, body: dict[str, Any], name: str = "req.json") -> Any:
    p = tmp_path / name
    p.write_text(json.dumps(body))
    return CliRunner().invoke(app, ["request", "submit", str(p), "--home", str(h.root), "--json"])


def vaulted(h: Home) -> list[str]:
    conn = open_engine(h.engine_db)
    try:
        return [r[0] for r in conn.execute("SELECT request_id FROM requests ORDER BY request_id")]
    finally:
        conn.close()


def assert_refused(result: Any, kind: str) -> None:
    assert isinstance(result.exception, InputError), (result.output, result.exception)
    assert result.exception.exit_code == 2
    msg = str(result.exception)
    assert "request_id" in msg and any(f"subject's {k}" in msg for k in kind.split("|"))
    low = (msg + result.output).casefold()
    for v in VALUES:
        assert v.casefold() not in low


@pytest.mark.parametrize(
    ("request_id", "kind"),
    [
        ("subj-zqvxk-4471", "id"),  # equal to the subject id (case 7)
        ("SUBJ-ZQVXK-4471", "id"),  # another letter case
        ("req-subj-zqvxk-4471-2026", "id"),  # inside
        ("Annabel-Quist-annabel.quist-example.org", "email|name"),  # name and email (case 4)
        ("req-annabel.quist-example.org", "email"),  # the email's local part
        ("req-AnnabelQuist", "name"),  # the name with its space squeezed out
        ("req-quist-0001", "name"),  # one name token of 3+ characters
        ("req-447958331277", "phone"),  # the phone in E.164 digits
        ("req-07958.331277", "phone"),  # the national spelling
    ],
)
def test_request_id_naming_the_subject_is_refused_at_submit(
    cli_home: Home, tmp_path: Path, request_id: str, kind: str
) -> None:
    result = submit(cli_home, tmp_path, envelope(request_id))
    assert_refused(result, kind)
    assert vaulted(cli_home) == []


@pytest.mark.parametrize("request_id", ["req id with spaces", "req@example", "-leading-dash", "x" * 129, ""])
def test_request_id_must_match_the_pattern(cli_home: Home, tmp_path: Path, request_id: str) -> None:
    result = submit(cli_home, tmp_path, envelope(request_id))
    assert isinstance(result.exception, InputError) and "request_id" in str(result.exception)
    assert vaulted(cli_home) == []


def test_a_plain_request_id_is_accepted(cli_home: Home, tmp_path: Path) -> None:
    for rid in ("req-gdpr-0001", "REQ-2026-11-02.a", "req-ccpa-7"):
        result = submit(cli_home, tmp_path, envelope(rid), name=f"{rid}.json")
        assert result.exit_code == 0, (result.output, result.exception)
    assert vaulted(cli_home) == sorted(["req-gdpr-0001", "REQ-2026-11-02.a", "req-ccpa-7"])


def test_request_id_naming_another_vaulted_subject_is_refused(cli_home: Home, tmp_path: Path) -> None:
    assert submit(cli_home, tmp_path, envelope("req-other-1", OTHER), "a.json").exit_code == 0
    result = submit(cli_home, tmp_path, envelope("req-user-bob-0042", SUBJECT), "b.json")
    assert_refused(result, "id")
    assert vaulted(cli_home) == ["req-other-1"]


def test_inbox_intake_applies_the_same_rule(cli_home: Home, engine_of: EngineOf) -> None:
    inbox = cli_home.inbox_dir
    (inbox / "a.json").write_text(json.dumps(envelope("req-intake-1")))
    (inbox / "b.json").write_text(json.dumps(envelope("Annabel.Quist-2026")))
    (inbox / "c.json").write_text(json.dumps(envelope("subj-zqvxk-4471")))
    result = drain_inbox(engine_of(cli_home), cli_home)
    assert (result.vaulted, result.rejected) == (["req-intake-1"], 2)
    assert vaulted(cli_home) == ["req-intake-1"]
    errors = sorted(p.read_text() for p in (inbox / "rejected").glob("*.error.txt"))
    assert len(errors) == 2 and all("request_id" in e for e in errors)
    assert any("name" in e for e in errors) and any("the subject's id" in e for e in errors)


def test_mentions_subject_is_built_on_identity() -> None:
    s = Subject.model_validate(SUBJECT)
    # every spelling the identity module knows
    assert mentions_subject("case of SUBJ-ZQVXK-4471", s) == "id"
    assert mentions_subject("call +447958331277", s) == "phone"
    assert mentions_subject("call 07958 331277", s) == "phone"
    assert mentions_subject("ANNABEL.QUIST@EXAMPLE.ORG wrote", s) == "email"
    assert mentions_subject("ｓｕｂｊ－ｚｑｖｘｋ－４４７１", s) == "id"  # NFKC (full-width)
    # partial tokens are matched as tokens in free text, not as substrings of other words
    assert mentions_subject("Quist asked again", s) == "name"
    assert mentions_subject("a quisting matter", s) is None
    assert mentions_subject("litigation hold, matter 2025-17", s) is None
