"""Chunking and one-line ingest timings: does the cost of a long memory item grow linearly?

    .venv/bin/python bench/chunking.py [--sizes 1,2,4,8,16] [--runs 3] [--ingest-sizes 0.25,0.5,1]

`chunk_text` on one text of each size in MB (words and spaces, no sentence end: one verbatim turn,
the worst case for the chunker), then `read_jsonl` + `ingest` of one JSONL line of each
`--ingest-sizes` MB into a fresh store (the CLI's path; 1 MB is about the maximum line). Prints the
median seconds and the ratio to the previous size: about 2 for linear growth at doubling sizes, about
4 for quadratic.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.ingest import ingest
from memory.ingest_text import chunk_text
from memory.items import MAX_LINE_BYTES, read_jsonl
from memory.schema import create

WORDS = ("billing", "refund", "delivery", "the", "a", "headphones", "address", "x" * 14, "ok", "account")


def text_of(n_bytes: int, seed: int = 7) -> str:
    """ASCII words and single spaces, `n_bytes` long, no sentence end."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        w = rng.choice(WORDS)
        parts.append(w)
        size += len(w) + 1
    return " ".join(parts)[:n_bytes]


def median_s(fn: Callable[..., object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ingest_one_line(n_bytes: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        line = {
            "source": "chat",
            "source_ref": "bench-1",
            "subject": {"id": "bench-subject"},
            "content": text_of(n_bytes),
        }
        path = folder / "items.jsonl"
        path.write_text(json.dumps(line) + "\n")
        conn = create(folder / "store")
        try:
            t0 = time.perf_counter()
            ingest(conn, folder / "store", read_jsonl(path))
            return time.perf_counter() - t0
        finally:
            conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,2,4,8,16", help="chunk_text text sizes in MB")
    ap.add_argument("--ingest-sizes", default="0.25,0.5,1", help="one-line ingest sizes in MB (max line: 1 MiB)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    print("| chunk_text | chunks | median s | ratio to previous |")
    print("| --- | --- | --- | --- |")
    prev = None
    for mb in (float(x) for x in args.sizes.split(",")):
        text = text_of(int(mb * 1_000_000))
        chunks = len(chunk_text(text))
        t = median_s(lambda text=text: chunk_text(text), args.runs)
        ratio = f"{t / prev:.1f}" if prev else ""
        print(f"| {mb:g} MB | {chunks:,} | {t:.3f} | {ratio} |")
        prev = t

    print()
    print(f"| one-line ingest (max line {MAX_LINE_BYTES:,} bytes) | median s | ratio to previous |")
    print("| --- | --- | --- |")
    prev = None
    for mb in (float(x) for x in args.ingest_sizes.split(",")):
        n = min(int(mb * 1_000_000), MAX_LINE_BYTES - 200)
        t = statistics.median(ingest_one_line(n) for _ in range(args.runs))
        ratio = f"{t / prev:.1f}" if prev else ""
        print(f"| {n / 1e6:.2f} MB | {t:.2f} | {ratio} |")
        prev = t


if __name__ == "__main__":
    main()
