"""The console explains itself (issue 35): a run that ends with residue ends without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from erasure.config import PROJECT_ROOT, Home
from tests.cascade_fixtures import SUBJECT, build_store, submit


@pytest.fixture
def ready(home, tmp_path: Path, prefect_harness):  # type: ignore[no-untyped-def]
    from proof.keys import generate_keypair

    build_store(home, tmp_path)
    submit(home)
    generate_keypair("engine", home.keys_dir)
    return home


def plant_residue(home: Home) -> Path:
    """A file in the store's folder that no tier owns, holding the subject's email: the byte scan finds it."""
    leak: Path = home.store_dir / "exports" / "crm-dump.txt"
    leak.parent.mkdir(parents=True, exist_ok=True)
    leak.write_text(f"contact: {SUBJECT.email}\n")
    return leak


def logs_of(flow_run_id: Any) -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return "\n".join(str(x.message) for x in logs)


def run_deployed(flow_name: str, entrypoint: str, parameters: dict[str, Any]) -> Any:
    """Run a flow as a worker does: a deployment's flow run, executed by `python -m prefect.engine` in a
    subprocess against the session's server. Returns the finished flow run."""
    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name(flow_name)
        dep = client.create_deployment(
            flow_id=flow_id, name="console-test", entrypoint=entrypoint, path=str(PROJECT_ROOT)
        )
        run = client.create_flow_run_from_deployment(dep, parameters=parameters)
        env = {
            **os.environ,
            **get_current_settings().to_environment_variables(exclude_unset=True),
            "PREFECT__FLOW_RUN_ID": str(run.id),
        }
        subprocess.run(
            [sys.executable, "-m", "prefect.engine"], cwd=PROJECT_ROOT, env=env, capture_output=True, timeout=600
        )
        return client.read_flow_run(run.id)


def test_a_residue_run_ends_without_a_traceback(ready) -> None:  # type: ignore[no-untyped-def]
    plant_residue(ready)
    run = run_deployed("erasure-request", "flows/erasure_request.py:erasure_request", {"request_id": "req-ann-1"})
    assert run.state.type.value == "FAILED" and run.state.message == "residue found in: bytes", run.state
    text = logs_of(run.id)
    assert "Finished in state Residue(" in text  # residue is `Residue` in every flow (issue 36)
    assert "Traceback" not in text and "TypeError" not in text, text[-3000:]


def test_a_residue_run_names_the_file_by_its_scan_manifest_label(ready) -> None:  # type: ignore[no-untyped-def]
    """Issue 35: "residue found in: bytes" named no file. verification.json now lists where the byte scan
    found the subject, each file by its scan-manifest label (a path that could name someone as its keyed
    hash), and the run summary shows that list to the operator."""
    from erasure.ledger import ledger_key
    from flows.erasure_request import erasure_request
    from flows.run_report import residue_locations
    from probes import manifest

    leak = plant_residue(ready)
    erasure_request("req-ann-1", return_state=True)
    ver = json.loads((ready.evidence_dir("req-ann-1") / "verification.json").read_text())
    rel = str(leak.relative_to(ready.store_dir))
    expected = manifest.label(ledger_key(ready), ready.store_dir.name, rel)
    assert ver["residue_files"] == [{"tier": "bytes", "file": expected, "hits": 1}]
    assert expected.startswith("hmac:") and str(SUBJECT.email) not in json.dumps(ver["residue_files"])
    assert any(loc["location"] == f"file `{expected}`" for loc in residue_locations(ver))


def test_the_sla_table_names_who_must_act_and_fits_1280_px(home: Home) -> None:
    from erasure import request_records as reqs
    from erasure.clocks import LegalBasis
    from erasure.engine import open_engine
    from erasure.sla import sla_rows
    from erasure.states import RequestState
    from flows.sla_monitor import TABLE_COLUMNS, open_kinds, table_rows
    from tests.service.test_sla import NOW, POLICY
    from tests.service.test_sla import submit as sla_submit

    conn = open_engine(home.engine_db)
    try:
        for rid, days_ago in (("r-residue", 5), ("r-dpo", 5), ("r-late", 50), ("r-late-dpo", 50), ("r-new", 1)):
            sla_submit(conn, rid, LegalBasis.CCPA, days_ago)
        reqs.set_state(conn, "r-residue", RequestState.exception, "residue found in: bytes", now=NOW)
        reqs.open_exception(conn, "r-residue", "bytes", "residue", "verification", now=NOW)
        for rid in ("r-dpo", "r-late-dpo"):
            reqs.set_state(conn, rid, RequestState.awaiting_attestation, None, now=NOW)
        rows = sla_rows(conn, now=NOW, policy=POLICY)
        table = {r["request_id"]: r for r in table_rows(rows, open_kinds(conn, rows))}
    finally:
        conn.close()
    assert table["r-residue"]["state"] == "residue" and table["r-residue"]["status"] != "ok"
    assert table["r-residue"]["needs"] == "operator (residue)"
    assert (table["r-dpo"]["status"], table["r-dpo"]["needs"]) == ("needs action", "DPO (attest)")
    assert table["r-late"]["status"] == "BREACHED" and table["r-late"]["needs"] == "operator + DPO"
    assert table["r-late-dpo"]["needs"] == "DPO (attest) + operator"
    assert (table["r-new"]["status"], table["r-new"]["needs"]) == ("ok", "")
    # 1280 px: the UI gives a column about 8 px a character plus padding; 7 short columns fit
    assert len(TABLE_COLUMNS) <= 7
    widest = {c: max(len(str(c)), *(len(str(r[c])) for r in table.values())) for c in TABLE_COLUMNS}
    assert sum(widest.values()) * 8 + 32 * len(TABLE_COLUMNS) <= 1280, widest


def test_server_status_says_starting_while_a_start_is_under_way_and_a_second_start_waits(
    home: Home, tmp_path: Path
) -> None:
    import fcntl
    import time

    from cli.server_state import state_dir
    from tests.cli_fixtures import erasure

    d = state_dir(home)
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "start.lock", "a") as first:  # a first `erasure server start`, still starting
        fcntl.flock(first, fcntl.LOCK_EX)
        res = erasure("server", "status", "--home", str(home.root))
        assert res.code == 0 and "starting" in res.out and "not running" not in res.out, res
        env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect")}
        second = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "server", "start", "--home", str(home.root), "--port", "4391"],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            time.sleep(15)  # time to import and reach the lock; a start that did not wait would spawn by now
            assert second.poll() is None, second.communicate()[0]
            assert not (d / "state.json").exists()  # it started nothing and stopped nothing: it waits
        finally:
            second.terminate()
            out = second.communicate(timeout=30)[0]
        assert "is starting" in out and "waiting for it" in out, out
    res = erasure("server", "status", "--home", str(home.root))
    assert res.code == 1 and "not running" in res.out
