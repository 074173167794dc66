"""`erasure serve` (what `make serve` runs): the compliance team's console on this machine, in the
foreground (`erasure server start` is the same in the background).

In order: point Prefect at `<ERASURE_HOME>/prefect` (offline, analytics off); reuse the home's running
server (`erasure server start`: its state file and its credential, cli/prefect_auth.py), refuse a port
anything else answers on (another user's Prefect server is never adopted), else (with
`--postgres`, after starting the home's PostgreSQL cluster) start `prefect server start` on 127.0.0.1
and wait for its health check; create the process work pool `erasure-local` if it does not exist; run
`prefect --no-prompt deploy --all` from the project directory (prefect.yaml); start a worker on the
pool; optionally serve Prometheus metrics; trigger one sla-monitor run so the SLA table is there at
once; print `ready: ...`, and wait. Ctrl-C or SIGTERM stops everything it started (worker, then server,
then PostgreSQL), each child by its own process group, and nothing it reused. Children's output goes
to `<PREFECT_HOME>/logs/`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any

import httpx
import typer

from cli import prefect_api, prefect_auth
from cli.server_state import own_server, read_state
from cli.shell import HomeOpt, home_of
from erasure.config import PROJECT_ROOT, Home
from erasure.errors import ConfigError, ErasureError
from erasure.service_user import become, runs_as, take_home

POOL = "erasure-local"
HEALTH_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
#: Settings the flows read from the environment (erasure.clocks.ClockPolicy.from_env). prefect.yaml
#: passes them to every flow run (`job_variables.env`), so a worker started anywhere runs with them.
CLOCK_SETTINGS = ("ERASURE_HOLIDAYS", "ERASURE_INTERNAL_BOUND_DAYS", "ERASURE_TARGET_DAYS_BEFORE", "ERASURE_LEGAL_TZ")


def serve_env(
    h: Home, host: str, port: int, base: dict[str, str] | None = None, project_dir: Path = PROJECT_ROOT
) -> dict[str, str]:
    """The environment of every child: this home, Prefect's home inside it, offline, our API URL, and
    what `prefect deploy` writes into every deployment's `job_variables.env` (prefect.yaml): the home,
    the evidence folder, the project folder (the runs' working directory) and the clock settings (empty
    when unset: the flows then take the defaults); and the home's credential, which the server requires
    and every client (worker, flow run, `prefect deploy`) sends."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "ERASURE_HOME": str(h.root),
            "ERASURE_EVIDENCE": str(h.evidence_root),
            "ERASURE_PROJECT_DIR": str(project_dir),
            "PREFECT_HOME": str(h.prefect_home),
            # The server copies its UI into this folder: by default the virtualenv's, which a server run by
            # another user (the home's, erasure/service_user.py) may not write, and which stays shared.
            "PREFECT_UI_STATIC_DIRECTORY": str(h.prefect_home / "ui"),
            "PREFECT_API_URL": f"http://{host}:{port}/api",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
            "PREFECT_UI_ENABLED": "true",
        }
    )
    for name in CLOCK_SETTINGS:
        env.setdefault(name, "")
    env.pop("PREFECT_API_KEY", None)
    env.update(prefect_auth.server_env(prefect_auth.home_secret(h)))
    return env


def api_answers(api_url: str) -> bool:
    """True when a Prefect API answers its health check at `api_url`."""
    try:
        r = httpx.get(f"{api_url}/health", timeout=2.0)
        return r.status_code == 200 and r.json() is True
    except (httpx.HTTPError, ValueError):
        return False


def deployment_env(env: dict[str, str], project_dir: Path = PROJECT_ROOT) -> dict[str, str]:
    """The `job_variables.env` that `prefect deploy` writes into every deployment: prefect.yaml's
    `definitions.work_pool.job_variables.env`, its `{{ $NAME }}` placeholders filled from `env` (as
    `prefect deploy` fills them from its environment; an unset one stays as it is)."""
    import yaml

    doc = yaml.safe_load((project_dir / "prefect.yaml").read_text())
    raw = doc["definitions"]["work_pool"]["job_variables"]["env"]
    return {str(k): _ENV_PLACEHOLDER.sub(lambda m: env.get(m.group(1), m.group(0)), str(v)) for k, v in raw.items()}


_ENV_PLACEHOLDER = re.compile(r"{{\s*\$(\w+)\s*}}")


def pool_job_template(env: dict[str, str]) -> dict[str, Any]:
    """The process pool's base job template: a run cannot change what the worker runs.

    Prefect's default lets a run's `job_variables` set the command, the working folder and the
    environment of the process the worker starts (as root when the worker is root). Here the command
    and the working folder are fixed in `job_configuration` (none: Prefect's engine, in a fresh
    temporary folder; the deployment's `pull:` step then changes into the project) and are no variables;
    `env` must be exactly the deployments' own (`const`), so a run's override of it is refused; and an
    unknown variable is refused (`additionalProperties: false`) rather than ignored. The server checks
    every run's variables against this schema (422 otherwise)."""
    return {
        "job_configuration": {
            "command": None,
            "env": "{{ env }}",
            "labels": "{{ labels }}",
            "name": "{{ name }}",
            "stream_output": "{{ stream_output }}",
            "working_dir": None,
        },
        "variables": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "name": {
                    "anyOf": [{"type": "string"}, {"type": "null"}],
                    "default": None,
                    "title": "Name",
                    "description": "Name given to the flow run's process.",
                },
                "labels": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "title": "Labels",
                    "description": "Labels applied to the flow run's process.",
                },
                "stream_output": {
                    "type": "boolean",
                    "default": True,
                    "title": "Stream Output",
                    "description": "Stream the flow run's output to the worker's log.",
                },
                "env": {
                    "type": "object",
                    "const": dict(env),
                    "title": "Environment Variables",
                    "description": "Pinned to the deployments' own (prefect.yaml): a run cannot change it.",
                },
            },
        },
    }


def ensure_pool(api_url: str, env: dict[str, str], project_dir: Path = PROJECT_ROOT) -> bool:
    """Create the process work pool with `pool_job_template`, or give an existing pool that template
    (its other settings, e.g. a concurrency limit someone set, are kept). `env` is the environment
    `prefect deploy` runs with (its credential is sent). Returns True when it created the pool."""
    template = pool_job_template(deployment_env(env, project_dir))
    with prefect_auth.api_client(api_url, env.get(prefect_auth.CLIENT_VAR)) as c:
        r = c.get(f"/work_pools/{POOL}")
        if r.status_code == 404:
            r = c.post("/work_pools/", json={"name": POOL, "type": "process", "base_job_template": template})
            if r.status_code == 409:  # made meanwhile: give it the template below
                r = c.get(f"/work_pools/{POOL}")
            elif r.status_code in (200, 201):
                return True
        if r.status_code != 200:
            raise ConfigError(f"the Prefect API at {api_url} answered {r.status_code} for the work pool {POOL}")
        if r.json().get("base_job_template") != template:
            p = c.patch(f"/work_pools/{POOL}", json={"base_job_template": template})
            if p.status_code not in (200, 204):
                raise ConfigError(
                    f"the Prefect API at {api_url} refused the job template of the work pool {POOL} ({p.status_code})"
                )
    return False


def prefect_cmd(*args: str) -> list[str]:
    """`prefect ARGS` with the interpreter of this virtualenv."""
    return [sys.executable, "-m", "prefect", *args]


def worker_cmd(project_dir: Path = PROJECT_ROOT) -> list[str]:
    """The pinned worker (cli/prefect_worker.py): runs prefect.yaml's flows from the installed code, never
    the pool's command, a deployment's pull steps or its job variables."""
    return [sys.executable, "-m", "cli.prefect_worker", "--pool", POOL, "--project-dir", str(project_dir)]


def wait_healthy(api_url: str, *, timeout: float = HEALTH_TIMEOUT, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll `<api>/health` until it answers true; `ConfigError` on timeout or if `alive()` turns false."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise ConfigError("the Prefect server exited during start-up: see its log")
        try:
            r = httpx.get(f"{api_url}/health", timeout=2.0)
            if r.status_code == 200 and r.json() is True:
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.3)
    raise ConfigError(f"the Prefect server at {api_url} was not healthy within {timeout:.0f} s")


def port_in_use(host: str, port: int) -> bool:
    """True when something already answers on host:port."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def run_deployment_now(
    api_url: str, name: str, parameters: dict[str, Any] | None = None, secret: str | None = None
) -> str:
    """Create a flow run of deployment `flow/deployment` through the REST API (with the credential
    `secret`, else this process's own); returns its id."""
    flow_name, dep_name = name.split("/", 1)
    with prefect_auth.api_client(api_url, secret or os.environ.get(prefect_auth.CLIENT_VAR)) as c:
        r = c.get(f"/deployments/name/{flow_name}/{dep_name}")
        r.raise_for_status()
        r = c.post(f"/deployments/{r.json()['id']}/create_flow_run", json={"parameters": parameters or {}})
        r.raise_for_status()
        return str(r.json()["id"])


def leave_root(h: Home, *, postgres: bool) -> bool:
    """As root (else nothing): start PostgreSQL as `erasure-pg` when `postgres`, give the home to the user
    runs execute as (erasure/service_user.py), let that user into the cluster, and become it for good.
    Returns whether the cluster is already up (started here, as root)."""
    if os.geteuid() != 0:
        return False
    from cli import postgres as pg

    if postgres:
        pg.start(h)
    pw = take_home(h)
    if postgres:
        pg.let_in(h, pw.pw_uid)
    become(pw, h)
    return postgres


@dataclass
class Stack:
    """The children `erasure serve` started, stopped in reverse order by their process groups."""

    env: dict[str, str]
    log_dir: Path
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    _logs: list[IO[bytes]] = field(default_factory=list)

    def start(self, name: str, cmd: list[str], cwd: Path) -> subprocess.Popen[bytes]:
        """Start a long-running child in its own session; output to `<log_dir>/<name>.log`."""
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append((name, proc))
        return proc

    def run(self, name: str, cmd: list[str], cwd: Path, timeout: float = 300.0) -> None:
        """Run a child to completion; `ConfigError` with the log's path if it fails."""
        path = self.log_dir / f"{name}.log"
        with open(path, "ab") as log:
            rc = subprocess.run(
                cmd,
                cwd=cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            ).returncode
        if rc != 0:
            raise ConfigError(f"`{' '.join(cmd[2:])}` failed (exit {rc}): see {path}")

    def dead(self) -> str | None:
        """The name of a child that has exited, if any."""
        return next((n for n, p in self.procs if p.poll() is not None), None)

    def stop(self) -> None:
        """SIGTERM each child's process group (last started first), SIGKILL what is left after a grace."""
        for _name, proc in reversed(self.procs):
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=STOP_TIMEOUT)
            # Grandchildren (flow runs, uvicorn) share the group: make sure none outlives the leader.
            _signal_group(proc, signal.SIGKILL)
        self.procs.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _say(msg: str) -> None:
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


def _running_server(h: Home, host: str, port: int) -> tuple[str, int] | None:
    """(host, port) of the home's own server to reuse (`erasure server start`: its state file names a
    live Prefect process, and the server there takes the home's credential and refuses requests without
    it). None when host:port is free; `ConfigError` when something else answers there (another user's
    Prefect server, or anything else): never adopted."""
    state = read_state(h)
    if state is not None and own_server(state) and prefect_auth.is_ours(state.api_url, prefect_auth.home_secret(h)):
        return state.host, state.port
    if port_in_use(host, port):
        what = (
            "a Prefect server that is not this home's"
            if api_answers(f"http://{host}:{port}/api")
            else "something that is not this home's Prefect server"
        )
        raise ConfigError(f"{host}:{port} is already in use by {what}: stop it or pass --port")
    return None


def run_console(
    h: Home,
    *,
    host: str = "127.0.0.1",
    port: int = 4200,
    project_dir: Path = PROJECT_ROOT,
    metrics_port: int | None = None,
    sla_now: bool = True,
    postgres: bool = False,
    stop: threading.Event | None = None,
) -> int:
    """Start (or reuse) the server, then pool, deployments, worker (and metrics); block until `stop` is
    set or a child dies; stop everything it started. Returns 0 after a requested stop, 1 when a child
    died. As root: PostgreSQL is started as `erasure-pg`, the home is given to the user runs execute as
    (erasure/service_user.py) and this process becomes that user before anything else starts; the
    cluster then outlives it (`erasure server stop` as root, or the next `serve`, finds it)."""
    stop = stop or threading.Event()
    pg_ready = leave_root(h, postgres=postgres)
    reuse = _running_server(h, host, port)
    if reuse is not None:
        host, port = reuse
    env = serve_env(h, host, port, project_dir=project_dir)
    log_dir = h.prefect_home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    api = env["PREFECT_API_URL"]
    stack = Stack(env, log_dir)
    metrics_server: Any = None
    started_postgres = False
    try:
        t0 = time.monotonic()
        if reuse is not None:
            _say(f"reusing the Prefect server at {api}")
        else:
            if postgres:
                from cli import postgres as pg

                started_postgres = not pg_ready and not pg.is_running(pg.Cluster.of(h))
                env.update((pg.Cluster.of(h) if pg_ready else pg.start(h)).server_env)
                _say(f"PostgreSQL running on {pg.Cluster.of(h).socket_dir}")
            elif prefect_api.database_url_is_default():
                prefect_api.migrate_database(h, home_dir=h.prefect_home)
            server = stack.start(
                "server", prefect_cmd("server", "start", "--host", host, "--port", str(port)), project_dir
            )
            _say(f"starting the Prefect server (PREFECT_HOME={h.prefect_home}) ...")
            wait_healthy(api, alive=lambda: server.poll() is None)
            _say(f"server healthy after {time.monotonic() - t0:.1f} s")
        _say("creating the pool if needed and deploying prefect.yaml ...")
        ensure_pool(api, env, project_dir)
        # The worker starts while prefect.yaml deploys: both take seconds, and runs wait for the worker.
        stack.start("worker", worker_cmd(project_dir), project_dir)
        stack.run("deploy", prefect_cmd("--no-prompt", "deploy", "--all"), project_dir)
        _say(f"deployed after {time.monotonic() - t0:.1f} s")
        if metrics_port:
            from service.metrics import serve_metrics, stop_metrics

            metrics_server = serve_metrics(h, metrics_port, secret=prefect_auth.home_secret(h), addr=host)
            _say(f"metrics: http://{host}:{metrics_port}/metrics (Basic auth: the home's credential)")
        from cli.desk import desk_cmd, desk_port, how_to_log_in

        dport = desk_port(host, port)
        stack.start("desk", desk_cmd(h, host, dport, api), project_dir)
        if sla_now:
            run_deployment_now(api, "sla-monitor/sla-monitor", secret=env[prefect_auth.CLIENT_VAR])
        _say(
            f"ready: Prefect UI at http://{host}:{port}  (logs in {log_dir}; Ctrl-C stops); runs execute as {runs_as()}"
        )
        for line in how_to_log_in(h, f"http://{host}:{port}", f"http://{host}:{dport}"):
            _say(line)
        while not stop.wait(0.5):
            dead = stack.dead()
            if dead is not None:
                _say(f"error: the {dead} exited: see {log_dir / (dead + '.log')}; stopping")
                return 1
        return 0
    finally:
        if metrics_server is not None:
            stop_metrics(metrics_server)
        stack.stop()
        if started_postgres:
            from cli import postgres as pg

            pg.stop(h)
        _say("stopped")


def serve(
    home: HomeOpt = None,
    port: Annotated[int, typer.Option("--port", help="Port of the Prefect server and UI.")] = 4200,
    host: Annotated[str, typer.Option("--host", help="Address to bind (keep it local).")] = "127.0.0.1",
    metrics_port: Annotated[
        int | None,
        typer.Option("--metrics-port", help="Also serve live Prometheus metrics on this port.", show_default=False),
    ] = None,
    sla_now: Annotated[bool, typer.Option("--sla-now/--no-sla-now", help="Run sla-monitor once at start-up.")] = True,
    postgres: Annotated[
        bool, typer.Option("--postgres", help="Prefect's database on the home's PostgreSQL cluster (<home>/postgres).")
    ] = False,
) -> None:
    """Start the local Prefect server + UI, deploy prefect.yaml, start a worker; Ctrl-C stops all."""
    h = home_of(home, as_root=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    rc = run_console(h, host=host, port=port, metrics_port=metrics_port, sla_now=sla_now, postgres=postgres, stop=stop)
    if rc:
        raise typer.Exit(rc)


def main() -> None:
    """`python -m cli.serve`: the serve command on its own (errors as one line and an exit code)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(serve)
    try:
        app(standalone_mode=False)
    except ErasureError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
