"""Benchmark the demo-store build: frames, build seconds, store size and frames/s per size.

    .venv/bin/python bench/build_store.py                        # 10k, 100k and 1M frames
    .venv/bin/python bench/build_store.py --sizes 10000,100000   # choose sizes
    .venv/bin/python bench/build_store.py --sizes 10000 --repeat 5 --rebuild

Each size is built as an ERASURE_HOME in `<root>/<size>` (store in `<root>/<size>/store`), the
same way `erasure store init --demo` builds it. An existing complete build (with its `build.json`)
is reused unless `--rebuild`; its recorded build time is reported. With `--repeat N` the size is
built N times from scratch and the median is reported. Store size counts every file under the store
directory (database, WAL, sessions, blobs, corpora).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from erasure.config import Home
from memory.demo import build_demo, write_subjects_file
from memory.schema import create

MIB = 1 << 20


def store_bytes(store: Path) -> int:
    """Bytes of every file under the store directory."""
    return sum(p.stat().st_size for p in store.rglob("*") if p.is_file())


def build_once(home_dir: Path, frames: int, subjects: int, seed: int, journal: str) -> dict[str, float]:
    """Build one demo store from scratch; returns its measurements (also written to build.json)."""
    if home_dir.exists():
        shutil.rmtree(home_dir)
    home = Home.resolve(home_dir).ensure()
    started = time.perf_counter()
    conn = create(home.store_dir, journal_mode="wal" if journal == "wal" else "delete")
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] > 10 or done == total:
            last[0] = now
            print(f"  {frames:>9,}: {done:>9,}/{total:,} frames, {now - started:7.1f} s", file=sys.stderr)

    result = build_demo(conn, home.store_dir, frames=frames, subjects=subjects, seed=seed, on_progress=progress)
    conn.close()
    seconds = time.perf_counter() - started
    write_subjects_file(home.root / "demo-subjects.json", result.subjects, seed=seed, tenant="default")
    size = store_bytes(home.store_dir)
    info: dict[str, float] = {
        "frames": result.frames,
        "seconds": seconds,
        "bytes": size,
        "people": result.people,
        "items": result.items,
        "subjects": subjects,
        "seed": seed,
    }
    (home_dir / "build.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, build (or reuse) each size, print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated frame counts")
    ap.add_argument("--root", type=Path, default=Path("/tmp/erasure-bench"), help="bench directory")
    ap.add_argument("--subjects", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--journal", choices=("wal", "delete"), default="wal")
    ap.add_argument("--repeat", type=int, default=1, help="builds per size (median reported)")
    ap.add_argument("--rebuild", action="store_true", help="rebuild even if a complete build exists")
    args = ap.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]

    rows: list[tuple[int, float, float, float, str]] = []
    for size in sizes:
        home_dir = args.root / str(size)
        record = home_dir / "build.json"
        if record.exists() and not args.rebuild and args.repeat == 1:
            info = json.loads(record.read_text())
            info["bytes"] = store_bytes(home_dir / "store")
            rows.append(
                (info["frames"], info["seconds"], info["bytes"] / MIB, info["frames"] / info["seconds"], "reused")
            )
            continue
        runs = [build_once(home_dir, size, args.subjects, args.seed, args.journal) for _ in range(args.repeat)]
        secs = statistics.median(r["seconds"] for r in runs)
        last = runs[-1]
        rows.append((int(last["frames"]), secs, last["bytes"] / MIB, last["frames"] / secs, f"built x{args.repeat}"))

    print(f"demo store build ({args.subjects} subjects, seed {args.seed}, journal {args.journal}; median seconds)")
    print(f"{'frames':>10} | {'build s':>9} | {'store MiB':>10} | {'frames/s':>9} | run")
    print(f"{'-' * 10}-+-{'-' * 9}-+-{'-' * 10}-+-{'-' * 9}-+-{'-' * 10}")
    for frames, secs, mib, rate, how in rows:
        print(f"{frames:>10,} | {secs:>9.1f} | {mib:>10.1f} | {rate:>9,.0f} | {how}")


if __name__ == "__main__":
    main()
