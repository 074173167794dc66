"""One erasure request's wall time on a warm long-lived Prefect server, against a bare Prefect flow of the
same shape on the same server, and the same request with a temporary server.

    .venv/bin/python bench/request.py                            # 10k and 100k frames, 3 runs each
    .venv/bin/python bench/request.py --sizes 10000 --runs 5
    .venv/bin/python bench/request.py --postgres                 # the long-lived server on PostgreSQL

What is timed, each as a fresh process, as a user runs it:
- request, long-lived server: `erasure request run REQ --json` with `PREFECT_API_URL` at a server
  started once (`erasure server start --workers 0` in a scratch home) and warmed by one bare run;
- bare flow, same server: `python bench/request.py --bare`, a flow with the request's shape and no work
  (preflight, fingerprint, footprint, nine cascade steps with persisted results, byte hygiene, a child
  flow with one task, proof: 14 tasks and a child flow), run against the same server;
- request, temporary server: the same request with no `PREFECT_API_URL` and no server in its home, so
  Prefect starts (and stops) a temporary server for it.
Each request runs on a fresh copy of the demo store (`<bench-dir>/<frames>`, the layout bench/erase.py
and bench/build_store.py use; built here when missing) for a different demo subject, and must end all
clear (exit 0). The table holds medians; "flow run" is the run's own duration as the server recorded it
(start to end), "wall" the process's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_TASKS: list[dict[str, float]] = []  # per request run on the long-lived server: seconds per task
TASKS = ["preflight", "fingerprint", "footprint", *[f"step-{i}" for i in range(1, 10)], "byte-hygiene", "proof-pack"]


def bare_flow() -> None:
    """The erasure-request flow's shape with no work, run in this process against PREFECT_API_URL."""
    from prefect import flow, task

    @task(name="noop")
    def noop(name: str) -> dict[str, Any]:
        return {"task": name}

    @task(
        name="cascade-step",
        cache_key_fn=lambda _ctx, params: f"bare-{time.time_ns()}-{params['name']}",
        persist_result=True,
    )
    def step(name: str) -> dict[str, Any]:
        return {"step": name}

    @flow(name="bare-verification", persist_result=False)
    def bare_verification() -> dict[str, Any]:
        return noop("probes")

    @flow(name="bare-request", persist_result=False)
    def bare_request() -> None:
        noop("preflight")
        noop("fingerprint")
        noop("footprint")
        for i in range(1, 10):
            step(f"step-{i}")
        noop("byte-hygiene")
        bare_verification(return_state=True)
        noop("proof-pack")

    state = bare_request(return_state=True)
    print(json.dumps({"flow_run_id": str(state.state_details.flow_run_id), "state": state.name}))


_AUTH: dict[str, str] = {}
"""The long-lived server's credential once it has started (`use_server_credential`)."""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ERASURE_"))}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", **_AUTH, **extra)
    return env


def use_server_credential(server_home: Path) -> None:
    """Every later command, and this script's own API calls, send the server home's credential (the
    server requires it; the runs' homes are other homes)."""
    _AUTH["PREFECT_API_AUTH_STRING"] = (server_home / "keys" / "prefect-api.auth").read_text().strip()


def _headers() -> dict[str, str]:
    from cli.prefect_auth import headers

    return headers(_AUTH.get("PREFECT_API_AUTH_STRING"))


def _timed(
    cmd: list[str], env: dict[str, str], timeout: float = 1800
) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    res = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
    )
    return time.perf_counter() - t0, res


def _run_seconds(api: str, name: str) -> float | None:
    """Start to end of the last flow run named `name`, as the server recorded it."""
    import httpx

    r = httpx.post(
        f"{api}/flow_runs/filter",
        json={"flow_runs": {"name": {"any_": [name]}}, "sort": "START_TIME_DESC", "limit": 1},
        timeout=30,
        headers=_headers(),
    )
    r.raise_for_status()
    runs = r.json()
    return float(runs[0]["total_run_time"]) if runs and runs[0].get("total_run_time") is not None else None


def _task_seconds(api: str, name: str) -> dict[str, float]:
    """Seconds per task (and child flow) of the last flow run named `name`."""
    import httpx

    runs = httpx.post(
        f"{api}/flow_runs/filter",
        json={"flow_runs": {"name": {"any_": [name]}}, "sort": "START_TIME_DESC", "limit": 1},
        timeout=30,
        headers=_headers(),
    ).json()
    if not runs:
        return {}
    tasks = httpx.post(
        f"{api}/task_runs/filter", json={"flow_runs": {"id": {"any_": [runs[0]["id"]]}}}, timeout=30, headers=_headers()
    ).json()
    out: dict[str, float] = {}
    for t in tasks:
        label = re.sub(r"-[0-9a-f]{3}$", "", t["name"])  # preflight-1a2 -> preflight
        out[label] = out.get(label, 0.0) + float(t.get("total_run_time") or 0.0)
    return out


def _flow_run_seconds(api: str, run_id: str) -> float | None:
    import httpx

    r = httpx.get(f"{api}/flow_runs/{run_id}", timeout=30, headers=_headers())
    r.raise_for_status()
    v = r.json().get("total_run_time")
    return None if v is None else float(v)


def ensure_store(bench_dir: Path, frames: int, *, subjects: int, seed: int = 7) -> Path:
    """The home of the demo store of `frames` frames under `bench_dir` (complete when its build.json
    exists), built here when missing."""
    from erasure.config import Home
    from memory import demo
    from memory.schema import create

    root = bench_dir / str(frames)
    if (root / "build.json").exists() and (root / demo.SUBJECTS_FILE).exists():
        return root
    if root.exists():
        shutil.rmtree(root)
    home = Home.resolve(root, root / "evidence").ensure()
    print(f"building a demo store of {frames:,} frames in {root} ...", flush=True)
    conn = create(home.store_dir)
    try:
        result = demo.build_demo(conn, home.store_dir, frames=frames, subjects=subjects, seed=seed)
    finally:
        conn.close()
    demo.write_subjects_file(root / demo.SUBJECTS_FILE, result.subjects, seed=seed, tenant="default")
    (root / "build.json").write_text(json.dumps({"frames": result.frames, "seconds": result.elapsed}) + "\n")
    return root


def demo_subjects(root: Path) -> list[Any]:
    from erasure.subject import Subject
    from memory import demo

    doc = json.loads((root / demo.SUBJECTS_FILE).read_text(encoding="utf-8"))
    return [Subject.model_validate(s) for s in doc["subjects"]]


def prepare_request(src: Path, dest: Path, subject: Any, request_id: str, engine_key: Path) -> Path:
    """A fresh home at `dest`: a copy of the demo store, the engine key, the request vaulted."""
    return prepare_home(src, dest, [(subject, request_id)], engine_key)


def prepare_home(src: Path, dest: Path, requested: list[tuple[Any, str]], engine_key: Path) -> Path:
    """A fresh home at `dest`: a copy of the demo store, the engine key, one request vaulted for each
    (subject, request id)."""
    from erasure import request_records
    from erasure.config import Home
    from erasure.engine_db import Engine
    from erasure.models import ErasureRequestEnvelope

    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src / "store", dest / "store")
    os.sync()  # else the first checkpoint pays for writing back the whole copy
    h = Home.resolve(dest, dest / "evidence").ensure()
    h.keys_dir.mkdir(parents=True, exist_ok=True)
    for p in engine_key.parent.glob("engine*"):
        shutil.copy2(p, h.keys_dir / p.name)
    with Engine.borrow(h.engine_db) as engine:
        for subject, request_id in requested:
            env = ErasureRequestEnvelope.model_validate(
                {
                    "request_id": request_id,
                    "tenant_id": "default",
                    "subject": subject.model_dump(exclude_none=True),
                    "legal_basis": "GDPR",
                    "received_at": (datetime.now(UTC) - timedelta(days=2)).isoformat(),
                    "requester_identity_proof_ref": "idv/bench",
                    "reason": "Art.17 request (benchmark)",
                }
            )
            request_records.submit(engine, env, now=datetime.now(UTC))
    return h.root


def run_request(home: Path, request_id: str, api: str | None) -> tuple[float, float | None]:
    env = _env(
        ERASURE_HOME=str(home), ERASURE_EVIDENCE=str(home / "evidence"), **({"PREFECT_API_URL": api} if api else {})
    )
    wall, res = _timed([sys.executable, "-m", "cli.main", "request", "run", request_id, "--json"], env)
    if res.returncode != 0:
        raise SystemExit(f"erasure request run {request_id} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    out = json.loads(res.stdout)
    if not out.get("all_clear"):
        # a demo subject whose examples a fine-tune trained on ends with that exception declared: the
        # same work, timed the same; anything else (residue, a failure) exits non-zero above
        print(f"  {request_id}: {out.get('pack_status')}, exceptions: {len(out.get('exceptions') or [])}", flush=True)
    if api:
        _TASKS.append(_task_seconds(api, f"erasure-{request_id}"))
    return wall, (_run_seconds(api, f"erasure-{request_id}") if api else None)


def run_bare(api: str, scratch: Path) -> tuple[float, float | None]:
    env = _env(PREFECT_API_URL=api, PREFECT_HOME=str(scratch / "bare-prefect"))
    wall, res = _timed([sys.executable, str(Path(__file__).resolve()), "--bare"], env)
    if res.returncode != 0:
        raise SystemExit(f"the bare flow failed:\n{res.stderr[-3000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return wall, _flow_run_seconds(api, out["flow_run_id"])


def _med(xs: list[float | None]) -> str:
    vals = [x for x in xs if x is not None]
    return f"{statistics.median(vals):.2f} s" if vals else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bench-dir", type=Path, default=Path(tempfile.gettempdir()) / "erasure-bench")
    ap.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "erasure-bench-request")
    ap.add_argument("--port", type=int, default=4477)
    ap.add_argument("--postgres", action="store_true", help="the long-lived server on PostgreSQL")
    ap.add_argument("--no-temporary", action="store_true", help="skip the temporary-server runs")
    a = ap.parse_args()
    if a.bare:
        bare_flow()
        return

    from proof.keys import generate_keypair

    sizes = [int(s) for s in a.sizes.split(",") if s]
    if a.work_dir.exists():
        shutil.rmtree(a.work_dir)
    a.work_dir.mkdir(parents=True)
    a.work_dir.chmod(0o711)  # the postgres user must reach the server home's cluster when we are root
    keys = a.work_dir / "keys"
    generate_keypair("engine", keys)
    server_home = a.work_dir / "server-home"
    senv = _env(ERASURE_HOME=str(server_home), ERASURE_EVIDENCE=str(server_home / "evidence"))
    print(f"starting a long-lived Prefect server ({'PostgreSQL' if a.postgres else 'SQLite'}) ...", flush=True)
    _, res = _timed(
        [
            sys.executable,
            "-m",
            "cli.main",
            "server",
            "start",
            "--port",
            str(a.port),
            "--workers",
            "0",
            "--json",
            *(["--postgres"] if a.postgres else []),
        ],
        senv,
    )
    if res.returncode != 0:
        raise SystemExit(f"erasure server start failed:\n{res.stdout}\n{res.stderr}")
    api = json.loads(res.stdout)["api_url"]
    use_server_credential(server_home)
    rows = []
    breakdown: dict[int, dict[str, float]] = {}
    try:
        run_bare(api, a.work_dir)  # warm: the server's caches, the bare flow's registration
        for frames in sizes:
            src = ensure_store(a.bench_dir, frames, subjects=max(5, 2 * a.runs + 1))
            subjects = demo_subjects(src)
            if len(subjects) < 2 * a.runs:
                raise SystemExit(f"{src} has {len(subjects)} demo subjects: {2 * a.runs} needed (--runs {a.runs})")
            _TASKS.clear()
            served: list[tuple[float, float | None]] = []
            bare: list[tuple[float, float | None]] = []
            temporary: list[float] = []
            for i in range(a.runs):
                rid = f"req-bench-{frames}-{i}"
                home = prepare_request(src, a.work_dir / f"h-{frames}-{i}", subjects[i], rid, keys / "engine.pem")
                served.append(run_request(home, rid, api))
                bare.append(run_bare(api, a.work_dir))
                shutil.rmtree(home)
                print(
                    f"  {frames:,} frames, run {i + 1}: request {served[-1][0]:.2f} s, bare {bare[-1][0]:.2f} s",
                    flush=True,
                )
                if not a.no_temporary:
                    rid = f"req-bench-{frames}-t{i}"
                    home = prepare_request(
                        src, a.work_dir / f"t-{frames}-{i}", subjects[a.runs + i], rid, keys / "engine.pem"
                    )
                    temporary.append(run_request(home, rid, None)[0])
                    shutil.rmtree(home)
                    print(
                        f"  {frames:,} frames, run {i + 1}: request with a temporary server {temporary[-1]:.2f} s",
                        flush=True,
                    )
            breakdown[frames] = {
                k: statistics.median(d.get(k, 0.0) for d in _TASKS) for k in sorted({k for d in _TASKS for k in d})
            }
            req_wall = statistics.median(w for w, _ in served)
            bare_wall = statistics.median(w for w, _ in bare)
            rows.append(
                (
                    frames,
                    req_wall,
                    _med([f for _, f in served]),
                    bare_wall,
                    _med([f for _, f in bare]),
                    req_wall / bare_wall,
                    _med(list(temporary)) if temporary else "-",
                )
            )
    finally:
        subprocess.run(
            [sys.executable, "-m", "cli.main", "server", "stop"],
            cwd=ROOT,
            env=senv,
            capture_output=True,
            check=False,
            timeout=120,
        )
    print()
    db = "PostgreSQL" if a.postgres else "SQLite"
    print(f"long-lived server: {db}; medians of {a.runs} runs; goal: ratio <= 1.3")
    print(
        "| store | request (wall) | request (flow run) | bare flow (wall) | bare flow (flow run) "
        "| ratio (wall) | request, temporary server (wall) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for frames, rw, rf, bw, bf, ratio, tmp in rows:
        print(f"| {frames:,} frames | {rw:.2f} s | {rf} | {bw:.2f} s | {bf} | {ratio:.2f} | {tmp} |")
    print()
    print("Where the request's flow run spends its time (seconds per task, medians; the bare flow's tasks take")
    print("about the Prefect overhead each):")
    names = sorted({k for b in breakdown.values() for k in b})
    print("| task | " + " | ".join(f"{f:,} frames" for f in breakdown) + " |")
    print("| --- |" + " --- |" * len(breakdown))
    for k in names:
        print(f"| {k} | " + " | ".join(f"{b.get(k, 0.0):.2f}" for b in breakdown.values()) + " |")


if __name__ == "__main__":
    main()
