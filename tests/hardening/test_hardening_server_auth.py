"""Issue 23, service mode, item 1: any local user ran commands as the operator.

`erasure server start` served Prefect's API on 127.0.0.1 with no credentials: another local user
(`nobody`) created flow runs from our deployments, released a litigation hold through the ordinary
forms, and with `job_variables.command` overridden made the worker run a shell as root.

Here a real `erasure server start` (server, pool, deployments and one worker) in a fresh home, and the
attacker's HTTP requests sent as the OS user `nobody` (runuser) with the system's Python and urllib:
- without credentials every API call but the health check is refused (401);
- even with the credentials, a run that overrides the command, the environment or the working folder
  is refused, and nothing the attacker planted runs (each attack plants what it would run);
- the credentials are the home's own, in `keys/` with mode 0600, unreadable by `nobody`, and every
  client the project starts (CLI, worker, the runs' own processes) has them.

A property test over the class of job-variable overrides checks the pool's template with Prefect's own
server-side validation and process-worker configuration.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.config import Home
from tests import budget
from tests.process_fixtures import clean_env, erasure, free_port

pytestmark = pytest.mark.prefect  # `erasure server start`: a Prefect server and its worker

START_TIMEOUT = 600
RUN_TIMEOUT = 240.0
SYSTEM_PYTHON = "/usr/bin/python3"
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"

#: The attacker's client: the system's Python, standard library only, run as `nobody`.
ATTACKER = r"""
import base64, json, os, sys, urllib.error, urllib.request
api, method, path, body = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
req = urllib.request.Request(api + path, method=method, data=body.encode() if body else None,
                             headers={"Content-Type": "application/json"})
auth = os.environ.get("STOLEN_AUTH")
if auth:
    req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        print(json.dumps({"status": r.status, "body": r.read().decode()}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": e.read().decode()}))
"""


def as_nobody(api: str, method: str, path: str, body: Any = None, auth: str | None = None) -> dict[str, Any]:
    """One HTTP request to the API as the OS user `nobody`; returns {"status", "body"}. A 503 (Prefect's
    server on SQLite, busy: seen in a full run at load 4) is tried again, as Prefect's own client does and
    an attacker would: it is no answer about the credential."""
    for attempt in range(8):
        out = _as_nobody_once(api, method, path, body, auth)
        if out["status"] != 503:
            break
        time.sleep(0.5 * 2**attempt)
    return out


def _as_nobody_once(api: str, method: str, path: str, body: Any, auth: str | None) -> dict[str, Any]:
    env = {"PATH": "/usr/bin:/bin", **({"STOLEN_AUTH": auth} if auth else {})}
    res = subprocess.run(
        [
            RUNUSER,
            "-u",
            "nobody",
            "--",
            SYSTEM_PYTHON,
            "-c",
            ATTACKER,
            api,
            method,
            path,
            json.dumps(body) if body is not None else "",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd="/",
    )
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


@dataclass
class Server:
    root: Path
    home: Home
    api: str
    env: dict[str, str]
    started: dict[str, Any] = field(default_factory=dict)
    """What `erasure server start --json` printed."""


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    if os.geteuid() != 0 or shutil.which("runuser") is None or not Path(SYSTEM_PYTHON).exists():
        pytest.skip("needs root, runuser and /usr/bin/python3 to act as the user nobody")
    from proof.keys import generate_keypair

    root = Path(tempfile.mkdtemp(prefix="erasure-h23-auth-", dir="/tmp"))
    root.chmod(0o711)
    h = Home.resolve(root / "home", root / "evidence").ensure()
    generate_keypair("engine", h.keys_dir)
    env = clean_env(ERASURE_HOME=str(h.root), ERASURE_EVIDENCE=str(h.evidence_root))
    res = erasure(env, "server", "start", "--port", str(free_port()), "--workers", "1", "--json", timeout=START_TIMEOUT)
    if res.returncode != 0:
        erasure(env, "server", "stop")
        shutil.rmtree(root, ignore_errors=True)
        raise AssertionError(f"erasure server start failed:\n{res.stdout}\n{res.stderr}")
    started = json.loads(res.stdout)
    srv = Server(root, h, started["api_url"], env, started)
    try:
        yield srv
    finally:
        erasure(env, "server", "stop")
        shutil.rmtree(root, ignore_errors=True)


def auth_file(h: Home) -> Path:
    return h.keys_dir / "prefect-api.auth"


def operator_client(srv: Server) -> Any:
    """The operator's own HTTP client: the home's credentials, read from its key file."""
    from cli.prefect_auth import api_client

    path = auth_file(srv.home)
    # the unfixed code has none (and needs none); Prefect's own client retries a busy server's 503 as the CLI does
    return api_client(srv.api, path.read_text().strip() if path.exists() else None)


def deployment_id(srv: Server, name: str) -> str:
    with operator_client(srv) as c:
        r = c.get(f"/deployments/name/{name}/{name}")
        r.raise_for_status()
        return str(r.json()["id"])


def wait_final(srv: Server, run_id: str, timeout: float = RUN_TIMEOUT, stop: Any = None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    with operator_client(srv) as c:
        while True:
            run = c.get(f"/flow_runs/{run_id}").json()
            state = run.get("state") or {}
            if state.get("type") in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                return dict(run)
            if (stop is not None and stop()) or time.monotonic() > deadline:
                return dict(run)
            time.sleep(1.0)


def test_the_credentials_are_the_homes_own_and_private(server: Server) -> None:
    path = auth_file(server.home)
    assert path.exists(), "no credential file in the home's keys/"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(path.read_text().strip()) >= 32
    peek = subprocess.run(
        [RUNUSER, "-u", "nobody", "--", "cat", str(path)], capture_output=True, text=True, check=False
    )
    assert peek.returncode != 0 and not peek.stdout


def test_start_names_the_request_desk_it_started_and_it_answers(server: Server) -> None:
    """`server start` printed the desk as "(not started)" when it read the desk's address before the desk
    (a child it had just spawned) had written it: it now waits for the desk to listen."""
    import httpx

    desk = server.started.get("desk_url")
    assert isinstance(desk, str) and desk.startswith("http://127.0.0.1:"), server.started
    assert httpx.get(f"{desk}/login", timeout=10).status_code == 200


def test_nobody_without_credentials_gets_401(server: Server) -> None:
    """The ordinary forms: reading the deployments, releasing a hold, triggering an erasure."""
    assert as_nobody(server.api, "GET", "/health")["status"] == 200  # Prefect's unauthenticated probe
    assert as_nobody(server.api, "POST", "/deployments/filter", {})["status"] == 401
    for name, params in (
        ("hold-release", {"request_id": "req-held-1", "reference": "x", "actor": "nobody"}),
        ("erasure-request", {"request_id": "req-held-1"}),
    ):
        res = as_nobody(
            server.api, "POST", f"/deployments/{deployment_id(server, name)}/create_flow_run", {"parameters": params}
        )
        assert res["status"] == 401, (name, res)
    # A wrong credential is no better than none.
    res = as_nobody(server.api, "POST", "/deployments/filter", {}, auth="guessed-" + "x" * 40)
    assert res["status"] == 401


def _plant(root: Path, name: str) -> tuple[Path, Path]:
    """A folder `nobody` owns and writes, and the marker file a planted payload would write as root."""
    d = root / f"attack-{name}"
    d.mkdir()
    os.chown(d, 65534, 65534)
    return d, d / "PWNED"


def _payload(marker: Path) -> str:
    return f"import os\nopen({str(marker)!r}, 'w').write(str(os.getuid()))\n"


def command_override(root: Path, srv: Server) -> tuple[dict[str, Any], Path]:
    _d, marker = _plant(root, "command")
    cmd = f"sh -c 'id -u > {marker}; cat {srv.home.keys_dir / 'engine.pem'} >> {marker}'"
    return {"command": cmd}, marker


def env_override_pythonpath(root: Path, srv: Server) -> tuple[dict[str, Any], Path]:
    d, marker = _plant(root, "env")
    (d / "sitecustomize.py").write_text(_payload(marker))
    return {"env": {"PYTHONPATH": str(d)}}, marker


def working_dir_override_shadowing_prefect(root: Path, srv: Server) -> tuple[dict[str, Any], Path]:
    """`python -m prefect.engine` started in a folder that holds a package named `prefect`."""
    d, marker = _plant(root, "workdir")
    (d / "prefect").mkdir()
    (d / "prefect" / "__init__.py").write_text(_payload(marker))
    return {"working_dir": str(d)}, marker


@pytest.mark.parametrize("attack", [command_override, env_override_pythonpath, working_dir_override_shadowing_prefect])
def test_a_run_cannot_override_command_env_or_working_dir(server: Server, attack: Any) -> None:
    """Even with the credentials (the operator's own, say stolen), `job_variables` that change what the
    worker runs are refused, and nothing planted runs."""
    job_variables, marker = attack(server.root, server)
    token = auth_file(server.home).read_text().strip() if auth_file(server.home).exists() else None
    res = as_nobody(
        server.api,
        "POST",
        f"/deployments/{deployment_id(server, 'sla-monitor')}/create_flow_run",
        {"parameters": {}, "job_variables": job_variables},
        auth=token,
    )
    if res["status"] in (200, 201):
        run = wait_final(server, json.loads(res["body"])["id"], stop=marker.exists)
        time.sleep(2.0)
        assert not marker.exists(), f"the worker ran the attacker's payload as uid {marker.read_text()[:8]!r}"
        assert run["state"]["type"] == "COMPLETED", run["state"]
    assert res["status"] == 422, res
    assert not marker.exists()


def test_the_deployments_own_command_runs_with_the_credentials(server: Server) -> None:
    """The worker (and the run's own process) has the credentials: an ordinary run completes; the CLI's
    `server status` reads the schedule through the authenticated API."""
    with operator_client(server) as c:
        r = c.post(f"/deployments/{deployment_id(server, 'sla-monitor')}/create_flow_run", json={"parameters": {}})
        assert r.status_code == 201, r.text
        run_id = r.json()["id"]
    run = wait_final(server, run_id)
    assert run["state"]["type"] == "COMPLETED", run["state"]
    res = erasure(server.env, "server", "status", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["running"] and set(doc["scheduled"]) == {"sla-monitor", "intake"}


# --- the class of overrides, against Prefect's own validation and process worker --------------------

DEPLOYMENT_ENV = {
    "ERASURE_HOME": "/srv/erasure/home",
    "ERASURE_EVIDENCE": "/srv/erasure/evidence",
    "ERASURE_PROJECT_DIR": "/srv/erasure/project",
    "ERASURE_HOLIDAYS": "",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
}
DEPLOYMENT_VARS: dict[str, Any] = {"env": DEPLOYMENT_ENV}

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
_env_values = st.dictionaries(
    st.sampled_from([*DEPLOYMENT_ENV, "PATH", "PYTHONPATH", "LD_PRELOAD", "X"]),
    st.sampled_from(["", "1", "/tmp/evil", *DEPLOYMENT_ENV.values()]) | st.none(),
    max_size=4,
)
_overrides = st.dictionaries(
    st.sampled_from(["command", "env", "working_dir", "name", "labels", "stream_output", "image", "cwd"]),
    st.one_of(_json, _env_values, st.just(DEPLOYMENT_ENV), st.text(max_size=30)),
    max_size=4,
)


def _server_accepts(template: dict[str, Any], run_vars: dict[str, Any]) -> bool:
    """Prefect's server-side check of a deployment run's job variables (what create_flow_run calls)."""
    from prefect.server.api.validation import _validate_work_pool_job_variables
    from prefect.utilities.schema_tools.validation import ValidationError
    from starlette.exceptions import HTTPException

    try:
        # no session: the check reads the database only for block references in defaults, and the template has none
        asyncio.run(
            _validate_work_pool_job_variables(
                None,  # type: ignore[arg-type]
                "erasure-local",
                template,
                DEPLOYMENT_VARS,
                run_vars,
                ignore_required=False,
                ignore_invalid_defaults=True,
            )
        )
    except (ValidationError, HTTPException):
        return False
    return True


def _worker_configuration(template: dict[str, Any], run_vars: dict[str, Any]) -> Any:
    """The process worker's job configuration for a run: deployment and run variables merged the way
    `BaseJobConfiguration.from_flow_run` merges them (the run's env over the deployment's), then the
    pool's template applied (Prefect's client resolves block references in it: the test harness)."""
    from prefect.workers.process import ProcessJobConfiguration

    values = json.loads(json.dumps(DEPLOYMENT_VARS))
    run = json.loads(json.dumps(run_vars))
    if isinstance(values.get("env"), dict):
        values["env"].update(run.pop("env", {}) or {})
    values.update(run)
    return asyncio.run(ProcessJobConfiguration.from_template_and_values(template, values))


@settings(max_examples=budget.examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run_vars=_overrides)
def test_no_override_changes_what_the_worker_runs(prefect_harness: None, run_vars: dict[str, Any]) -> None:
    """For any run's job variables: the server refuses them, or the worker's command, working folder and
    environment are exactly those the deployment alone gives (no command: Prefect's engine; no working
    folder: a fresh temporary one; the deployment's env)."""
    from cli.serve import pool_job_template

    template = pool_job_template(DEPLOYMENT_ENV)
    if not _server_accepts(template, run_vars):
        return
    try:
        cfg = _worker_configuration(template, run_vars)
    except Exception:  # a configuration the worker cannot build runs nothing (the run crashes)
        return
    assert cfg.command is None
    assert cfg.working_dir is None
    assert cfg.env == DEPLOYMENT_ENV


def test_the_pool_template_refuses_the_three_attacks_offline(prefect_harness: None) -> None:
    from cli.serve import pool_job_template

    template = pool_job_template(DEPLOYMENT_ENV)
    for attack in (
        {"command": "sh -c id"},
        {"env": {"PYTHONPATH": "/tmp/x"}},
        {"working_dir": "/tmp/x"},
        {"env": {**DEPLOYMENT_ENV, "ERASURE_HOME": "/tmp/other"}},
    ):
        assert not _server_accepts(template, attack), attack
    assert _server_accepts(template, {}) and _server_accepts(template, {"env": DEPLOYMENT_ENV})
