"""Issue 9, case 7 (free text): every free-text field that reaches the store's append-only audit log,
the engine or Prefect (hold and suppression reasons, actors, case references, clock reasons) is
refused, exit 2, before anything is written, when it holds an identifier of the request's subject
(in any spelling, or the email's local part, or a name token) or of any subject in the vault. The
message names the field and the kind of identifier, never the value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from erasure.config import Home
from erasure.errors import InputError
from erasure.sqlite import transaction
from erasure.subject import Subject
from memory import holds, suppression
from memory.schema import create
from service.clocks import clock_operation
from service.consent import allow_reingest
from service.holds import place_hold, release_hold
from tests.cascade_fixtures import submit

SUBJECT = Subject(
    id="subj-zqvxk-4471", email="annabel.quist@example.org", name="Annabel Quist", phone="+44 79 5833 1277"
)
OTHER = Subject(id="user-bob-0042", email="bob.marsh@example.net", name="Bob Marsh", phone="+1 555 0100")
VALUES = [v for s in (SUBJECT, OTHER) for v in s.identifiers()] + ["annabel", "quist", "447958331277"]

# (text, kind): the request's subject in several spellings, and another subject of the vault
NAMING = [
    ("hold for Annabel Quist", "name"),
    ("matter of ANNABEL  QUIST (court 4)", "name"),
    ("Quist v. Example Ltd", "name"),
    ("per annabel.quist@example.org", "email"),
    ("per mail from annabel.quist", "name"),  # a mailbox without its domain is no address: it spells the name
    ("caller +447958331277", "phone"),
    ("caller 07958-331277", "phone"),
    ("re SUBJ-ZQVXK-4471", "id"),
    ("joint matter with bob.marsh@example.net", "email"),  # another subject in the vault
    ("joint matter with Bob Marsh", "name"),
]


@pytest.fixture
def vault(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    conn = create(home.store_dir)
    with transaction(conn):  # what an earlier erasure leaves: a sticky key of request req-door-1
        suppression.record(conn, "chat", "conv-1001", "req-door-1")
    conn.close()
    submit(home, "req-door-1", SUBJECT)
    submit(home, "req-door-2", OTHER)
    return home


def cli(h: Home, *args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--home", str(h.root)])


def store_state(h: Home) -> tuple[Any, ...]:
    conn = create(h.store_dir)
    try:
        return (
            conn.execute("SELECT * FROM holds").fetchall(),
            conn.execute("SELECT * FROM audit_log").fetchall(),
            conn.execute("SELECT * FROM audit_vault").fetchall(),
            conn.execute("SELECT * FROM erased_subjects").fetchall(),
        )
    finally:
        conn.close()


def engine_text(h: Home) -> str:
    from erasure.engine import open_engine

    conn = open_engine(h.engine_db)
    try:
        return repr([conn.execute(f"SELECT * FROM {t}").fetchall() for t in ("clock_events", "engine_events")])
    finally:
        conn.close()


def assert_refused(result: Any, field: str, kind: str) -> None:
    assert isinstance(result.exception, InputError), (result.output, result.exception)
    assert result.exception.exit_code == 2
    msg = str(result.exception)
    assert field in msg and kind in msg, msg
    for v in VALUES:
        assert v.casefold() not in (msg + result.output).casefold()


@pytest.mark.parametrize(("text", "kind"), NAMING)
def test_hold_place_reason_naming_a_subject_is_refused(vault: Home, text: str, kind: str) -> None:
    before = store_state(vault)
    assert_refused(cli(vault, "hold", "place", "--subject-id", SUBJECT.id, "--reason", text), "reason", kind)
    assert store_state(vault) == before


@pytest.mark.parametrize(("text", "kind"), NAMING[:3] + NAMING[-1:])
def test_hold_actor_and_release_reason_are_checked(vault: Home, text: str, kind: str) -> None:
    assert_refused(
        cli(vault, "hold", "place", "--subject-id", SUBJECT.id, "--reason", "litigation 2025-17", "--actor", text),
        "actor",
        kind,
    )
    assert (
        cli(
            vault,
            "hold",
            "place",
            "--subject-id",
            SUBJECT.id,
            "--reason",
            "litigation 2025-17",
            "--actor",
            "legal-team",
        ).exit_code
        == 0
    )
    before = store_state(vault)
    assert_refused(cli(vault, "hold", "release", "--subject-id", SUBJECT.id, "--reason", text), "reason", kind)
    assert store_state(vault) == before


def test_hold_on_a_subject_outside_the_vault_still_refuses_its_id(vault: Home) -> None:
    result = cli(vault, "hold", "place", "--subject-id", "cust-998877", "--reason", "matter of CUST-998877")
    assert_refused(result, "reason", "id")


@pytest.mark.parametrize(("text", "kind"), NAMING)
def test_suppression_allow_reason_naming_a_subject_is_refused(vault: Home, text: str, kind: str) -> None:
    before = store_state(vault)
    assert_refused(cli(vault, "suppression", "allow", "chat", "conv-1001", "--reason", text), "reason", kind)
    assert store_state(vault) == before  # the key is still suppressed, nothing audited


@pytest.mark.parametrize(("text", "kind"), [NAMING[0], NAMING[5], NAMING[-2]])
def test_clock_reasons_are_checked_against_the_vault(vault: Home, text: str, kind: str) -> None:
    # req-door-2 is the other subject's request: a reason naming the first subject is refused too
    before = engine_text(vault)
    assert_refused(cli(vault, "request", "extend", "req-door-2", "--reason", text), "reason", kind)
    assert_refused(cli(vault, "request", "pause", "req-door-1", "--reason", text), "reason", kind)
    assert engine_text(vault) == before


@pytest.mark.parametrize(("text", "kind"), [NAMING[2], NAMING[4], NAMING[8]])
def test_operations_refuse_case_references_and_actors(vault: Home, text: str, kind: str) -> None:
    # the UI's forms build the audited reason as "<code> (<case reference>)"
    before = store_state(vault)
    for call in (
        lambda: place_hold(vault, "req-door-1", f"litigation ({text})", "legal-team"),
        lambda: place_hold(vault, "req-door-1", "litigation (case-17)", text),
        lambda: release_hold(vault, "req-door-1", f"matter-closed ({text})", "legal-team"),
        lambda: allow_reingest(vault, "req-door-1", f"subject-reconsented ({text})", "dpo"),
        lambda: clock_operation(vault, "extend", "req-door-1", f"complexity ({text})"),
    ):
        with pytest.raises(InputError) as err:
            call()
        assert kind in str(err.value)
    assert store_state(vault) == before


def test_plain_reasons_pass_and_the_audit_log_names_nobody(vault: Home) -> None:
    assert (
        cli(
            vault,
            "hold",
            "place",
            "--subject-id",
            SUBJECT.id,
            "--reason",
            "litigation 2025-17 (court 4)",
            "--actor",
            "legal-team",
        ).exit_code
        == 0
    )
    assert cli(vault, "hold", "release", "--subject-id", SUBJECT.id, "--reason", "matter closed").exit_code == 0
    ok = cli(vault, "suppression", "allow", "chat", "conv-1001", "--reason", "re-consent in writing, ticket 88")
    assert ok.exit_code == 0, (ok.output, ok.exception)
    conn = create(vault.store_dir)
    try:
        log = repr(conn.execute("SELECT * FROM audit_log").fetchall()).casefold()
        assert holds.active_holds(conn, SUBJECT.id) == 0
    finally:
        conn.close()
    for v in VALUES:
        assert v.casefold() not in log
