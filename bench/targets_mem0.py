"""Kind mem0: our erasure (`tasks.targets.mem0.ERASER.erase`) against the framework's own delete for the
same subject, side by side, at two sizes.

    .venv/bin/python bench/targets_mem0.py                       # 10k and 100k memories, 3 runs
    .venv/bin/python bench/targets_mem0.py --sizes 10000 --runs 5

A memory of N memories is built once per size with mem0 2.2's own storage layers, in the shapes
`Memory.add` writes (payloads as `_create_memory` builds them, through `vector_store.insert`; ADD rows
through `db.batch_add_history`; the last ten turns per session scope through `db.save_messages`; one
entity record per person and scope through the entity store's `insert`): `--people` people with N/people
memories each over three session scopes. Building through `Memory.add` one memory at a time costs about
60 ms each here (local Qdrant commits, and fsyncs, every point), so the build sets
`synchronous=OFF` on local Qdrant's and the history's connections while it writes (the file format is the same) and uses
a cheap seeded embedding (64 floats; the vectors' values do not matter to either delete).

Each run copies the memory (on disk) twice: on one copy the framework deletes the subject as a team
would, from a fresh process state (`Memory(config)` loads the local Qdrant folder, then
`delete_all(user_id=...)`: per memory, a point delete and a DELETE history row, each its own commit);
on the other `ERASER.erase` runs (it reads every point, deletes the subject's history, messages and
points, VACUUMs each file). Medians over `--runs` runs (a different subject each run), in seconds. The
framework's delete leaves the history (with a second copy of every text), the raw turns and, from a
fresh process, the entity records (see tests/targets/test_target_mem0.py); ours leaves nothing, and its cost
grows with the files (reading every pickled point, VACUUM), which is reported apart.

Local Qdrant warns above 20,000 points that local mode is not meant for that size; the 100k memory is
past it, as some teams' are.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sys
import time
import uuid
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from erasure.subject import Subject
from erasure.tiers import Tier
from tasks.targets.mem0 import ERASER
from tests.mem0_fixtures import DIMS, close_memory, mem0_target, open_memory  # also: MEM0_TELEMETRY off

warnings.simplefilter("ignore")  # local Qdrant's "not recommended above 20,000 points", payload indexes

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
AGENT = "support-bot"
BATCH = 2000


def person(i: int) -> Subject:
    return Subject(id=f"usr-{i:05d}", email=f"person{i:05d}@example.org", name=f"Person Number{i:05d}")


def text(i: int, n: int) -> str:
    w = [WORDS[(i * 7 + n * 13 + k * 5) % len(WORDS)] for k in range(14)]
    return f"Note {n} of person {i}: " + " ".join(w)


def vector(i: int, n: int) -> list[float]:
    v = np.random.default_rng([i, n + 8]).standard_normal(DIMS)
    return [float(x) for x in v / np.linalg.norm(v)]


def scope(i: int, n: int) -> dict[str, str]:
    p = person(i)
    return (
        {"user_id": p.id},
        {"user_id": p.id, "agent_id": AGENT},
        {"user_id": p.id, "agent_id": AGENT, "run_id": f"thread-{i}"},
    )[n % 3]


def _fast(m: Any) -> None:
    """synchronous=OFF on local Qdrant's and the history's connections (build only; same file format)."""
    m.db.connection.execute("PRAGMA synchronous=OFF")
    local = m.vector_store.client._client
    for collection in local.collections.values():
        if collection.storage is not None:
            collection.storage.storage.execute("PRAGMA synchronous=OFF")


def build(root: Path, items: int, people: int) -> dict[str, Any]:
    """Build the memory under `root` (skipped when `root/done` exists); returns the build's seconds."""
    done = root / "done"
    if done.exists():
        return {"build_s": float(done.read_text() or 0)}
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.perf_counter()
    m = open_memory(root)
    try:
        m.entity_store  # noqa: B018 - creates the entity collection the way mem0 does
        _fast(m)
        per = items // people
        vecs: list[list[float]] = []
        ids: list[str] = []
        payloads: list[dict[str, Any]] = []
        history: list[dict[str, Any]] = []

        def flush() -> None:
            if ids:
                m.vector_store.insert(vectors=vecs, ids=ids, payloads=payloads)
                m.db.batch_add_history(history)
            for lst in (vecs, ids, payloads, history):
                lst.clear()

        entities: list[tuple[list[float], str, dict[str, Any]]] = []
        for i in range(people):
            linked: dict[int, list[str]] = {0: [], 1: [], 2: []}
            for n in range(per):
                t = text(i, n)
                now = datetime.now(UTC).isoformat()
                mid = str(uuid.uuid4())
                payload = {
                    **scope(i, n),
                    "data": t,
                    "hash": hashlib.md5(t.encode()).hexdigest(),
                    "created_at": now,
                    "updated_at": now,
                    "text_lemmatized": t,
                    "role": "user",
                }
                vecs.append(vector(i, n))
                ids.append(mid)
                payloads.append(payload)
                history.append(
                    {
                        "memory_id": mid,
                        "old_memory": None,
                        "new_memory": t,
                        "event": "ADD",
                        "created_at": now,
                        "is_deleted": 0,
                    }
                )
                linked[n % 3].append(mid)
                if len(ids) >= BATCH:
                    flush()
            p = person(i)
            for k, mids in linked.items():
                if mids:
                    entities.append(
                        (
                            vector(i, -8 + k),
                            str(uuid.uuid4()),
                            {"data": p.name, "entity_type": "PROPER", "linked_memory_ids": mids, **scope(i, k)},
                        )
                    )
                    turns = [{"role": "user", "content": f"{p.name} ({p.email}): {text(i, j)}"} for j in range(10)]
                    sc = "&".join(f"{key}={value}" for key, value in sorted(scope(i, k).items()))
                    m.db.save_messages(turns, sc)
        flush()
        _fast(m)
        for start in range(0, len(entities), BATCH):
            chunk = entities[start : start + BATCH]
            m.entity_store.insert(
                vectors=[c[0] for c in chunk], ids=[c[1] for c in chunk], payloads=[c[2] for c in chunk]
            )
    finally:
        close_memory(m)
    seconds = time.perf_counter() - started
    done.write_text(f"{seconds:.1f}")
    return {"build_s": seconds}


def framework_delete(root: Path, subject: Subject) -> tuple[float, float]:
    """A fresh `Memory` (loads the folder), then `delete_all(user_id=...)`: (open s, delete s)."""
    started = time.perf_counter()
    m = open_memory(root)
    opened = time.perf_counter()
    try:
        m.delete_all(user_id=subject.id)
        return opened - started, time.perf_counter() - opened
    finally:
        close_memory(m)


def fresh_copy(base: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(base, dest, ignore=shutil.ignore_patterns("done", ".lock"))
    return dest


def mib(root: Path) -> float:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / (1 << 20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="memories per store, comma-separated")
    ap.add_argument("--people", type=int, default=100, help="people per memory (the subject is one of them)")
    ap.add_argument("--runs", type=int, default=3, help="runs per size (medians)")
    ap.add_argument(
        "--dir", type=Path, default=Path("/tmp/erasure-bench/mem0"), help="where the memories are built and copied"
    )
    args = ap.parse_args()
    import mem0  # noqa: F401 - imported once before any timing (it takes seconds)

    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        base = args.dir / str(size) / "base"
        built = build(base, size, args.people)
        opens: list[float] = []
        theirs: list[float] = []
        ours: list[float] = []
        vacuum: list[float] = []
        found = 0
        for run in range(args.runs):
            subject = person((run * 37 + 1) % args.people)
            work = fresh_copy(base, args.dir / str(size) / "framework")
            open_s, delete_s = framework_delete(work, subject)
            opens.append(open_s)
            theirs.append(open_s + delete_s)
            work = fresh_copy(base, args.dir / str(size) / "ours")
            started = time.perf_counter()
            out = ERASER.erase(mem0_target(work), subject)
            ours.append(time.perf_counter() - started)
            assert all(o.after == 0 for o in out.values()), out
            vacuum.append(
                (out[Tier.vectors].detail["delete_and_vacuum_ms"] + out[Tier.audit_log].detail["vacuum_ms"]) / 1000
            )
            found = out[Tier.semantic].detail["memories"]
        rows.append(
            (
                size,
                built["build_s"],
                mib(base),
                found,
                statistics.median(opens),
                statistics.median(theirs),
                statistics.median(ours),
                statistics.median(vacuum),
            )
        )
    print(f"mem0 (local Qdrant + SQLite history): {args.people} people, medians of {args.runs} runs, seconds")
    print(
        f"| {'items':>7} | {'build':>6} | {'MiB':>6} | {'subject items':>13} | {'framework delete':>16} | "
        f"{'of which open':>13} | {'our erase':>9} | {'ratio':>5} | {'of which delete+VACUUM':>22} |"
    )
    print("|" + "|".join("-" * (w + 2) for w in (7, 6, 6, 13, 16, 13, 9, 5, 22)) + "|")
    for size, build_s, size_mib, n, open_s, theirs_s, ours_s, vac_s in rows:
        ratio = ours_s / theirs_s if theirs_s else float("inf")
        print(
            f"| {size:>7} | {build_s:>6.1f} | {size_mib:>6.1f} | {n:>13} | {theirs_s:>16.3f} | {open_s:>13.3f} | "
            f"{ours_s:>9.3f} | {ratio:>5.2f} | {vac_s:>22.3f} |"
        )


if __name__ == "__main__":
    main()
