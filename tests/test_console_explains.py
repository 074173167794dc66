"""The console explains itself (issue 35): a run that ends with residue ends without a traceback."""

from __future__ import annotations

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
    assert "Finished in state Failed" in text
    assert "Traceback" not in text and "TypeError" not in text, text[-3000:]
