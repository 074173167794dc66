"""Benchmark the byte scanner: hyperscan (streaming, all needles in one pass) vs naive per-needle find.

    .venv/bin/python bench/probe.py                    # ~1 GiB synthetic store in /tmp/probe-bench
    .venv/bin/python bench/probe.py --store DIR        # scan an existing store directory instead
    .venv/bin/python bench/probe.py --size-mib 2048 --needles 300 --runs 7
    .venv/bin/python bench/probe.py --store /tmp/erasure-bench/1000000/store --verify
                                                       # + fingerprint and verification time per tier

With `--verify`, the store must be a demo store (built by bench/build_store.py or `erasure store init
--demo`) with `demo-subjects.json` beside it: the first demo subject is fingerprinted with the probes'
real needles and every tier's probes are timed (medians), before any erasure (a worst case: every
probe finds the subject and counts it).

The synthetic store looks like one: a database-like file of text rows and float32 vectors, a WAL,
blobs of random bytes in two locations and a JSONL corpus; a few needles are planted (one straddling
every file's first 8 MiB read boundary). Needles: identifier-like strings, 40-byte content windows
and 128-byte float32 vector pieces. The naive baseline runs on a sample of the tree (the first
`--naive-mib` of files) and is scaled to GiB/s; all numbers are medians over `--runs` (the naive
scan: at most 3). Files are
read from the page cache (warm: they were just written or read); cold-disk numbers will be lower.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes.bytescan import DEFAULT_BUFFER, GIB, MIB, compile_needles, naive_scan_tree, scan_tree
from probes.views import ViewReport, scan_views

WORDS = [
    "refund",
    "parcel",
    "courier",
    "billing",
    "address",
    "appointment",
    "pharmacy",
    "clinic",
    "hiking",
    "cabin",
    "router",
    "antenna",
    "recipe",
    "wedding",
    "pension",
    "payroll",
    "chess",
    "printer",
    "telescope",
    "course",
    "delivery",
    "invoice",
    "subscription",
]


def make_needles(n: int, rng: np.random.Generator) -> list[bytes]:
    """n needles: 1/6 identifiers, 1/3 content windows, 1/2 vector pieces."""
    ids = [f"user-{rng.integers(1 << 40):x}@example.org".encode() for _ in range(n // 6)]
    content = [" ".join(rng.choice(WORDS, 6)).encode()[:40] + f" {i}".encode() for i in range(n // 3)]
    vectors = [rng.standard_normal(32).astype("<f4").tobytes() for _ in range(n - len(ids) - len(content))]
    return ids + content + vectors


def _text_block(rng: np.random.Generator, size: int) -> bytes:
    words = rng.choice(WORDS, size // 6)
    return (" ".join(words).encode() * 2)[:size]


def build_store(root: Path, size_mib: int, needles: list[bytes], rng: np.random.Generator) -> None:
    """Write ~size_mib of store-like files under root and plant a few needles."""
    if root.exists():
        shutil.rmtree(root)
    parts = {
        "memory.db": 0.45,
        "memory.db-wal": 0.1,
        "blobs/primary/ab/blob-a": 0.15,
        "blobs/replica-1/ab/blob-a": 0.15,
        "corpora/assistant-sft/v1.jsonl": 0.15,
    }
    for rel, share in parts.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        total = int(size_mib * MIB * share)
        with open(path, "wb") as f:
            written = 0
            while written < total:
                if rel.startswith("blobs"):
                    block = rng.bytes(4 * MIB)
                elif rel.endswith(".jsonl"):
                    block = _text_block(rng, 4 * MIB)
                else:  # pages of text rows and vectors
                    block = _text_block(rng, 2 * MIB) + rng.standard_normal(MIB // 2).astype("<f4").tobytes()
                f.write(block[: total - written])
                written += min(len(block), total - written)
    for i, rel in enumerate(parts):  # plant needle i across the first read boundary of file i
        needle = needles[i * 7 % len(needles)]
        with open(root / rel, "r+b") as f:
            f.seek(DEFAULT_BUFFER - len(needle) // 2)
            f.write(needle)


def _sample(root: Path, limit_mib: int) -> Path:
    """A temporary copy of the first files of root, up to limit_mib in total (for the naive scan)."""
    out = Path(tempfile.mkdtemp(prefix="probe-naive-"))
    total = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if total >= limit_mib * MIB:
            break
        target = out / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        size = min(path.stat().st_size, limit_mib * MIB - total)
        with open(path, "rb") as src, open(target, "wb") as dst:
            dst.write(src.read(size))
        total += size
    return out


def _view_needles(needles: list[bytes], store: Path | None) -> list[tuple[str, str]]:
    """The needles the decoded views match (text ones), as (kind, text): the first demo subject's
    identifiers on a demo store, else the synthetic identifier and content needles."""
    subjects = store.parent / "demo-subjects.json" if store is not None else None
    if subjects is not None and subjects.exists():
        import json

        first = json.loads(subjects.read_text())["subjects"][0]
        return [("identifier", str(first[k])) for k in ("id", "email", "name", "phone") if first.get(k)]
    return [
        ("identifier" if b"@" in n else "content", n.decode())
        for n in needles
        if n.isascii() and all(32 <= c < 127 for c in n)
    ]


def _absent_needles(store: Path | None) -> list[tuple[str, str]] | None:
    """A person the demo store does not hold, shaped like its subjects (the first subject's given name,
    so a namesake's frames still open windows): the views' cost after an erasure, when nothing is found
    and every trigger is read to the end."""
    subjects = store.parent / "demo-subjects.json" if store is not None else None
    if subjects is None or not subjects.exists():
        return None
    import json

    given = str(json.loads(subjects.read_text())["subjects"][0]["name"]).split()[0]
    return [
        ("identifier", "subj-zz-000123"),
        ("identifier", "zqx.absent@mail.example"),
        ("identifier", f"{given} Quillfeather"),
        ("identifier", "+44 7700 900461"),
    ]


def _gib_s(reports: list[ViewReport]) -> float:
    return statistics.median(r.bytes_read / GIB / r.seconds for r in reports if r.seconds > 0)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build or reuse the store, run both scanners, print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, help="scan this existing store directory (no synthetic data)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "probe-bench")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--needles", type=int, default=120)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--naive-mib", type=int, default=64)
    ap.add_argument("--keep", action="store_true", help="keep the synthetic store for the next run")
    ap.add_argument(
        "--verify",
        action="store_true",
        help="also time the fingerprint and each tier's probes on a demo store (--store)",
    )
    args = ap.parse_args(argv)
    rng = np.random.default_rng(20250301)
    needles = make_needles(args.needles, rng)
    root = args.store
    if root is None:
        root = args.work
        marker = root / ".bench-size"
        if not (marker.exists() and marker.read_text() == f"{args.size_mib}:{args.needles}"):
            print(f"building a {args.size_mib} MiB synthetic store in {root} ...", flush=True)
            build_store(root, args.size_mib, needles, rng)
            marker.write_text(f"{args.size_mib}:{args.needles}")

    started = time.perf_counter()
    compile_needles(needles)
    compile_s = time.perf_counter() - started
    scan_tree(root, [])  # warm-up: bring every file into the page cache, untimed
    fast, single = [], []
    for _ in range(args.runs):  # interleaved, so background load hits both alike
        fast.append(scan_tree(root, needles))
        single.append(scan_tree(root, needles, workers=1))
    sample = _sample(root, args.naive_mib)
    try:
        slow = [naive_scan_tree(sample, needles) for _ in range(max(1, min(args.runs, 3)))]
        check = scan_tree(sample, needles)
    finally:
        shutil.rmtree(sample)
    agree = all(s.found == check.found for s in slow)

    texts = _view_needles(needles, args.store)
    views = [scan_views(root, texts) for _ in range(max(1, min(args.runs, 3)))]
    absent_texts = _absent_needles(args.store)
    absent = [scan_views(root, absent_texts) for _ in range(max(1, min(args.runs, 3)))] if absent_texts else []
    hs = statistics.median(r.gib_per_s for r in fast)
    hs1 = statistics.median(r.gib_per_s for r in single)
    naive = statistics.median(r.gib_per_s for r in slow)
    rows = [
        ("store", str(root)),
        ("files scanned", f"{fast[0].files_scanned}"),
        ("bytes scanned", f"{fast[0].bytes_scanned / GIB:.3f} GiB"),
        ("needles", f"{len(needles)}"),
        ("needles found (hyperscan)", f"{len(fast[0].found)}"),
        ("hyperscan compile", f"{compile_s * 1000:.1f} ms"),
        (f"hyperscan scan, median of {len(fast)}", f"{statistics.median(r.seconds for r in fast):.3f} s"),
        (f"hyperscan throughput ({os.cpu_count()} CPUs, default threads)", f"{hs:.2f} GiB/s"),
        ("hyperscan throughput, 1 thread", f"{hs1:.2f} GiB/s"),
        (
            f"naive per-needle find, median of {len(slow)}",
            f"{statistics.median(r.seconds for r in slow):.3f} s on a {slow[0].bytes_scanned / MIB:.0f} MiB sample",
        ),
        ("naive throughput (scaled from the sample)", f"{naive:.3f} GiB/s"),
        ("speed-up", f"{hs / naive:.0f}x" if naive else "n/a"),
        ("naive and hyperscan agree on the sample", "yes" if agree else "NO"),
        (
            f"decoded views ({len(texts)} identifier/content needles), median of {len(views)}",
            f"{statistics.median(v.seconds for v in views):.3f} s",
        ),
        ("decoded views throughput", f"{_gib_s(views):.2f} GiB/s"),
        (
            "decoded views / raw scan time",
            f"{statistics.median(v.seconds for v in views) / statistics.median(r.seconds for r in fast):.1f}x",
        ),
        ("files no view could read", f"{len(views[0].unscanned)}"),
    ]
    if absent:
        rows += [
            (
                f"decoded views, a person the store does not hold, median of {len(absent)}",
                f"{statistics.median(v.seconds for v in absent):.3f} s",
            ),
            ("decoded views throughput, nothing found", f"{_gib_s(absent):.2f} GiB/s"),
            (
                "decoded views, nothing found / raw scan time",
                f"{statistics.median(v.seconds for v in absent) / statistics.median(r.seconds for r in fast):.1f}x",
            ),
        ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    if args.verify and args.store is not None:
        verification_times(args.store, max(1, min(args.runs, 5)))
    if args.store is None and not args.keep:
        shutil.rmtree(root)
    return 0 if agree else 1


def verification_times(store: Path, runs: int) -> None:
    """Fingerprint time and per-tier probe time for the first demo subject (medians of `runs`)."""
    import json

    from erasure.subject import Subject
    from probes.fingerprint import take_fingerprint
    from probes.model import PROBE_TIERS
    from probes.run import run_probes

    subjects = json.loads((store.parent / "demo-subjects.json").read_text())["subjects"]
    subject = Subject.model_validate(subjects[0])
    t = time.perf_counter()
    fp = take_fingerprint(store, subject)
    fp_s = time.perf_counter() - t
    rows = [("fingerprint (keys, needles, baseline incl. one byte scan)", fp_s, len(fp.needles))]
    for tier in PROBE_TIERS:
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            v = run_probes(store, subject, fp, tiers=[tier])
            times.append(time.perf_counter() - t)
        rows.append((f"probe {tier}", statistics.median(times), len(v.probes)))
    total = sum(r[1] for r in rows[1:])
    print()
    print(f"verification on {store} ({len(fp.needles)} needles; medians of {runs})")
    print(f"{'phase':<58}  {'seconds':>8}  {'methods':>7}")
    for name, sec, n in rows:
        print(f"{name:<58}  {sec:>8.3f}  {n:>7}")
    print(f"{'all probes':<58}  {total:>8.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
