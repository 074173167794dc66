"""Kind langgraph-sqlite: our erasure (`tasks.targets.langgraph_sqlite.ERASER.erase`) against the
framework's own delete for the same subject, side by side, at two sizes.

    .venv/bin/python bench/targets_langgraph_sqlite.py                       # 10k and 100k items, 3 runs
    .venv/bin/python bench/targets_langgraph_sqlite.py --sizes 10000 --runs 5

A memory of N items is built once per size with the real framework (`SqliteStore` with a 64-dim vector
index, the test suite's local hashed embedding; `SqliteSaver` under a compiled graph): `--people`
people, each with N/people items in three namespaces and N/100/people threads of two turns. Each run
copies it (on disk, so fsync costs what it costs) three times: on one copy the framework deletes the
subject as a team would (`store.search` + `store.delete` per item under their namespace, as the docs
show, each its own transaction; `delete_thread` per thread whose metadata names them), on the second
the same in the framework's fastest form (one `store.batch` of deletes), on the third `ERASER.erase`
runs (its delete, then ANALYZE, VACUUM and TRUNCATE checkpoint of both files). Medians over `--runs` runs (a different
subject each run), in seconds. The framework's delete leaves the subject's vectors, freed cells and
planner samples on disk (see the tests); ours leaves nothing, and its cost grows with the files
(VACUUM), which is reported apart.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from erasure.subject import Subject
from erasure.tiers import Tier
from tasks.targets.langgraph_sqlite import ERASER
from tests.langgraph_sqlite_fixtures import (
    THREAD_KEY,
    chat_graph,
    make_target,
    open_saver,
    open_store,
    thread_config,
)

WORDS = (
    "parcel",
    "refund",
    "invoice",
    "appointment",
    "clinic",
    "router",
    "boots",
    "ferry",
    "recipe",
    "pension",
    "printer",
    "library",
    "violin",
    "holiday",
    "courier",
    "pharmacy",
    "allergy",
    "lesson",
    "dentist",
    "insurance",
    "mortgage",
    "garden",
    "bicycle",
    "passport",
    "visa",
    "flight",
    "hotel",
    "museum",
    "concert",
    "ticket",
    "warranty",
    "laptop",
    "phone",
    "tablet",
    "charger",
    "kettle",
    "oven",
    "fridge",
)


def person(i: int) -> Subject:
    return Subject(id=f"usr-{i:05d}", email=f"person{i:05d}@example.org", name=f"Person Number{i:05d}")


def text(i: int, n: int) -> str:
    w = [WORDS[(i * 7 + n * 13 + k * 5) % len(WORDS)] for k in range(14)]
    return f"Note {n} of {i}: " + " ".join(w)


def build(root: Path, items: int, people: int) -> dict[str, Any]:
    """Build the memory under `root` (skipped when `root/done` exists); returns sizes and seconds."""
    from langgraph.store.base import PutOp

    done = root / "done"
    if done.exists():
        return {"build_s": float(done.read_text() or 0)}
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.perf_counter()
    per = items // people
    threads = max(1, items // 100 // people)
    with open_store(root / "store.sqlite", fast=True) as store:
        ops: list[Any] = []
        for i in range(people):
            p = person(i)
            for n in range(per):
                ns = ("users", p.id, ("memories", "profile", "episodes")[n % 3])
                ops.append(PutOp(ns, f"k-{n}", {"text": text(i, n), "email": p.email, "name": p.name}))
                if len(ops) >= 1000:
                    store.batch(ops)
                    ops = []
        if ops:
            store.batch(ops)
        store.conn.execute("PRAGMA optimize=0x10002")
    with open_saver(root / "checkpoints.sqlite", fast=True) as saver:
        graph = chat_graph(saver)
        for i in range(people):
            p = person(i)
            for t in range(threads):
                for turn in range(2):
                    graph.invoke(
                        {"messages": [("user", f"{p.name} ({p.email}): {text(i, turn)}")]},
                        thread_config(f"thread-{p.id}-{t}", p.id),
                    )
    seconds = time.perf_counter() - started
    done.write_text(f"{seconds:.1f}")
    return {"build_s": seconds}


def framework_delete(root: Path, subject: Subject, *, batched: bool = False) -> None:
    """`store.delete` per item (what the docs show), or one `store.batch` of deletes (its fastest form);
    then `delete_thread` per thread."""
    from langgraph.store.base import PutOp

    with open_store(root / "store.sqlite") as store:
        items = store.search(("users", subject.id), limit=10_000_000)
        if batched:
            store.batch([PutOp(item.namespace, item.key, None) for item in items])
        else:
            for item in items:
                store.delete(item.namespace, item.key)
    with open_saver(root / "checkpoints.sqlite") as saver:
        threads = {c.config["configurable"]["thread_id"] for c in saver.list(None, filter={THREAD_KEY: subject.id})}
        for tid in threads:
            saver.delete_thread(tid)


def fresh_copy(base: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(base, dest, ignore=shutil.ignore_patterns("done"))
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="store items per memory, comma-separated")
    ap.add_argument("--people", type=int, default=100, help="people per memory (the subject is one of them)")
    ap.add_argument("--runs", type=int, default=3, help="runs per size (medians)")
    ap.add_argument(
        "--dir",
        type=Path,
        default=Path("/tmp/erasure-bench/langgraph-sqlite"),
        help="where the memories are built and copied",
    )
    args = ap.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        base = args.dir / str(size) / "base"
        built = build(base, size, args.people)
        mib = sum(f.stat().st_size for f in base.iterdir() if f.is_file()) / (1 << 20)
        ours: list[float] = []
        theirs: list[float] = []
        batched: list[float] = []
        scrub: list[float] = []
        found = 0
        for run in range(args.runs):
            subject = person((run * 37 + 1) % args.people)
            work = fresh_copy(base, args.dir / str(size) / "framework")
            started = time.perf_counter()
            framework_delete(work, subject)
            theirs.append(time.perf_counter() - started)
            work = fresh_copy(base, args.dir / str(size) / "framework-batch")
            started = time.perf_counter()
            framework_delete(work, subject, batched=True)
            batched.append(time.perf_counter() - started)
            work = fresh_copy(base, args.dir / str(size) / "ours")
            target = make_target(work)
            started = time.perf_counter()
            out = ERASER.erase(target, subject)
            ours.append(time.perf_counter() - started)
            assert all(o.after == 0 for o in out.values())
            scrub.append(sum(out[t].detail.get("scrub_vacuum_ms", 0) for t in (Tier.working, Tier.semantic)) / 1000)
            found = out[Tier.episodic].before + out[Tier.semantic].before
        rows.append(
            (
                size,
                built["build_s"],
                mib,
                found,
                statistics.median(theirs),
                statistics.median(batched),
                statistics.median(ours),
                statistics.median(scrub),
            )
        )
    print(f"langgraph-sqlite: {args.people} people, medians of {args.runs} runs, seconds")
    head = (
        "items",
        "build",
        "MiB",
        "subject items",
        "framework delete",
        "framework batch",
        "our erase",
        "ours/delete",
        "ours/batch",
        "our ANALYZE+VACUUM+checkpoint",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("-" * (len(h) + 2) for h in head) + "|")
    for size, build_s, mib, found, theirs_s, batch_s, ours_s, scrub_s in rows:
        cells = (
            f"{size}",
            f"{build_s:.1f}",
            f"{mib:.1f}",
            f"{found}",
            f"{theirs_s:.3f}",
            f"{batch_s:.3f}",
            f"{ours_s:.3f}",
            f"{ours_s / theirs_s:.2f}",
            f"{ours_s / batch_s:.1f}",
            f"{scrub_s:.3f}",
        )
        print("| " + " | ".join(c.rjust(len(h)) for c, h in zip(cells, head, strict=True)) + " |")


if __name__ == "__main__":
    main()
