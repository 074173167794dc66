"""`erasure server start|stop|status|automation`: the home's long-lived Prefect server and process
worker, in the background (`erasure serve` / `make serve` is the same in the foreground).

`start` prepares Prefect's database (SQLite in `<home>/prefect`, or with `--postgres` the home's
PostgreSQL cluster in `<home>/postgres`), starts `prefect server start` on 127.0.0.1 and waits for its
health check, creates the work pool `erasure-local` if it does not exist, deploys prefect.yaml, starts
the worker(s), and writes `<home>/server/state.json` and a pid file per process. Logs go to
`<home>/server/logs/`. Every command that runs a flow (`erasure request run`, the demo) finds the
server through that state file and runs its flow there; when the server is down they start a temporary
one of their own. `stop` stops what `start` started (workers, server, PostgreSQL), each by its process
group. `status` says what runs and when sla-monitor and intake run next. `automation` creates the
Prefect automation that notifies the DPO (automations/notify-dpo.yaml).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from cli import prefect_api, prefect_auth
from cli.server_state import (
    ServerState,
    clear_state,
    log_dir,
    own_server,
    pid_alive,
    read_state,
    server_alive,
    start_lock,
    starting,
    write_state,
)
from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.config import PROJECT_ROOT, Home
from erasure.errors import ConfigError, ErasureError
from erasure.service_user import acting_as, home_owner, runs_as

app = typer.Typer(
    help="The home's long-lived Prefect server and worker in the background: start, stop, status.", no_args_is_help=True
)

STOP_TIMEOUT = 20.0
#: The deployments that run on a schedule (prefect.yaml), shown by `status`.
SCHEDULED = ("sla-monitor", "intake")
AUTOMATION_FILE = PROJECT_ROOT / "automations" / "notify-dpo.yaml"
WEBHOOK_BLOCK = "erasure-dpo-webhook"
DESK_TIMEOUT = 60.0
"""How long `server start` waits for the request desk to listen before it prints where it is."""


def _spawn(name: str, cmd: list[str], env: dict[str, str], cwd: Path, logs: Path) -> subprocess.Popen[bytes]:
    """A detached child (own session, so it outlives this command) logging to `<logs>/<name>.log`."""
    with open(logs / f"{name}.log", "ab") as log:
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _run_logged(name: str, cmd: list[str], env: dict[str, str], cwd: Path, logs: Path, timeout: float = 300.0) -> None:
    path = logs / f"{name}.log"
    with open(path, "ab") as log:
        rc = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        ).returncode
    if rc != 0:
        raise ConfigError(f"`{' '.join(cmd[2:])}` failed (exit {rc}): see {path}")


def _kill_group(pid: int, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM the process group led by `pid`, SIGKILL it after `timeout` seconds."""
    if not pid_alive(pid):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # whatever of the group is left (flow runs, uvicorn)


def start_server(
    h: Home,
    *,
    host: str = "127.0.0.1",
    port: int = 4200,
    workers: int = 1,
    postgres: bool = False,
    project_dir: Path = PROJECT_ROOT,
    say: Any = None,
) -> ServerState:
    """Start the home's server, pool, deployments and workers in the background. Idempotent: a running
    server is returned as it is. `ConfigError` (exit 3) when something fails (all started is stopped).

    As root, it first starts PostgreSQL (as `erasure-pg`) and gives the home to the user runs execute
    as (erasure/service_user.py), then becomes that user for good: everything it starts runs as it."""
    say = say or (lambda msg: None)
    with start_lock(h, lambda: say("the home's server is starting (another `erasure server start`): waiting for it")):
        from cli.serve import leave_root

        pg_ready = leave_root(h, postgres=postgres)
        return _start_server(
            h,
            host=host,
            port=port,
            workers=workers,
            postgres=postgres,
            pg_ready=pg_ready,
            project_dir=project_dir,
            say=say,
        )


def _start_server(
    h: Home, *, host: str, port: int, workers: int, postgres: bool, pg_ready: bool, project_dir: Path, say: Any
) -> ServerState:
    from cli.serve import ensure_pool, port_in_use, prefect_cmd, serve_env, wait_healthy, worker_cmd  # httpx: to start

    st = read_state(h)
    if st is not None and server_alive(st):
        if own_server(st) and prefect_auth.is_ours(st.api_url, prefect_auth.home_secret(h)):
            return st
        raise ConfigError(
            f"the home's server (pid {st.server_pid}) runs but does not answer at {st.api_url}: "
            "`erasure server stop` first"
        )
    clear_state(h)
    if port_in_use(host, port):
        raise ConfigError(f"{host}:{port} is already in use: pass --port, or stop what runs there")
    logs = log_dir(h)
    logs.mkdir(parents=True, exist_ok=True)
    env = serve_env(h, host, port, project_dir=project_dir)
    api = env["PREFECT_API_URL"]
    started: list[int] = []
    try:
        if postgres:
            from cli import postgres as pg

            env.update((pg.Cluster.of(h) if pg_ready else pg.start(h)).server_env)
            say(f"PostgreSQL running on {pg.Cluster.of(h).socket_dir}")
        else:
            env.pop("PREFECT_API_DATABASE_CONNECTION_URL", None)
            env.pop("PREFECT_SERVER_DATABASE_CONNECTION_URL", None)
            prefect_api.migrate_database(h, home_dir=h.prefect_home)
        t0 = time.monotonic()
        server = _spawn(
            "server", prefect_cmd("server", "start", "--host", host, "--port", str(port)), env, project_dir, logs
        )
        started.append(server.pid)
        st = ServerState(
            host=host,
            port=port,
            server_pid=server.pid,
            postgres=postgres,
            project_dir=str(project_dir),
            started_at=datetime.now(UTC).isoformat(),
        )
        write_state(h, st)
        say(f"starting the Prefect server (logs in {logs}) ...")
        wait_healthy(api, alive=lambda: server.poll() is None)
        say(f"server healthy after {time.monotonic() - t0:.1f} s; deploying prefect.yaml ...")
        ensure_pool(api, env, project_dir)
        _run_logged("deploy", prefect_cmd("--no-prompt", "deploy", "--all"), env, project_dir, logs)
        for i in range(1, workers + 1):
            w = _spawn(f"worker-{i}", worker_cmd(project_dir), env, project_dir, logs)
            started.append(w.pid)
            st.worker_pids.append(w.pid)
        from cli.desk import desk_cmd, desk_port

        dport = desk_port(host, port)
        desk = _spawn("desk", desk_cmd(h, host, dport, api), env, project_dir, logs)
        deadline = time.monotonic() + DESK_TIMEOUT  # `start` prints the desk's address: once it answers
        while not port_in_use(host, dport) and desk.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        write_state(h, st)
        if workers:
            from cli.serve import run_deployment_now

            run_deployment_now(api, "sla-monitor/sla-monitor", secret=env[prefect_auth.CLIENT_VAR])
        say(f"deployed after {time.monotonic() - t0:.1f} s")
        return st
    except BaseException:
        from cli.desk import stop_desk

        stop_desk(h)
        for pid in reversed(started):
            _kill_group(pid)
        clear_state(h)
        if postgres and not pg_ready:  # a cluster root started is `erasure-pg`'s: it stays up, the next start reuses it
            from cli import postgres as pg

            with contextlib.suppress(ErasureError):
                pg.stop(h)
        raise


def stop_server(h: Home) -> dict[str, Any]:
    """Stop the workers, the server and (if it started it) PostgreSQL. Returns what it stopped."""
    st = read_state(h)
    out: dict[str, Any] = {"workers": 0, "server": False, "postgres": False}
    from cli.desk import stop_desk

    with acting_as(home_owner(h)):  # the pids are read from files the runs' user can write
        out["desk"] = stop_desk(h)
        if st is not None:
            for pid in st.worker_pids:
                if pid_alive(pid):
                    out["workers"] += 1
                _kill_group(pid)
            out["server"] = pid_alive(st.server_pid)
            _kill_group(st.server_pid)
    if st is not None and st.postgres:
        from cli import postgres as pg

        out["postgres"] = pg.stop(h)
    clear_state(h)
    return out


def next_runs(api_url: str, secret: str | None, names: tuple[str, ...] = SCHEDULED) -> dict[str, dict[str, Any]]:
    """For each deployment (flow and deployment share the name): its schedules and its next scheduled run.
    `secret`: the server's credential."""

    out: dict[str, dict[str, Any]] = {}
    with prefect_auth.api_client(api_url, secret, timeout=10.0) as c:
        for name in names:
            r = c.get(f"/deployments/name/{name}/{name}")
            if r.status_code == 404:
                out[name] = {"deployed": False, "next_run": None, "schedules": []}
                continue
            r.raise_for_status()
            dep = r.json()
            schedules = [
                {
                    "active": s.get("active", True),
                    **{k: v for k, v in (s.get("schedule") or {}).items() if k in ("cron", "interval")},
                }
                for s in dep.get("schedules") or []
            ]
            runs = c.post(
                "/flow_runs/filter",
                json={
                    "flow_runs": {"deployment_id": {"any_": [dep["id"]]}, "state": {"type": {"any_": ["SCHEDULED"]}}},
                    "sort": "EXPECTED_START_TIME_ASC",
                    "limit": 1,
                },
            )
            runs.raise_for_status()
            first = runs.json()[:1]
            out[name] = {
                "deployed": True,
                "paused": bool(dep.get("paused")),
                "schedules": schedules,
                "next_run": first[0]["expected_start_time"] if first else None,
            }
    return out


def status_of(h: Home) -> dict[str, Any]:
    """What runs for this home: server, workers, database, next scheduled runs."""
    st = read_state(h)
    if st is None:
        return {"running": False, "starting": starting(h), "home": str(h.root)}
    alive = server_alive(st)
    secret = prefect_auth.home_secret(h)
    healthy = alive and own_server(st) and prefect_auth.is_ours(st.api_url, secret)
    doc: dict[str, Any] = {
        "running": healthy,
        "starting": not healthy and starting(h),
        "home": str(h.root),
        "api_url": st.api_url,
        "ui_url": st.ui_url,
        "server_pid": st.server_pid,
        "server_alive": alive,
        "started_at": st.started_at,
        "workers": [{"pid": p, "alive": pid_alive(p)} for p in st.worker_pids],
        "database": "postgresql" if st.postgres else "sqlite",
        "logs": str(log_dir(h)),
    }
    if st.postgres:
        from cli import postgres as pg

        c = pg.Cluster.of(h)
        doc["postgres"] = {"data": str(c.data), "socket_dir": str(c.socket_dir), "running": pg.is_running(c)}
    else:
        doc["sqlite"] = str(h.prefect_home / "prefect.db")
    if healthy:
        doc["scheduled"] = next_runs(st.api_url, secret)
    return doc


def _say(msg: str) -> None:
    console.print(msg, highlight=False, markup=False)


@app.command("start")
def start(
    home: HomeOpt = None,
    port: Annotated[int, typer.Option("--port", help="Port of the Prefect server and UI.")] = 4200,
    host: Annotated[str, typer.Option("--host", help="Address to bind (keep it local).")] = "127.0.0.1",
    workers: Annotated[int, typer.Option("--workers", min=0, help="Process workers to start.")] = 1,
    postgres: Annotated[
        bool,
        typer.Option(
            "--postgres", help="Prefect's database on a PostgreSQL cluster in <home>/postgres (created on first use)."
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Start Prefect's server (UI on 127.0.0.1), deploy prefect.yaml and start a worker, in the background."""
    h = home_of(home, as_root=True)
    before = read_state(h)
    st = start_server(h, host=host, port=port, workers=workers, postgres=postgres, say=None if json_out else _say)
    already = before is not None and before.server_pid == st.server_pid
    from service.intake import desk_url

    desk = desk_url(h)
    if json_out:
        print_json(
            {
                **asdict(st),
                "api_url": st.api_url,
                "ui_url": st.ui_url,
                "desk_url": desk,
                "already_running": already,
                "runs_as": runs_as(),
            }
        )
        return
    _say(
        ("already running" if already else "ready") + f": Prefect UI at {st.ui_url}  (API {st.api_url}; "
        f"logs in {log_dir(h)}; `erasure server stop` stops it); runs execute as {runs_as()}"
    )
    from cli.desk import how_to_log_in

    for line in how_to_log_in(h, st.ui_url, desk or "(not started)"):
        _say(line)


@app.command("stop")
def stop(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Stop the home's workers, server and PostgreSQL cluster (whatever `erasure server start` started)."""
    h = home_of(home, as_root=True)
    out = stop_server(h)
    if json_out:
        print_json(out)
        return
    if not (out["server"] or out["workers"]):
        _say("not running")
        return
    _say(f"stopped: server, {out['workers']} worker(s)" + (", PostgreSQL" if out["postgres"] else ""))


@app.command("status")
def status(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Is the home's server up; its workers, database, logs, and the next run of sla-monitor and intake.

    Exits 0 when the server answers, 1 when it does not run."""
    h = home_of(home, as_root=True)
    doc = status_of(h)
    if json_out:
        print_json(doc)
    elif doc["starting"]:
        _say(
            f"starting (home {h.root}): `erasure server start` is under way"
            + (f"; the UI will be at {doc['ui_url']}" if doc.get("ui_url") else "")
            + "; run `erasure server status` again in a moment"
        )
    elif not doc.get("api_url"):
        _say(f"not running (home {h.root}): `erasure server start`")
    else:
        _say(
            f"server: {'up' if doc['running'] else 'DOWN'} at {doc['ui_url']} (pid {doc['server_pid']}, "
            f"since {doc['started_at'][:19]})"
        )
        alive = sum(1 for w in doc["workers"] if w["alive"])
        _say(f"workers: {alive} of {len(doc['workers'])} running")
        db = doc.get("postgres", {})
        pg_state = "running" if db.get("running") else "STOPPED"
        _say(
            "database: "
            + (
                f"PostgreSQL ({pg_state}, socket {db.get('socket_dir')})"
                if doc["database"] == "postgresql"
                else f"SQLite {doc.get('sqlite')}"
            )
        )
        for name, info in (doc.get("scheduled") or {}).items():
            when = info.get("next_run")
            sched = ", ".join(s.get("cron") or f"every {s.get('interval')} s" for s in info.get("schedules", []))
            _say(
                f"next {name}: {when[:19].replace('T', ' ') + ' UTC' if when else 'not scheduled yet'}"
                + (f"  ({sched})" if sched else "")
                + ("  [paused]" if info.get("paused") else "")
            )
        _say(f"logs: {doc['logs']}")
    if not (doc.get("running") or doc["starting"]):
        raise typer.Exit(1)


@app.command("automation")
def automation(
    webhook: Annotated[
        str, typer.Option("--webhook", help="URL the DPO's notification is POSTed to (their chat or mail gateway).")
    ],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Create (or update) the Prefect automation that notifies the DPO when a request awaits attestation,
    is blocked or failed (automations/notify-dpo.yaml), with a webhook notification block."""
    h = home_of(home)
    api = prefect_api.require_api(h)
    from flows.run_report import create_dpo_automation

    out = create_dpo_automation(api, AUTOMATION_FILE, webhook, block_name=WEBHOOK_BLOCK)
    if json_out:
        print_json(out)
        return
    _say(f"automation {out['name']!r} ({out['id']}) notifies {webhook} on: {', '.join(out['events'])}")
