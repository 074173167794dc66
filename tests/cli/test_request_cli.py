"""`erasure request ...` through typer's CliRunner on the real app and a real engine database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from erasure import request_records
from erasure.config import PROJECT_ROOT, Home
from erasure.engine import open_engine
from erasure.errors import Conflict, InputError, NotFound
from erasure.models import StepRecord, StepStatus
from erasure.tiers import CASCADE_ORDER

FIXTURES = Path(__file__).parents[1] / "fixtures" / "requests"
IDENTIFIERS = ["subj-0001", "ada.example@example.org", "Ada Example", "+44 20 7946 0001"]


@pytest.fixture
def cli_home(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    # `home_of` exports PREFECT_HOME into this process: keep it inside the test.
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    for var in ("ERASURE_HOLIDAYS", "ERASURE_LEGAL_TZ", "ERASURE_TARGET_DAYS_BEFORE", "ERASURE_INTERNAL_BOUND_DAYS"):
        monkeypatch.delenv(var, raising=False)
    return home


def run(home: Home, *args: str) -> Any:
    return CliRunner().invoke(app, ["request", *args, "--home", str(home.root)])


def run_json(home: Home, *args: str) -> Any:
    result = run(home, *args, "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def fresh_envelope(tmp_path: Path, rid: str = "req-live-1", basis: str = "GDPR") -> Path:
    """An envelope received an hour ago, so its clock is still running."""
    body = json.loads((FIXTURES / "gdpr.json").read_text())
    body.update(request_id=rid, legal_basis=basis, received_at=(datetime.now(UTC) - timedelta(hours=1)).isoformat())
    p = tmp_path / f"{rid}.json"
    p.write_text(json.dumps(body))
    return p


def test_submit_and_show_json(cli_home: Home) -> None:
    out = run_json(cli_home, "submit", str(FIXTURES / "gdpr.json"))
    assert out == {
        "request_id": "req-gdpr-0001",
        "legal_basis": "GDPR",
        "created": True,
        "deadline": "2024-02-29T23:59:59.999999Z",
        "target": "2024-02-22T23:59:59.999999Z",
    }
    assert datetime.fromisoformat(out["deadline"]).utcoffset() == timedelta(0)

    again = run_json(cli_home, "submit", str(FIXTURES / "gdpr.json"))
    assert again == {**out, "created": False}

    shown = run_json(cli_home, "show", "req-gdpr-0001")
    assert shown["state"] == "submitted"
    assert shown["deadline"] == out["deadline"]
    assert shown["target"] == out["target"]
    assert (shown["paused"], shown["extended"]) == (False, False)
    assert shown["data_classes"] == [t.value for t in CASCADE_ORDER]
    assert shown["received_at"] == "2024-01-31T08:30:00.000000Z"
    assert shown["steps"] == []
    expected_left = (datetime(2024, 2, 29, tzinfo=UTC).date() - datetime.now(UTC).date()).days
    assert shown["days_left"] == expected_left < 0


def test_outputs_never_name_the_subject(cli_home: Home) -> None:
    texts = [run(cli_home, "submit", str(FIXTURES / "gdpr.json")).output]
    for args in (["show", "req-gdpr-0001"], ["show", "req-gdpr-0001", "--json"], ["list"], ["list", "--json"]):
        result = run(cli_home, *args)
        assert result.exit_code == 0
        texts.append(result.output)
    assert "req-gdpr-0001" in texts[1]
    blob = "\n".join(texts).lower()
    for ident in IDENTIFIERS:
        assert ident.lower() not in blob


def test_show_includes_the_step_summary(cli_home: Home) -> None:
    run_json(cli_home, "submit", str(FIXTURES / "gdpr.json"))
    conn = open_engine(cli_home.engine_db)
    t0 = datetime(2024, 2, 2, tzinfo=UTC)
    for step, before in (("vectors", 9), ("working", 2)):
        request_records.upsert_step(
            conn,
            StepRecord(
                request_id="req-gdpr-0001",
                step=step,
                status=StepStatus.erased,
                before_count=before,
                after_count=0,
                started_at=t0,
            ),
        )
    conn.close()
    shown = run_json(cli_home, "show", "req-gdpr-0001")
    assert shown["steps"] == [
        {"step": "working", "status": "erased", "before_count": 2, "after_count": 0},
        {"step": "vectors", "status": "erased", "before_count": 9, "after_count": 0},
    ]
    table = run(cli_home, "show", "req-gdpr-0001").output
    assert "vectors" in table and "erased" in table


def test_list_json_soonest_deadline_first(cli_home: Home) -> None:
    for name in ("popia.json", "gdpr.json", "ccpa.json"):
        run_json(cli_home, "submit", str(FIXTURES / name))
    rows = run_json(cli_home, "list")
    assert [r["request_id"] for r in rows] == ["req-gdpr-0001", "req-ccpa-0001", "req-popia-0001"]
    assert [r["legal_basis"] for r in rows] == ["GDPR", "CCPA", "POPIA"]
    assert all(r["state"] == "submitted" and r["deadline"].endswith("Z") for r in rows)


def test_pause_resume_extend(cli_home: Home, tmp_path: Path) -> None:
    sub = run_json(cli_home, "submit", str(fresh_envelope(tmp_path)))
    paused = run_json(cli_home, "pause", "req-live-1", "--reason", "identity verification")
    assert paused["paused"] is True
    assert run_json(cli_home, "show", "req-live-1")["state"] == "paused"
    resumed = run_json(cli_home, "resume", "req-live-1", "--reason", "identity verified")
    assert resumed["paused"] is False
    assert resumed["deadline"] >= sub["deadline"]  # moved by the (tiny) paused time
    extended = run_json(cli_home, "extend", "req-live-1", "--reason", "complex request")
    assert extended["extended"] is True
    assert (datetime.fromisoformat(extended["deadline"]) - datetime.fromisoformat(sub["deadline"])).days >= 59
    shown = run_json(cli_home, "show", "req-live-1")
    assert (shown["state"], shown["extended"], shown["deadline"]) == ("submitted", True, extended["deadline"])


def test_extend_until_a_day(cli_home: Home, tmp_path: Path) -> None:
    sub = run_json(cli_home, "submit", str(fresh_envelope(tmp_path, "req-ccpa-live", "CCPA")))
    day = (datetime.fromisoformat(sub["deadline"]) + timedelta(days=10)).date().isoformat()
    out = run_json(cli_home, "extend", "req-ccpa-live", "--reason", "volume", "--until", day)
    assert out["deadline"] == f"{day}T23:59:59.999999Z"


def snapshot(home: Home) -> list[Any]:
    conn = open_engine(home.engine_db)
    try:
        return [
            conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
            for t in ("requests", "vault", "clock_events", "engine_events")
        ]
    finally:
        conn.close()


def test_bad_envelope_raises_input_error_and_writes_nothing(cli_home: Home, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"request_id": "../x"}')
    result = run(cli_home, "submit", str(bad))
    assert isinstance(result.exception, InputError)
    assert result.exit_code != 0
    assert str(result.exception).startswith(f"{bad}: request_id:")
    assert not cli_home.engine_db.exists()


def test_conflict_and_refusals_write_nothing(cli_home: Home, tmp_path: Path) -> None:
    run_json(cli_home, "submit", str(FIXTURES / "gdpr.json"))
    before = snapshot(cli_home)
    body = json.loads((FIXTURES / "gdpr.json").read_text())
    body["reason"] = "a different lawful reason"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(body))
    assert isinstance(run(cli_home, "submit", str(other)).exception, Conflict)
    # The 2024 deadline has passed: notice of an extension is too late.
    assert isinstance(run(cli_home, "extend", "req-gdpr-0001", "--reason", "late").exception, Conflict)
    assert isinstance(
        run(cli_home, "extend", "req-gdpr-0001", "--reason", "x", "--until", "soon").exception, InputError
    )
    assert isinstance(run(cli_home, "pause", "req-gdpr-0001", "--reason", "Ada asked").exception, InputError)
    assert isinstance(run(cli_home, "show", "nope").exception, NotFound)
    assert isinstance(run(cli_home, "resume", "nope", "--reason", "x").exception, NotFound)
    assert snapshot(cli_home) == before


def test_entry_point_prints_one_error_line_and_exit_code(cli_home: Home, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"request_id": "r1", "tenant_id": "t", ')
    env = {**os.environ, "ERASURE_HOME": str(cli_home.root)}
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "request", "submit", str(bad)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env=env,
        timeout=60,
    )
    assert proc.returncode == InputError.exit_code
    assert proc.stderr == f"error: {bad}: line 1 column 40: Expecting property name enclosed in double quotes\n"
    assert proc.stdout == ""
