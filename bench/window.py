"""Erasure windows: N requests run as ONE window (`erasure request run --all`) against one by one.

    .venv/bin/python bench/window.py                                   # the issue's table (slow: ~1 h)
    .venv/bin/python bench/window.py --plan 10000:1,30 --one-by-one 0  # a quick look

Each window runs on a fresh copy of a demo store built with enough subjects (`--bench-dir`/<frames>,
built here when missing, 130 subjects) with N requests submitted for the first N demo subjects, as a user
runs it: `erasure request run --all --json` in a fresh process against a long-lived Prefect server
(`erasure server start --workers 0`, started once). Wall time is the process's, end to end: preflight,
fingerprint, nine steps per request, one byte scrub, verification, one signed pack per request.

Every run is checked, not only timed: every request must end all clear, every pack must verify offline
(proof.verify, the regulator's verifier, engine key only), and no byte of the home outside the request
vault and the keys may hold any subject's id, email, name or phone in any letter case (one hyperscan pass
with every subject's identifiers). The largest pack is reported.

"one by one" runs the same requests as separate `erasure request run ID` processes, one after another,
on a fresh copy (for the window sizes named by --one-by-one). Marginal cost per request in a window =
(T(N) - T(1)) / (N - 1) against the smallest N of a store size, for every larger N, taken round by
round (with --runs K, the sizes run in turn K times) and the median of the rounds reported; T is the
wall time and, beside it, the CPU time of the `erasure request run` process (user + system, what the
machine's other tenants do not add to). At 1M frames one window's fixed part (two passes over 2 GB of
vectors, a VACUUM of the whole store, two byte scans) is ~85 s and moves by 5-10 s from run to run, so
a marginal from 30 requests carries +-0.2-0.3 s of that noise; the default plan also runs 100 requests
at 10k and 1M, whose marginal carries a third of it.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from request import _env, _timed, demo_subjects, ensure_store, prepare_home, use_server_credential  # noqa: E402  (bench/request.py)

DEFAULT_PLAN = "10000:1,30,100;100000:1,10,30,100;1000000:1,30,100"
SUBJECTS = 130


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(home: Path, api: str, args: list[str]) -> tuple[float, float, dict[str, Any]]:
    """Wall seconds, CPU seconds of the process, and its --json output."""
    env = _env(ERASURE_HOME=str(home), ERASURE_EVIDENCE=str(home / "evidence"), PREFECT_API_URL=api)
    cpu = _children_cpu()
    wall, res = _timed([sys.executable, "-m", "cli.main", "request", "run", *args, "--json"], env, timeout=7200)
    cpu = _children_cpu() - cpu
    if res.returncode != 0:
        raise SystemExit(
            f"erasure request run {' '.join(args[:3])} ... failed (exit {res.returncode}):\n"
            f"{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
        )
    return wall, cpu, json.loads(res.stdout)


def _check(home: Path, subjects: list[Any], request_ids: list[str], keys: Path) -> int:
    """Every pack verifies offline; no subject's identifier in any byte of the home (but the vault and
    the keys); returns the largest pack's size in bytes."""
    from probes.bytescan import scan_tree
    from proof.verify import PackError, Trust, Verifier

    verifier = Verifier(Trust.from_pem((keys / "engine.pub.pem").read_bytes(), None, require_dpo=False))
    largest = 0
    for rid in request_ids:
        pack = home / "evidence" / "erasure" / rid / "proof.tar.gz"
        try:
            verifier.verify(pack)
        except PackError as exc:
            raise SystemExit(f"{rid}: the pack does not verify: {exc}") from exc
        largest = max(largest, pack.stat().st_size)
    needles = sorted({v.encode() for s in subjects for v in (s.id, s.email, s.name, s.phone) if v and len(v) >= 5})
    for folder in sorted(p for p in home.iterdir() if p.is_dir() and p.name not in ("engine", "keys")):
        report = scan_tree(folder, needles, caseless=set(range(len(needles))))
        if report.found:
            raise SystemExit(f"{len(report.found)} subject identifier(s) still in {folder} after the window")
    return largest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", default=DEFAULT_PLAN, help="frames:N,N,...;frames:N,... (window sizes per store)")
    ap.add_argument("--one-by-one", default="1,10", help="window sizes also run one by one (0: none)")
    ap.add_argument("--bench-dir", type=Path, default=Path(tempfile.gettempdir()) / "erasure-window")
    ap.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "erasure-bench-window")
    ap.add_argument("--port", type=int, default=4478)
    ap.add_argument("--runs", type=int, default=1, help="runs of each window; the table shows their median")
    a = ap.parse_args()
    from proof.keys import generate_keypair

    plan = [(int(f), [int(n) for n in ns.split(",")]) for f, ns in (p.split(":") for p in a.plan.split(";") if p)]
    one_by_one = {int(n) for n in a.one_by_one.split(",") if n.strip() and int(n) > 0}
    if a.work_dir.exists():
        shutil.rmtree(a.work_dir)
    a.work_dir.mkdir(parents=True)
    a.work_dir.chmod(0o711)
    keys = a.work_dir / "keys"
    generate_keypair("engine", keys)
    server_home = a.work_dir / "server-home"
    senv = _env(ERASURE_HOME=str(server_home), ERASURE_EVIDENCE=str(server_home / "evidence"))
    print("starting a long-lived Prefect server ...", flush=True)
    _, res = _timed(
        [sys.executable, "-m", "cli.main", "server", "start", "--port", str(a.port), "--workers", "0", "--json"], senv
    )
    if res.returncode != 0:
        raise SystemExit(f"erasure server start failed:\n{res.stdout}\n{res.stderr}")
    api = json.loads(res.stdout)["api_url"]
    use_server_credential(server_home)
    rows: list[tuple[int, int, float, float | None, int]] = []
    marginal: dict[tuple[int, int], tuple[list[float], list[float]]] = {}  # (frames, N) -> wall, cpu by round
    try:
        for frames, sizes in plan:
            src = ensure_store(a.bench_dir, frames, subjects=SUBJECTS)
            subjects = demo_subjects(src)
            if max(sizes) > len(subjects):
                raise SystemExit(f"{src} has {len(subjects)} demo subjects: {max(sizes)} needed")
            # The sizes run in turn within each round (1, 30, 1, 30, ...): the machine's drift (a slow
            # disk minute under the scrub's rebuild) lands on both ends of a marginal, not on one.
            runs: dict[int, list[tuple[float, float]]] = {n: [] for n in sizes}
            largest_of: dict[int, int] = dict.fromkeys(sizes, 0)
            for _ in range(a.runs):
                for n in sizes:
                    chosen = subjects[:n]
                    ids = [f"req-{i:04d}" for i in range(n)]
                    home = prepare_home(
                        src, a.work_dir / f"w-{frames}-{n}", list(zip(chosen, ids, strict=True)), keys / "engine.pem"
                    )
                    wall, cpu, out = _run(home, api, ["--all"])
                    bad = {rid: r["outcome"] for rid, r in out["requests"].items() if r["outcome"] != "all_clear"}
                    if bad or len(out["requests"]) != n:
                        raise SystemExit(f"window of {n} at {frames:,} frames: not all clear: {bad}")
                    largest_of[n] = max(largest_of[n], _check(home, chosen, ids, keys))
                    shutil.rmtree(home)
                    runs[n].append((wall, cpu))
                    print(f"  {frames:>9,} frames, {n:>3} requests: {wall:7.1f} s ({cpu:.1f} s CPU)", flush=True)
            small = min(sizes)
            for big in sorted(sizes):
                if big == small:
                    continue
                per_round = [
                    ((b[0] - s[0]) / (big - small), (b[1] - s[1]) / (big - small))
                    for b, s in zip(runs[big], runs[small], strict=True)
                ]
                marginal[(frames, big)] = ([w for w, _ in per_round], [c for _, c in per_round])
                print(
                    f"  {frames:>9,} frames: marginal per request, {big} vs {small}, by round: "
                    + ", ".join(f"{w:.3f} s ({c:.3f} s CPU)" for w, c in per_round),
                    flush=True,
                )
            for n in sizes:
                chosen = subjects[:n]
                ids = [f"req-{i:04d}" for i in range(n)]
                wall = statistics.median(w for w, _ in runs[n])
                largest = largest_of[n]
                single: float | None = None
                if n in one_by_one:
                    home = prepare_home(
                        src, a.work_dir / f"o-{frames}-{n}", list(zip(chosen, ids, strict=True)), keys / "engine.pem"
                    )
                    single = 0.0
                    for rid in ids:
                        w, _cpu, doc = _run(home, api, [rid])
                        if not doc.get("all_clear"):
                            raise SystemExit(f"{rid} (one by one) not all clear")
                        single += w
                    largest = max(largest, _check(home, chosen, ids, keys))
                    shutil.rmtree(home)
                rows.append((frames, n, wall, single, largest))
                print(
                    f"  {frames:>9,} frames, {n:>3} requests: window {wall:7.1f} s (median of "
                    + ", ".join(f"{r:.1f}" for r, _ in runs[n])
                    + ")"
                    + (f", one by one {single:7.1f} s" if single is not None else ""),
                    flush=True,
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
    print("Erasure windows on a long-lived Prefect server (SQLite), wall time of `erasure request run --all`;")
    print("every request all clear, every pack verified offline, no subject's identifier in any byte of the home.")
    print("| store | requests | window | requests/s | one by one | requests/s | speed-up | largest pack |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for frames, n, wall, single, largest in rows:
        ob = f"{single:.1f} s | {n / single:.2f}" if single else "- | -"
        up = f"{single / wall:.1f}x" if single else "-"
        print(f"| {frames:,} frames | {n} | {wall:.1f} s | {n / wall:.2f} | {ob} | {up} | {largest / 1024:.0f} KiB |")
    if marginal:
        print()
        print(
            "Marginal cost of one more request in a window, (T(N) - T(1)) / (N - 1), median of the rounds"
            " (wall; CPU of the run process):"
        )
        print(
            "| store | N | marginal s/request | rounds | vs the smallest store | CPU s/request | rounds"
            " | vs the smallest store |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        smallest = min(f for f, _ in marginal)
        for (frames, big), (walls, cpus) in marginal.items():
            base = marginal.get((smallest, big))
            w, c = statistics.median(walls), statistics.median(cpus)
            vs_w = f"{w / statistics.median(base[0]):.2f}x" if base else "-"
            vs_c = f"{c / statistics.median(base[1]):.2f}x" if base else "-"
            print(
                f"| {frames:,} frames | {big} | {w:.2f} s | "
                + " / ".join(f"{x:.3f}" for x in walls)
                + f" | {vs_w} | {c:.2f} s | "
                + " / ".join(f"{x:.3f}" for x in cpus)
                + f" | {vs_c} |"
            )
    print(
        f"(each window cell is the median of {a.runs} run(s) on a noisy 2-core machine; one by one is one run;"
        f" stores from {a.bench_dir})"
    )


if __name__ == "__main__":
    main()
