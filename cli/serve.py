"""`erasure serve` (what `make serve` runs): the compliance team's console on this machine, in the
foreground (`erasure server start` is the same in the background).

In order: point Prefect at `<ERASURE_HOME>/prefect` (offline, analytics off); reuse the home's running
server (`erasure server start`) or a Prefect server already answering on host:port, else (with
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

from cli.common import HomeOpt, home_of
from erasure.config import PROJECT_ROOT, Home
from erasure.errors import ConfigError, ErasureError

POOL = "erasure-local"
HEALTH_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
#: Settings the flows read from the environment (erasure.clocks.ClockPolicy.from_env). prefect.yaml
#: passes them to every flow run (`job_variables.env`), so a worker started anywhere runs with them.
CLOCK_SETTINGS = ("ERASURE_HOLIDAYS", "ERASURE_INTERNAL_BOUND_DAYS", "ERASURE_TARGET_DAYS_BEFORE", "ERASURE_LEGAL_TZ")


def serve_env(h: Home, host: str, port: int, base: dict[str, str] | None = None,
              project_dir: Path = PROJECT_ROOT) -> dict[str, str]:
    """The environment of every child: this home, Prefect's home inside it, offline, our API URL, and
    what `prefect deploy` writes into every deployment's `job_variables.env` (prefect.yaml): the home,
    the evidence folder, the project folder (the runs' working directory) and the clock settings (empty
    when unset: the flows then take the defaults)."""
    env = dict(os.environ if base is None else base)
    env.update({
        "ERASURE_HOME": str(h.root),
        "ERASURE_EVIDENCE": str(h.evidence_root),
        "ERASURE_PROJECT_DIR": str(project_dir),
        "PREFECT_HOME": str(h.prefect_home),
        "PREFECT_API_URL": f"http://{host}:{port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_UI_ENABLED": "true",
    })
    for name in CLOCK_SETTINGS:
        env.setdefault(name, "")
    env.pop("PREFECT_API_KEY", None)
    return env


def api_answers(api_url: str) -> bool:
    """True when a Prefect API answers its health check at `api_url`."""
    try:
        r = httpx.get(f"{api_url}/health", timeout=2.0)
        return r.status_code == 200 and r.json() is True
    except (httpx.HTTPError, ValueError):
        return False


def ensure_pool(api_url: str, run: Callable[[str, list[str]], None]) -> bool:
    """Create the process work pool unless it exists (never `--overwrite`: a pool someone tuned keeps
    its settings). `run(name, cmd)` runs a prefect command. Returns True when it created the pool."""
    r = httpx.get(f"{api_url}/work_pools/{POOL}", timeout=30.0)
    if r.status_code == 200:
        return False
    if r.status_code != 404:
        raise ConfigError(f"the Prefect API at {api_url} answered {r.status_code} for the work pool {POOL}")
    run("work-pool", prefect_cmd("work-pool", "create", POOL, "--type", "process"))
    return True


def prefect_cmd(*args: str) -> list[str]:
    """`prefect ARGS` with the interpreter of this virtualenv."""
    return [sys.executable, "-m", "prefect", *args]


def wait_healthy(api_url: str, *, timeout: float = HEALTH_TIMEOUT,
                 alive: Callable[[], bool] = lambda: True) -> None:
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


def run_deployment_now(api_url: str, name: str, parameters: dict[str, Any] | None = None) -> str:
    """Create a flow run of deployment `flow/deployment` through the REST API; returns its id."""
    flow_name, dep_name = name.split("/", 1)
    with httpx.Client(base_url=api_url, timeout=30.0) as c:
        r = c.get(f"/deployments/name/{flow_name}/{dep_name}")
        r.raise_for_status()
        r = c.post(f"/deployments/{r.json()['id']}/create_flow_run", json={"parameters": parameters or {}})
        r.raise_for_status()
        return str(r.json()["id"])


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
        proc = subprocess.Popen(cmd, cwd=cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append((name, proc))
        return proc

    def run(self, name: str, cmd: list[str], cwd: Path, timeout: float = 300.0) -> None:
        """Run a child to completion; `ConfigError` with the log's path if it fails."""
        path = self.log_dir / f"{name}.log"
        with open(path, "ab") as log:
            rc = subprocess.run(cmd, cwd=cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, timeout=timeout, check=False).returncode
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
    """(host, port) of a Prefect server to reuse: the home's own (`erasure server start`), else one that
    answers on host:port. None when there is none; `ConfigError` when host:port is taken by something
    that is not a Prefect server."""
    from cli import server as background

    state = background.read_state(h)
    if state is not None and background.server_alive(state) and api_answers(state.api_url):
        return state.host, state.port
    if port_in_use(host, port):
        if api_answers(f"http://{host}:{port}/api"):
            return host, port
        raise ConfigError(f"{host}:{port} is already in use by something that is not a Prefect server: "
                          "stop it or pass --port")
    return None


def run_console(h: Home, *, host: str = "127.0.0.1", port: int = 4200, project_dir: Path = PROJECT_ROOT,
                metrics_port: int | None = None, sla_now: bool = True, postgres: bool = False,
                stop: threading.Event | None = None) -> int:
    """Start (or reuse) the server, then pool, deployments, worker (and metrics); block until `stop` is
    set or a child dies; stop everything it started. Returns 0 after a requested stop, 1 when a child
    died."""
    from cli import prefect_api

    stop = stop or threading.Event()
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

                started_postgres = not pg.is_running(pg.Cluster.of(h))
                env["PREFECT_API_DATABASE_CONNECTION_URL"] = pg.start(h).url
                _say(f"PostgreSQL running on {pg.Cluster.of(h).socket_dir}")
            elif prefect_api.database_url_is_default():
                prefect_api.migrate_database(h, home_dir=h.prefect_home)
            server = stack.start("server", prefect_cmd("server", "start", "--host", host, "--port", str(port)),
                                 project_dir)
            _say(f"starting the Prefect server (PREFECT_HOME={h.prefect_home}) ...")
            wait_healthy(api, alive=lambda: server.poll() is None)
            _say(f"server healthy after {time.monotonic() - t0:.1f} s")
        _say("creating the pool if needed and deploying prefect.yaml ...")
        ensure_pool(api, lambda name, cmd: stack.run(name, cmd, project_dir))
        # The worker starts while prefect.yaml deploys: both take seconds, and runs wait for the worker.
        stack.start("worker", prefect_cmd("worker", "start", "--pool", POOL, "--type", "process"), project_dir)
        stack.run("deploy", prefect_cmd("--no-prompt", "deploy", "--all"), project_dir)
        _say(f"deployed after {time.monotonic() - t0:.1f} s")
        if metrics_port:
            from flows.metrics import serve_metrics, stop_metrics

            metrics_server = serve_metrics(h, metrics_port, addr=host)
            _say(f"metrics: http://{host}:{metrics_port}/metrics")
        if sla_now:
            run_deployment_now(api, "sla-monitor/sla-monitor")
        _say(f"ready: Prefect UI at http://{host}:{port}  (logs in {log_dir}; Ctrl-C stops)")
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
    metrics_port: Annotated[int | None, typer.Option(
        "--metrics-port", help="Also serve live Prometheus metrics on this port.", show_default=False)] = None,
    sla_now: Annotated[bool, typer.Option("--sla-now/--no-sla-now",
                                          help="Run sla-monitor once at start-up.")] = True,
    postgres: Annotated[bool, typer.Option(
        "--postgres", help="Prefect's database on the home's PostgreSQL cluster (<home>/postgres).")] = False,
) -> None:
    """Start the local Prefect server + UI, deploy prefect.yaml, start a worker; Ctrl-C stops all."""
    h = home_of(home)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    rc = run_console(h, host=host, port=port, metrics_port=metrics_port, sla_now=sla_now, postgres=postgres,
                     stop=stop)
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
