"""The erasure-request flow on a real Prefect server (the session's test harness)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from erasure import request_records
from erasure.engine import open_engine
from tests.cascade_fixtures import BYSTANDER, SUBJECT, SUBJECT_PHRASE, build_store, owned_counts, submit
from tests.proof_fixtures import TIERS


@pytest.fixture
def ready(home, tmp_path: Path, prefect_harness):  # type: ignore[no-untyped-def]
    from proof.keys import generate_keypair

    build_store(home, tmp_path)
    submit(home)
    generate_keypair("engine", home.keys_dir)
    return home


def _prefect_files() -> list[Path]:
    """Prefect's own database and result storage: where parameters, logs, results and events land."""
    from prefect.settings import get_current_settings

    s = get_current_settings()
    url = s.server.database.connection_url.get_secret_value() if s.server.database.connection_url else ""
    files = []
    if url.startswith("sqlite"):
        db = Path(url.split("///", 1)[1])
        files += [p for p in db.parent.glob(db.name + "*") if p.is_file()]
    storage = Path(s.results.local_storage_path) if s.results.local_storage_path else None
    if storage and storage.exists():
        files += [p for p in storage.rglob("*") if p.is_file()]
    return files


def test_flow_erases_verifies_and_leaves_nothing_personal_in_prefect(ready) -> None:  # type: ignore[no-untyped-def]
    from flows.erasure_request import erasure_request

    bystander_before = owned_counts(ready, BYSTANDER)
    state = erasure_request("req-ann-1", return_state=True)
    assert state.is_completed(), state.message
    assert all(v == 0 for v in owned_counts(ready, SUBJECT).values())
    assert owned_counts(ready, BYSTANDER) == bystander_before
    ver = json.loads((ready.evidence_dir("req-ann-1") / "verification.json").read_text())
    assert ver["all_clear"] is True and ver["probes"]
    engine = open_engine(ready.engine_db)
    assert request_records.get(engine, "req-ann-1").state.value == "awaiting attestation"
    assert (ready.evidence_dir("req-ann-1") / "proof.tar.gz").exists()
    files = _prefect_files()
    assert files, "found none of Prefect's files to check"
    blob = b"".join(p.read_bytes() for p in files)
    assert b"req-ann-1" in blob  # the check can fail: Prefect did record this run
    for needle in [*SUBJECT.identifiers(), SUBJECT_PHRASE]:
        assert needle.encode() not in blob, "an identifier reached Prefect's storage"


def test_a_completed_request_runs_again_as_a_noop(ready) -> None:  # type: ignore[no-untyped-def]
    from flows.erasure_request import erasure_request

    assert erasure_request("req-ann-1", return_state=True).is_completed()
    again = erasure_request("req-ann-1", return_state=True)
    assert again.is_completed() and "nothing to do" in (again.message or "")


def test_a_held_subject_blocks_the_run_and_nothing_is_erased(ready) -> None:  # type: ignore[no-untyped-def]
    from flows.erasure_request import erasure_request
    from memory import holds
    from memory.schema import open_store

    store = open_store(ready.store_dir)
    holds.place(store, SUBJECT.id, "litigation: case 2026-114", "legal-team")
    store.close()
    before = owned_counts(ready, SUBJECT)
    state = erasure_request("req-ann-1", return_state=True)
    assert state.name == "Blocked" and "held" in (state.message or "")
    assert owned_counts(ready, SUBJECT) == before
    engine = open_engine(ready.engine_db)
    assert request_records.get(engine, "req-ann-1").state.value == "blocked"


def test_a_rebuilt_engine_never_reuses_another_runs_cached_steps(ready, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Seen in the demo: the same home rebuilt, the same request id, and every step came from the
    cache of the previous run while the new store still held the subject."""
    import shutil

    from flows.erasure_request import erasure_request

    assert erasure_request("req-ann-1", return_state=True).is_completed()
    from erasure.ledger import ledger_path
    from erasure.ledger_seal import HEAD_FILE

    # The whole home rebuilt, its ledger of erasures too: with the ledger kept, the new store would be
    # a restored one, refused until replayed (tests/service/test_restore_reference.py).
    for d in (ready.store_dir, ready.engine_dir, ready.evidence_dir("req-ann-1"), ledger_path(ready).parent):
        shutil.rmtree(d)
    # and the ledger's sealed head beside its key (a head without its ledger is a ledger cut short)
    (ready.keys_dir / HEAD_FILE).unlink()
    ready.ensure()
    build_store(ready, tmp_path / "again")
    submit(ready)
    state = erasure_request("req-ann-1", return_state=True)
    assert state.is_completed(), state.message
    assert all(v == 0 for v in owned_counts(ready, SUBJECT).values())


def test_request_run_prints_the_table_and_exits_0(ready) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from cli.main import app

    result = CliRunner().invoke(app, ["request", "run", "req-ann-1"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    for tier in TIERS:
        assert tier in result.output
    assert "all_clear: true" in result.output
    for needle in SUBJECT.identifiers():
        assert needle not in result.output


def test_request_run_under_a_hold_exits_6_and_erases_nothing(ready) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from cli.main import app
    from erasure.errors import RequestBlocked
    from memory import holds
    from memory.schema import open_store

    store = open_store(ready.store_dir)
    holds.place(store, SUBJECT.id, "litigation: case 2026-114", "legal-team")
    store.close()
    before = owned_counts(ready, SUBJECT)
    result = CliRunner().invoke(app, ["request", "run", "req-ann-1"])
    assert isinstance(result.exception, RequestBlocked) and result.exception.exit_code == 6
    assert owned_counts(ready, SUBJECT) == before


def test_request_run_without_an_engine_key_refuses_before_erasing(home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from cli.main import app
    from erasure.errors import ConfigError

    build_store(home, tmp_path)
    submit(home)
    before = owned_counts(home, SUBJECT)
    result = CliRunner().invoke(app, ["request", "run", "req-ann-1"])
    assert isinstance(result.exception, ConfigError) and "erasure keys generate" in str(result.exception)
    assert owned_counts(home, SUBJECT) == before


def test_a_run_that_died_before_verification_verifies_on_rerun_with_the_sealed_fingerprint(ready) -> None:  # type: ignore[no-untyped-def]
    """The first run sealed the fingerprint and finished the cascade, then died: the rerun's probes use
    the needles taken before the cascade (the subject's content is gone by now), and destroy them."""
    from flows.erasure_request import erasure_request
    from service.verification import fingerprint_paths, take_and_seal_fingerprint
    from tasks.runner import run_cascade

    assert take_and_seal_fingerprint("req-ann-1", ready)["fingerprint"] == "taken"
    run_cascade("req-ann-1", ready)
    sealed, key = fingerprint_paths(ready, "req-ann-1")
    assert sealed.exists() and key.exists()
    assert SUBJECT_PHRASE.encode() not in sealed.read_bytes()  # encrypted at rest
    state = erasure_request("req-ann-1", return_state=True)
    assert state.is_completed(), state.message
    ver = json.loads((ready.evidence_dir("req-ann-1") / "verification.json").read_text())
    assert ver["fingerprint"] == "sealed-before-cascade" and ver["all_clear"] is True
    assert not sealed.exists() and not key.exists()
