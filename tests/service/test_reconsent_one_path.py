"""Issue 36: re-consent has one code path. Whether it comes by request (the `suppression-allow`
deployment, `service.consent.allow_reingest`), by key (`erasure suppression allow SOURCE SOURCE_REF`)
or by the identity of an ingest file's line (`--identity-of FILE:LINE`), the engine's event log gets the
same event, `suppression.allowed`, on the request whose erasure it undoes, with counts only. Before
issue 36 the CLI's two ways wrote nothing to the engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from erasure.config import Home
from erasure.engine import open_engine
from service.consent import allow_reingest
from tasks.runner import run_cascade
from tests.cascade_fixtures import SUBJECT, build_store, submit

REQUEST = "req-one-path-1"


@pytest.fixture
def erased(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    build_store(home, tmp_path)
    submit(home, REQUEST)
    run_cascade(REQUEST, home)
    return home


def allowed_events(h: Home) -> list[tuple[str | None, dict[str, Any]]]:
    engine = open_engine(h.engine_db)
    try:
        rows = engine.execute(
            "SELECT request_id, detail FROM engine_events WHERE event='suppression.allowed' ORDER BY rowid"
        ).fetchall()
    finally:
        engine.close()
    return [(None if r is None else str(r), json.loads(str(d))) for r, d in rows]


def cli(h: Home, *args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--home", str(h.root)])


def test_reconsent_by_key_writes_the_engine_event_of_the_erasing_request(erased: Home) -> None:
    ok = cli(erased, "suppression", "allow", "chat", "conv-1001", "--reason", "re-consent, ticket 36", "--actor", "dpo")
    assert ok.exit_code == 0, (ok.output, ok.exception)
    assert allowed_events(erased) == [(REQUEST, {"keys": 1, "source": None, "identities": 0})]


def test_reconsent_by_identity_writes_the_engine_event_of_the_erasing_request(erased: Home, tmp_path: Path) -> None:
    line = {"source": "chat", "source_ref": "conv-9001", "subject": SUBJECT.model_dump(exclude_none=True)}
    path = tmp_path / "again.jsonl"
    path.write_text(json.dumps({**line, "content": "a new item"}) + "\n")
    ok = cli(erased, "suppression", "allow", "--identity-of", f"{path}:1", "--reason", "re-consent", "--actor", "dpo")
    assert ok.exit_code == 0, (ok.output, ok.exception)
    events = allowed_events(erased)
    assert [r for r, _d in events] == [REQUEST]
    detail = events[0][1]
    assert (detail["keys"], detail["source"]) == (0, None) and detail["identities"] >= 1
    for v in SUBJECT.identifiers():  # counts and ids only
        assert v.casefold() not in json.dumps(events).casefold()


def test_a_refused_reconsent_writes_no_event(erased: Home) -> None:
    missing = cli(erased, "suppression", "allow", "chat", "no-such-ref", "--reason", "re-consent")
    assert missing.exception is not None and getattr(missing.exception, "exit_code", None) == 4  # NotFound
    assert allowed_events(erased) == []


def test_the_deployment_and_the_cli_write_the_same_event(erased: Home) -> None:
    allow_reingest(erased, REQUEST, "re-consent, ticket 36", "dpo")
    [(rid, detail)] = allowed_events(erased)
    assert rid == REQUEST and set(detail) == {"keys", "source", "identities"}
