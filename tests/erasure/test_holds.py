"""Litigation holds: keyed by an HMAC of the subject id (never the id), audited place/release,
reasons that name the subject refused, and the CLI never prints the subject id."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, cast

import apsw
import pytest
from typer.testing import CliRunner

from cli.hold import app as hold_app
from erasure.config import Home
from erasure.errors import InputError, NotFound
from memory import holds
from memory.schema import create, meta

SUBJECT = "subj-7731"
OTHER = "user-000042"


@pytest.fixture
def conn(home: Home) -> apsw.Connection:
    return create(home.store_dir)


def test_holds_name_the_subject_by_keyed_hash_only(conn: apsw.Connection, home: Home) -> None:
    hold_id = holds.place(conn, SUBJECT, "litigation matter 2025-17", "legal-team")
    secret = bytes.fromhex(meta(conn, "subject_key_secret"))
    expected = hmac.new(secret, SUBJECT.encode(), hashlib.sha256).hexdigest()
    assert holds.subject_key(conn, SUBJECT) == expected
    assert conn.execute("SELECT hold_id, subject_key FROM holds").fetchall() == [(hold_id, expected)]
    # the id is in no column of the holds table nor in the audit log (only in the vault)
    assert SUBJECT not in repr(conn.execute("SELECT * FROM holds").fetchall())
    assert SUBJECT not in repr(conn.execute("SELECT * FROM audit_log").fetchall())


def test_place_count_and_release(conn: apsw.Connection) -> None:
    assert holds.active_holds(conn, SUBJECT) == 0
    a = holds.place(conn, SUBJECT, "matter A", "legal")
    b = holds.place(conn, SUBJECT, "matter B", "legal")
    holds.place(conn, OTHER, "matter C", "legal")
    assert holds.active_holds(conn, SUBJECT) == 2
    assert holds.release(conn, SUBJECT, "matters settled", "legal") == [a, b]
    assert holds.active_holds(conn, SUBJECT) == 0
    assert holds.active_holds(conn, OTHER) == 1
    with pytest.raises(NotFound):
        holds.release(conn, SUBJECT, "again", "legal")
    listed = holds.list_holds(conn)
    assert [(h.hold_id, h.active, h.release_reason) for h in listed] == [
        (a, False, "matters settled"),
        (b, False, "matters settled"),
        (3, True, None),
    ]


def test_place_and_release_are_audited(conn: apsw.Connection) -> None:
    holds.place(conn, SUBJECT, "matter A", "legal")
    holds.release(conn, SUBJECT, "settled", "legal")
    rows = cast(list[tuple[str, str]], conn.execute("SELECT event, fields FROM audit_log ORDER BY seq").fetchall())
    assert [r[0] for r in rows] == ["hold.place", "hold.release"]
    place_fields = json.loads(rows[0][1])
    assert place_fields["subject_id"].keys() == {"commit"} and place_fields["reason"] == "matter A"
    assert (
        cast(
            tuple[Any, ...], conn.execute("SELECT count(*) FROM audit_vault WHERE subject_id=?", (SUBJECT,)).fetchone()
        )[0]
        == 2
    )


@pytest.mark.parametrize("reason", [f"hold for {SUBJECT}", f"re {SUBJECT.upper()} case", "   "])
def test_reason_naming_the_subject_is_refused(conn: apsw.Connection, reason: str) -> None:
    with pytest.raises(InputError):
        holds.place(conn, SUBJECT, reason, "legal")
    assert cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM holds").fetchone())[0] == 0
    assert cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM audit_log").fetchone())[0] == 0


def test_release_reason_naming_the_subject_is_refused(conn: apsw.Connection) -> None:
    holds.place(conn, SUBJECT, "matter", "legal")
    with pytest.raises(InputError):
        holds.release(conn, SUBJECT, f"done with {SUBJECT}", "legal")
    assert holds.active_holds(conn, SUBJECT) == 1


def test_cli_place_list_release_never_prints_the_subject(conn: apsw.Connection, home: Home) -> None:
    runner = CliRunner()
    h = ["--home", str(home.root)]
    placed = runner.invoke(hold_app, ["place", "--subject-id", SUBJECT, "--reason", "matter 9", *h, "--json"])
    assert placed.exit_code == 0, placed.output
    assert json.loads(placed.output) == {"hold_id": 1, "active_holds": 1}
    for args in (["list", *h], ["list", "--json", *h]):
        out = runner.invoke(hold_app, args)
        assert out.exit_code == 0, out.output
        assert SUBJECT not in out.output
    [row] = json.loads(runner.invoke(hold_app, ["list", "--json", *h]).output)
    assert row["subject_key_prefix"] == holds.subject_key(conn, SUBJECT)[:12] and row["active"] is True
    released = runner.invoke(hold_app, ["release", "--subject-id", SUBJECT, "--reason", "settled", *h])
    assert released.exit_code == 0 and SUBJECT not in released.output
    assert holds.active_holds(conn, SUBJECT) == 0
    refused = runner.invoke(hold_app, ["place", "--subject-id", SUBJECT, "--reason", f"about {SUBJECT}", *h])
    assert isinstance(refused.exception, InputError)
