"""Issue 9, case 5: rejected inbox envelopes. A rejected envelope (one of them named after the
subject's email) used to stay under `inbox/rejected/` whole, in plaintext, under its own name, after
an all-clear erasure. Now it is kept encrypted (AES-GCM, `keys/inbox.key`, 0600) under a random name
for `ERASURE_INBOX_RETENTION_DAYS`, then purged; `inbox_files` is the byte scan's inbox scope, and
`purge_rejected_for` removes every rejected envelope that names a subject being erased."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from erasure.config import Home
from erasure.errors import ConfigError
from erasure.inbox import inbox_files, key_path, purge_rejected_for, read_rejected, rejected_dir
from erasure.subject import Subject
from service.intake import drain_inbox

SUBJECT = Subject(
    id="subj-zqvxk-4471", email="annabel.quist@example.org", name="Annabel Quist", phone="+44 79 5833 1277"
)
OTHER = Subject(id="user-bob-0042", email="bob.marsh@example.net", name="Bob Marsh", phone="+1 555 0100")
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def body(request_id: str, subject: Subject, **extra: Any) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "tenant_id": "default",
        "subject": subject.model_dump(exclude_none=True),
        "legal_basis": "GDPR",
        "received_at": "2026-11-01T09:30:00+01:00",
        "requester_identity_proof_ref": "idv/2231",
        "reason": "Art.17 request via the privacy portal",
        **extra,
    }


def needles(subject: Subject) -> list[bytes]:
    return [v.lower().encode() for v in [*subject.identifiers(), "447958331277", "annabel.quist"]]


def inbox_bytes(h: Home) -> bytes:
    """Every file name and every byte under the inbox, lower-cased."""
    return b"\n".join(str(p.relative_to(h.root)).encode() + b"\n" + p.read_bytes() for p in inbox_files(h)).lower()


@pytest.fixture
def rejected(home: Home) -> Home:
    """Two rejected envelopes for the subject (one named after their email) and one for someone else."""
    inbox = home.inbox_dir
    (inbox / f"{SUBJECT.email}.json").write_text(json.dumps(body("req-1", SUBJECT, legal_basis="HIPAA")))
    (inbox / "b.json").write_text(json.dumps(body("req-2", SUBJECT, received_at="yesterday")))
    (inbox / "c.json").write_text(json.dumps(body("req-3", OTHER, tenant_id="no spaces allowed")))
    result = drain_inbox(home, now=NOW)
    assert (result.vaulted, result.rejected) == ([], 3)
    return home


def test_rejected_envelopes_are_encrypted_under_names_that_carry_nothing(rejected: Home) -> None:
    data = inbox_bytes(rejected)
    for n in needles(SUBJECT) + needles(OTHER):
        assert n not in data
    files = sorted(p.name for p in rejected_dir(rejected).iterdir())
    assert len(files) == 6 and sum(f.endswith(".error.txt") for f in files) == 3
    errors = sorted(p.read_text() for p in rejected_dir(rejected).glob("*.error.txt"))
    assert any("legal_basis" in e for e in errors) and any("received_at" in e for e in errors)
    assert any("tenant_id" in e for e in errors)
    key = key_path(rejected)
    assert key.stat().st_size == 32 and stat.S_IMODE(key.stat().st_mode) == 0o600
    # the team can still read what was rejected, with the key
    sealed = sorted(rejected_dir(rejected).glob("*.rejected"))
    assert sorted(json.loads(read_rejected(rejected, p))["request_id"] for p in sealed) == ["req-1", "req-2", "req-3"]


def test_rejected_envelopes_are_purged_after_the_retention(rejected: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    assert drain_inbox(rejected, now=NOW + timedelta(days=29)).purged == 0
    assert len(list(rejected_dir(rejected).glob("*.rejected"))) == 3
    assert drain_inbox(rejected, now=NOW + timedelta(days=30, seconds=1)).purged == 3
    assert list(rejected_dir(rejected).iterdir()) == []
    monkeypatch.setenv("ERASURE_INBOX_RETENTION_DAYS", "soon")
    with pytest.raises(ConfigError):
        drain_inbox(rejected, now=NOW)


def test_retention_is_configured_in_days(rejected: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERASURE_INBOX_RETENTION_DAYS", "2")
    assert drain_inbox(rejected, now=NOW + timedelta(days=1)).purged == 0
    assert drain_inbox(rejected, now=NOW + timedelta(days=2, seconds=1)).purged == 3


def test_purge_rejected_for_removes_only_the_subjects_envelopes(rejected: Home) -> None:
    assert purge_rejected_for(rejected, SUBJECT) == 2
    assert purge_rejected_for(rejected, SUBJECT) == 0
    left = sorted(rejected_dir(rejected).glob("*.rejected"))
    assert [json.loads(read_rejected(rejected, p))["request_id"] for p in left] == ["req-3"]
    assert len(list(rejected_dir(rejected).glob("*.error.txt"))) == 1


def test_purge_matches_any_spelling_of_any_identifier(home: Home) -> None:
    # rejected for a reason unrelated to the subject; the subject is named only by their phone, nationally
    (home.inbox_dir / "x.json").write_text(
        json.dumps(body("req-x", Subject(id="acct-1", phone="07958 331277"), legal_basis="HIPAA"))
    )
    assert drain_inbox(home, now=NOW).rejected == 1
    assert purge_rejected_for(home, Subject(id="someone-else")) == 0
    assert purge_rejected_for(home, SUBJECT) == 1


def test_plaintext_left_by_older_versions_is_sealed_or_purged(home: Home) -> None:
    old = home.inbox_dir / "rejected"
    old.mkdir()
    name = f"{SUBJECT.email}.json"
    (old / name).write_text(json.dumps(body("req-old", SUBJECT, legal_basis="HIPAA")))
    (old / f"{name}.error.txt").write_text(f"{home.inbox_dir / name}: legal_basis: Input should be 'GDPR'\n")
    (old / "d.json").write_text(json.dumps(body("req-old-2", OTHER, legal_basis="HIPAA")))
    assert purge_rejected_for(home, SUBJECT) == 1  # plaintext is matched as it is
    drain_inbox(home, now=NOW)  # seals what is left
    data = inbox_bytes(home)
    for n in needles(SUBJECT) + needles(OTHER):
        assert n not in data
    assert len(list(old.glob("*.rejected"))) == 1


def test_inbox_files_is_every_file_under_the_inbox(rejected: Home) -> None:
    (rejected.inbox_dir / "pending.json").write_text("{}")
    files = inbox_files(rejected)
    assert rejected.inbox_dir / "pending.json" in files and rejected.inbox_dir / ".intake.lock" in files
    assert sum(p.parent == rejected_dir(rejected) for p in files) == 6
    assert inbox_files(Path(rejected.root)) == files  # a home path works too
