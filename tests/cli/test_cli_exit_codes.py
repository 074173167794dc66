"""Exit codes of the `erasure` entry point (`cli.main.main`), as the README's table states them:
usage errors print click's usage and exit 2, never a traceback; another tenant's request exits 6
before any flow starts; impossible dates, deeply nested JSON and endless files are bad input (2).

The entry point runs in this process (`main()` with its arguments); the two cases that would eat
all memory before the fix run in a subprocess with an address-space limit."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from erasure import request_records
from erasure.config import PROJECT_ROOT, Home
from erasure.engine import open_engine
from tests.cli_fixtures import erasure

FIXTURES = Path(__file__).parents[1] / "fixtures" / "requests"


@pytest.fixture
def cli_home(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return home


# --- usage errors ----------------------------------------------------------------------------------

USAGE_ERRORS = {
    "unknown top-level flag": (["--no-such-flag"], "No such option"),
    "unknown flag of a command": (["request", "submit", "--no-such-flag", "x.json"], "No such option"),
    "missing argument": (["request", "submit"], "Missing argument"),
    "missing argument of ingest": (["ingest"], "Missing argument"),
    "missing required option": (["request", "pause", "req-1"], "Missing option"),
    "not a number": (["store", "init", "--frames", "many"], "Invalid value"),
    "unknown command": (["no-such-command"], "No such command"),
}


@pytest.mark.parametrize(("args", "what"), USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_a_usage_error_prints_the_usage_and_exits_2(cli_home: Home, args: list[str], what: str) -> None:
    res = erasure(*args, "--home", str(cli_home.root)) if args[0] != "--no-such-flag" else erasure(*args)
    assert res.code == 2, res
    assert "Usage: erasure" in res.err and what in res.err, res.err
    assert "Traceback" not in res.err + res.out


def test_a_group_without_its_command_prints_its_help_and_exits_2(cli_home: Home) -> None:
    res = erasure("request")
    assert res.code == 2, res
    assert "Usage: erasure request" in res.err + res.out
    assert "Traceback" not in res.err + res.out


def test_help_exits_0(cli_home: Home) -> None:
    res = erasure("request", "submit", "--help")
    assert res.code == 0, res
    assert "Usage: erasure request submit" in res.out


def test_the_installed_entry_point_exits_2_on_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "ERASURE_HOME": str(tmp_path / "home"), "PREFECT_HOME": str(tmp_path / "prefect")}
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "ingest", "--no-such-flag"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Usage: erasure ingest" in proc.stderr and "No such option: --no-such-flag" in proc.stderr
    assert "Traceback" not in proc.stderr


# --- bad request files -----------------------------------------------------------------------------


def _envelope(**changes: object) -> dict[str, object]:
    body: dict[str, object] = json.loads((FIXTURES / "gdpr.json").read_text())
    body.update(changes)
    return body


@pytest.mark.parametrize(
    "received_at",
    [
        "0001-01-01T00:00:00+01:00",  # to UTC: before year 1
        "0001-01-01T00:00:00Z",  # deadline arithmetic before the calendar's start
        "0001-01-05T00:00:00-14:00",
        "9999-12-31T23:59:59-01:00",  # to UTC: after year 9999
        "9999-12-31T00:00:00Z",
        "1899-12-31T23:00:00Z",  # before any law this engine knows
    ],
)
def test_received_at_out_of_range_is_bad_input(cli_home: Home, tmp_path: Path, received_at: str) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(_envelope(received_at=received_at)))
    res = erasure("request", "submit", str(path), "--home", str(cli_home.root))
    assert res.code == 2, res
    assert res.err.startswith(f"error: {path}: received_at: "), res.err
    assert "Traceback" not in res.err
    assert not cli_home.engine_db.exists()


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"a":' * 100_000,
        json.dumps(_envelope()).replace('"reason": "', '"reason": ' + "[" * 50_000 + '"', 1),
    ],
    ids=["100k brackets", "100k objects", "nested inside a field"],
)
def test_deeply_nested_request_json_is_bad_input(cli_home: Home, tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.json"
    path.write_text(text)
    res = erasure("request", "submit", str(path), "--home", str(cli_home.root))
    assert res.code == 2, res
    assert res.err.startswith(f"error: {path}: ") and "nested" in res.err, res.err
    assert not cli_home.engine_db.exists()


def _limit_memory() -> None:
    limit = 1 << 30  # 1 GiB of address space: enough for the CLI, far too little to read /dev/zero whole
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.parametrize(
    "args", [["request", "submit", "/dev/zero"], ["ingest", "/dev/zero"]], ids=["request submit", "ingest"]
)
def test_the_zero_device_as_input_is_bad_input_not_an_out_of_memory_kill(tmp_path: Path, args: list[str]) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "ERASURE_HOME": str(home), "PREFECT_HOME": str(tmp_path / "prefect")}
    if args[0] == "ingest":
        assert erasure("store", "init", "--home", str(home)).code == 0
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("error: /dev/zero"), proc.stderr[-2000:]
    assert len(proc.stderr.splitlines()) == 1
    assert not (home / "engine" / "engine.db").exists()


# --- refusals of `request run` before any flow starts ----------------------------------------------


@pytest.fixture(scope="module")
def migrated_prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Prefect home whose database is migrated (once for this module: about 10 s)."""
    from cli import prefect_api

    ph = tmp_path_factory.mktemp("prefect")
    old = os.environ.get("PREFECT_HOME")
    os.environ["PREFECT_HOME"] = str(ph)
    try:
        prefect_api.migrate_database(Home.resolve(tmp_path_factory.mktemp("h")), say=False)
    finally:
        if old is None:
            os.environ.pop("PREFECT_HOME", None)
        else:
            os.environ["PREFECT_HOME"] = old
    return ph


def _flow_runs(prefect_home: Path) -> int:
    import sqlite3

    db = sqlite3.connect(prefect_home / "prefect.db")
    try:
        return int(db.execute("SELECT count(*) FROM flow_run").fetchone()[0])
    finally:
        db.close()


def test_another_tenants_request_exits_6_before_any_flow_starts(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migrated_prefect_home: Path
) -> None:
    monkeypatch.setenv("PREFECT_HOME", str(migrated_prefect_home))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    h = str(home.root)
    assert erasure("store", "init", "--tenant", "acme", "--home", h).code == 0
    path = tmp_path / "req.json"
    path.write_text(json.dumps(_envelope(tenant_id="globex")))
    assert erasure("request", "submit", str(path), "--home", h).code == 0
    assert erasure("keys", "generate", "--role", "engine", "--home", h).code == 0

    res = erasure("request", "run", "req-gdpr-0001", "--home", h)
    assert res.code == 6, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "tenant" in lines[0], res.err
    assert "Traceback" not in res.err + res.out
    assert _flow_runs(migrated_prefect_home) == 0
    engine = open_engine(home.engine_db)
    try:
        assert request_records.get(engine, "req-gdpr-0001").state.value == "submitted"
        assert request_records.steps(engine, "req-gdpr-0001") == []
    finally:
        engine.close()


def test_an_unknown_request_exits_4_before_any_flow_starts(
    home: Home, monkeypatch: pytest.MonkeyPatch, migrated_prefect_home: Path
) -> None:
    monkeypatch.setenv("PREFECT_HOME", str(migrated_prefect_home))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    h = str(home.root)
    assert erasure("store", "init", "--home", h).code == 0
    assert erasure("keys", "generate", "--role", "engine", "--home", h).code == 0
    res = erasure("request", "run", "req-nobody-0001", "--home", h)
    assert res.code == 4, res
    assert res.err.strip().count("\n") == 0 and "Traceback" not in res.err + res.out
    assert _flow_runs(migrated_prefect_home) == 0


@pytest.mark.parametrize("until", ["9999-12-31", "0001-01-01"])
def test_an_extension_to_the_calendars_edge_is_bad_input(
    cli_home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, until: str
) -> None:
    from datetime import UTC, datetime, timedelta

    monkeypatch.setenv("ERASURE_LEGAL_TZ", "America/New_York" if until.startswith("9999") else "Asia/Tokyo")
    path = tmp_path / "req.json"
    path.write_text(json.dumps(_envelope(received_at=(datetime.now(UTC) - timedelta(hours=1)).isoformat())))
    h = str(cli_home.root)
    assert erasure("request", "submit", str(path), "--home", h).code == 0
    res = erasure("request", "extend", "req-gdpr-0001", "--reason", "complex request", "--until", until, "--home", h)
    assert res.code == 2, res
    assert res.err.startswith("error: ") and "Traceback" not in res.err, res.err


@pytest.mark.parametrize("where", ["under a file", "a file"])
def test_a_home_that_cannot_be_made_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    home = blocker / "home" if where == "under a file" else blocker
    res = erasure("request", "list", "--home", str(home))
    assert res.code == 3, res
    assert res.err.startswith("error: ") and res.err.count("\n") == 1 and "Traceback" not in res.err, res.err
