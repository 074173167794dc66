"""Wall time of `erasure` commands that run no flow: each should answer in well under half a second.

    .venv/bin/python bench/cli.py              # 9 runs each, medians
    .venv/bin/python bench/cli.py --runs 21

Each command runs as a fresh process (`python -m cli.main ...`, what the `erasure` script runs) against a
scratch home holding a small engine with a few requests, so `sla` and `request list` have rows to print.
"cpu" is the command's own user + system time (what it costs, whatever else the shared machine runs);
the last column counts the modules of Prefect, the flows and numpy the command imported (should be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [["--help"], ["sla", "--json"], ["request", "list", "--json"]]
GOAL_S = 0.5


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ERASURE_"))}
    env.update(
        ERASURE_HOME=str(home),
        ERASURE_EVIDENCE=str(home / "evidence"),
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    return env


def _run(args: list[str], env: dict[str, str], *, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "cli.main", *args]
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=120
    )


def prepare(home: Path, requests: int) -> None:
    """A home with `requests` vaulted requests (different laws and ages)."""
    home.mkdir(parents=True, exist_ok=True)
    env = _env(home)
    for i in range(requests):
        f = home / f"req-{i}.json"
        f.write_text(
            json.dumps(
                {
                    "request_id": f"req-bench-{i:03d}",
                    "tenant_id": "default",
                    "subject": {"id": f"subj-bench-{i:03d}"},
                    "legal_basis": ["GDPR", "CCPA", "POPIA"][i % 3],
                    "received_at": f"2026-01-{1 + i % 28:02d}T09:00:00+00:00",
                    "requester_identity_proof_ref": "idv/bench",
                    "reason": "Art.17 request",
                }
            )
        )
        res = _run(["request", "submit", str(f)], env)
        if res.returncode != 0:
            raise SystemExit(f"could not submit a request: {res.stderr}")


def heavy_imports(args: list[str], env: dict[str, str]) -> int:
    res = _run(args, env, importtime=True)
    mods = {ln.split("|")[-1].strip() for ln in res.stderr.splitlines() if ln.startswith("import time:")}
    return sum(1 for m in mods if m.split(".")[0] in ("prefect", "flows", "numpy"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--requests", type=int, default=20, help="requests in the scratch home")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="erasure-bench-cli-") as tmp:
        home = Path(tmp) / "home"
        prepare(home, a.requests)
        env = _env(home)
        print(f"| command | median | min | max | cpu (median) | runs | under {GOAL_S} s | heavy imports |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for args in COMMANDS:
            _run(args, env)  # warm the page cache
            times, cpu = [], []
            for _ in range(a.runs):
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                res = _run(args, env)
                times.append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
                if res.returncode != 0:
                    raise SystemExit(f"erasure {' '.join(args)} failed: {res.stderr}")
            med = statistics.median(times)
            print(
                f"| erasure {' '.join(args)} | {med:.3f} s | {min(times):.3f} s | {max(times):.3f} s "
                f"| {statistics.median(cpu):.3f} s | {a.runs} "
                f"| {'yes' if med < GOAL_S else 'NO'} | {heavy_imports(args, env)} |"
            )


if __name__ == "__main__":
    main()
