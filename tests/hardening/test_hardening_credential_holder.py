"""Issue 34, finding 1: a credential holder ran commands as the worker's OS user (root here). With the
Prefect credential anyone could PATCH the `erasure-local` pool's `job_configuration.command`, add a
`run_shell_script` pull step to a deployment, or give it job variables; the next run of that deployment
executed it. The locked template came back only at the next `server start`.

The attacks, as they happened, against `erasure server start`'s own server and worker: the attacker is
the OS user `nobody` holding the stolen credential (the system's Python, tests/test_hardening_server_auth).
Each plants a payload that would write `id -u` to a marker in a folder `nobody` owns, then starts an
ordinary run of `sla-monitor`. The worker runs prefect.yaml's flow from the installed code
(cli/prefect_worker.py): the run completes and no payload runs. A deployment prefect.yaml does not name,
created by the attacker on the pool, does not run at all.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.test_hardening_server_auth import (
    Server,
    _plant,
    as_nobody,
    auth_file,
    deployment_id,
    operator_client,
    server,
    wait_final,
)

__all__ = ["server"]  # the module-scoped `erasure server start` of the auth tests, one of this module's own

pytestmark = pytest.mark.prefect


def _stolen(srv: Server) -> str:
    return auth_file(srv.home).read_text().strip()


def _patch_pool(srv: Server, template: dict[str, Any]) -> None:
    res = as_nobody(srv.api, "PATCH", "/work_pools/erasure-local", {"base_job_template": template}, auth=_stolen(srv))
    assert res["status"] in (200, 204), res  # the credential allows the PATCH: what it no longer allows is below


def _shell_marker(marker: Path) -> str:
    return f"sh -c 'id -u > {marker}'"


def _run_sla_monitor(srv: Server, marker: Path) -> dict[str, Any]:
    res = as_nobody(
        srv.api,
        "POST",
        f"/deployments/{deployment_id(srv, 'sla-monitor')}/create_flow_run",
        {"parameters": {}},
        auth=_stolen(srv),
    )
    assert res["status"] in (200, 201), res
    run = wait_final(srv, json.loads(res["body"])["id"], stop=marker.exists)
    time.sleep(2.0)
    return run


def test_a_patched_pool_command_does_not_run(server: Server) -> None:
    _d, marker = _plant(server.root, "pool-command")
    with operator_client(server) as c:
        template = c.get("/work_pools/erasure-local").json()["base_job_template"]
    template["job_configuration"]["command"] = _shell_marker(marker)
    _patch_pool(server, template)
    run = _run_sla_monitor(server, marker)
    assert not marker.exists(), f"the worker ran the pool's command as uid {marker.read_text()[:8]!r}"
    assert run["state"]["type"] == "COMPLETED", run["state"]


def test_a_run_shell_script_pull_step_does_not_run(server: Server) -> None:
    _d, marker = _plant(server.root, "pull-step")
    steps = [{"prefect.deployments.steps.run_shell_script": {"script": _shell_marker(marker)}}]
    dep = deployment_id(server, "sla-monitor")
    res = as_nobody(server.api, "PATCH", f"/deployments/{dep}", {"pull_steps": steps}, auth=_stolen(server))
    assert res["status"] in (200, 204), res
    run = _run_sla_monitor(server, marker)
    assert not marker.exists(), f"the run executed the pull step as uid {marker.read_text()[:8]!r}"
    assert run["state"]["type"] == "COMPLETED", run["state"]


def test_job_variables_added_to_a_deployment_do_not_run(server: Server) -> None:
    d, marker = _plant(server.root, "job-variables")
    (d / "sitecustomize.py").write_text(f"import os\nopen({str(marker)!r}, 'w').write(str(os.getuid()))\n")
    from prefect.workers.process import ProcessWorker

    # First the pool's template goes back to Prefect's default, which lets a deployment set all three.
    default = ProcessWorker.get_default_base_job_template()
    _patch_pool(server, default)
    dep = deployment_id(server, "sla-monitor")
    variables = {"env": {"PYTHONPATH": str(d)}, "command": _shell_marker(marker), "working_dir": str(d)}
    res = as_nobody(server.api, "PATCH", f"/deployments/{dep}", {"job_variables": variables}, auth=_stolen(server))
    assert res["status"] in (200, 204), res
    run = _run_sla_monitor(server, marker)
    assert not marker.exists(), f"the run took the deployment's job variables, uid {marker.read_text()[:8]!r}"
    assert run["state"]["type"] == "COMPLETED", run["state"]


def test_a_deployment_prefect_yaml_does_not_name_does_not_run(server: Server) -> None:
    """The attacker's own deployment of one of our flows, with a shell pull step, on our pool."""
    _d, marker = _plant(server.root, "own-deployment")
    with operator_client(server) as c:
        flow_id = c.get(f"/deployments/{deployment_id(server, 'sla-monitor')}").json()["flow_id"]
    body = {
        "name": "attacker",
        "flow_id": flow_id,
        "work_pool_name": "erasure-local",
        "entrypoint": "flows.sla_monitor:sla_monitor",
        "pull_steps": [{"prefect.deployments.steps.run_shell_script": {"script": _shell_marker(marker)}}],
    }
    res = as_nobody(server.api, "POST", "/deployments/", body, auth=_stolen(server))
    assert res["status"] in (200, 201), res
    run_res = as_nobody(
        server.api, "POST", f"/deployments/{json.loads(res['body'])['id']}/create_flow_run", {}, auth=_stolen(server)
    )
    assert run_res["status"] in (200, 201), run_res
    run = wait_final(server, json.loads(run_res["body"])["id"], timeout=90, stop=marker.exists)
    time.sleep(2.0)
    assert not marker.exists(), f"the attacker's deployment ran its pull step as uid {marker.read_text()[:8]!r}"
    assert run["state"]["type"] != "COMPLETED", run["state"]
