"""Kind chroma: our erasure (`tasks.targets.chroma.ERASER.erase`) against the framework's own delete for
the same subject, side by side, at two sizes.

    .venv/bin/python bench/targets_chroma.py                        # 10k and 100k items, 3 runs
    .venv/bin/python bench/targets_chroma.py --sizes 10000 --runs 5
    .venv/bin/python bench/targets_chroma.py --server --sizes 2000 --window 5   # server mode

A memory of N items is built once per size with the real framework (chromadb 1.5 PersistentClient, the
test suite's 64-dim local embedding, default HNSW settings): two collections (`notes` cosine, `facts`
l2) of N/2 items each, `--people` people round robin, so the subject has N/people items. Each run
copies it (on disk, so fsync costs what it costs) twice: on one copy the framework deletes the subject
as a team would (`collection.delete(where={"user_id": id})` in each collection, client already open),
on the other `ERASER.erase` runs (delete through the framework, the log, the HNSW rewrite, the
full-text rebuild and VACUUM), timed whole and by part. Medians over `--runs` runs (a different
subject each run), in seconds. The framework's delete leaves the subject's vectors, log rows and
full-text postings on disk (tests/targets/test_target_chroma.py); ours leaves nothing, and two of its parts
grow with the store (the full-text rebuild and VACUUM), reported apart.

Server mode (`--server`, bench/targets_chroma_server.py): the store is served by a real `chroma run`
(tests/chroma_server_fixtures.py's start and stop scripts), an agent's HttpClient writes a record every
50 ms throughout, and a window of `--window` requests runs through the one cascade driver (no Prefect).
It reports the server's stops, each outage and their sum, the window's time, and the writing client's
calls and refused calls.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chroma_people import person, text  # bench/chroma_people.py

import tasks.targets.chroma as chroma_eraser
from erasure.subject import Subject
from erasure.tiers import Tier
from tasks.targets.chroma import ERASER
from tests.chroma_fixtures import client, embed, reopen, target_for

KEY = "user_id"
BATCH = 5000
PARTS = ("api_delete", "sql_delete", "rewrite_indexes", "hygiene")


def build(path: Path, size: int, people: int) -> dict[str, float]:
    t0 = time.perf_counter()
    c = client(path)
    try:
        for name, space in (("notes", "cosine"), ("facts", "l2")):
            col = c.get_or_create_collection(name, embedding_function=None, configuration={"hnsw": {"space": space}})
            half = size // 2
            for s in range(0, half, BATCH):
                ns = range(s, min(half, s + BATCH))
                docs = [text(n % people, n) for n in ns]
                col.add(
                    ids=[f"{name}-{n}" for n in ns],
                    documents=docs,
                    embeddings=[embed(d) for d in docs],
                    metadatas=[{KEY: person(n % people).id, "n": n} for n in ns],
                )
    finally:
        c.close()
    return {"build_s": time.perf_counter() - t0}


def framework_delete(path: Path, subject: Subject) -> float:
    """The team's delete, timed without opening the client (an agent has it open already)."""
    c = reopen(path)
    try:
        cols = [c.get_collection(x.name, embedding_function=None) for x in c.list_collections()]
        t0 = time.perf_counter()
        for col in cols:
            col.delete(where={KEY: subject.id})
        return time.perf_counter() - t0
    finally:
        c.close()


def timed_parts() -> dict[str, float]:
    """Wrap the eraser's parts to time them (a bench-only patch of the module's functions)."""
    spent: dict[str, float] = {}
    for name in PARTS:
        fn: Callable[..., Any] = getattr(chroma_eraser, name)

        @functools.wraps(fn)
        def wrapper(*a: Any, _fn: Callable[..., Any] = fn, _name: str = name, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - t0

        setattr(chroma_eraser, name, wrapper)
    return spent


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="items per memory, comma-separated")
    ap.add_argument("--runs", type=int, default=3, help="runs per size (medians)")
    ap.add_argument("--people", type=int, default=100, help="people in the memory (the subject has size/people items)")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/erasure-bench-chroma"))
    ap.add_argument("--server", action="store_true", help="server mode: a window on a served store, an agent writing")
    ap.add_argument("--window", type=int, default=5, help="server mode: requests in the window")
    args = ap.parse_args()
    if args.server:
        from targets_chroma_server import serve_window  # bench/targets_chroma_server.py

        for size in [int(x) for x in args.sizes.split(",")]:
            serve_window(args.work_dir / f"server-{size}", size, args.people, args.window)
        return
    spent = timed_parts()
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        pristine = args.work_dir / str(size) / "pristine"
        built = {"build_s": float("nan")}
        if not (pristine / "chroma.sqlite3").exists():
            shutil.rmtree(pristine, ignore_errors=True)
            built = build(pristine, size, args.people)
        parts: dict[str, list[float]]
        theirs, ours, parts = [], [], {p: [] for p in PARTS}
        for run in range(args.runs):
            subject = person(run + 1)
            a, b = args.work_dir / str(size) / "framework", args.work_dir / str(size) / "ours"
            for d in (a, b):
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(pristine, d)
            theirs.append(framework_delete(a, subject))
            left = ERASER.count(target_for(a, subject_key=KEY), subject)
            spent.clear()
            t0 = time.perf_counter()
            out = ERASER.erase(target_for(b, subject_key=KEY), subject)
            ours.append(time.perf_counter() - t0)
            for p in PARTS:
                parts[p].append(spent.get(p, 0.0))
            assert all(o.after == 0 for o in out.values()), out
            found = out[Tier.episodic].before
            print(
                f"size {size} run {run + 1}: subject items {found}, framework {theirs[-1]:.2f} s (left on disk:"
                f" {left[Tier.episodic]} log rows/records, {left[Tier.vectors]} vectors), ours {ours[-1]:.2f} s",
                flush=True,
            )
        rows.append(
            (
                size,
                built["build_s"],
                du(pristine) / 2**20,
                found,
                statistics.median(theirs),
                statistics.median(ours),
                *(statistics.median(parts[p]) for p in PARTS),
            )
        )
    print(f"chroma: {args.people} people, two collections, medians of {args.runs} runs, seconds")
    head = [
        "items",
        "build",
        "MiB",
        "subject items",
        "framework delete",
        "ours",
        "ours: api delete",
        "ours: sql + log",
        "ours: hnsw rewrite",
        "ours: fts rebuild + vacuum",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("-" * (len(h) + 2) for h in head) + "|")
    for r in rows:
        cells = [f"{r[0]:,}", f"{r[1]:.1f}", f"{r[2]:.0f}", str(r[3]), *(f"{x:.2f}" for x in r[4:])]
        print("| " + " | ".join(c.rjust(len(h)) for c, h in zip(cells, head, strict=True)) + " |")


if __name__ == "__main__":
    main()
