"""Per target kind, our erasure against the framework's own delete for the same subject, at two sizes,
in one run: runs `bench/targets_<kind>.py` for each kind (each builds its store with the real
framework, copies it fresh per run, and prints a table of medians) and prints their tables together.

    .venv/bin/python bench/targets.py                       # 10k and 100k items, 3 runs each
    .venv/bin/python bench/targets.py --sizes 2000,10000 --runs 1

Building the 100k stores takes minutes per kind (mem0 writes through local Qdrant); the table of each
kind says which parts of our time grow with the store (VACUUM, index rewrites).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

KINDS = ("langgraph_sqlite", "chroma", "mem0", "langgraph_postgres")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="items per store, comma-separated")
    ap.add_argument("--runs", type=int, default=3, help="runs per size (medians)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="which kinds, comma-separated")
    args = ap.parse_args()
    here = Path(__file__).resolve().parent
    failed = 0
    for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(here / f"targets_{kind}.py"), "--sizes", args.sizes, "--runs", str(args.runs)],
            capture_output=True,
            text=True,
            check=False,
        )
        table = [line for line in proc.stdout.splitlines() if line.startswith(("|", kind.split("_")[0]))]
        print(f"\n## {kind.replace('_', '-')} ({time.perf_counter() - t0:.0f} s to build and measure)")
        print("\n".join(table) if proc.returncode == 0 else f"failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        failed += proc.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
