"""Erase time against store size: the cascade (`tasks.runner`, prepare + nine steps, each timed) next
to a hand-written raw-SQL baseline that deletes the same rows, on demo stores of 10k, 100k and 1M frames.

    .venv/bin/python bench/erase.py                          # 10k, 100k, 1M frames, 3 subjects each
    .venv/bin/python bench/erase.py --sizes 10000,100000 --subjects 5
    .venv/bin/python bench/erase.py --explain --sizes 10000   # statements whose query plan scans a table

Stores are reused from `<bench-dir>/<frames>` (an ERASURE_HOME as `bench/build_store.py` or
`erasure store init --demo --frames N --home DIR` leave it: `store/` and `demo-subjects.json`), or
built here with `memory.demo` when missing. For each of the first `--subjects` demo subjects the store
is copied twice into `--work-dir` (on disk, so fsync costs what it costs): the cascade erases the
subject on one copy, the baseline on the other; both are then checked to leave no row of the subject
and the same rows of everyone else. All times are medians over the subjects, in seconds.

The baseline is what an expert writes by hand for this schema: temp tables of the subject's frame,
chunk and entity ids (recursive CTE for derived frames, FTS MATCH for quoting ones), set-based deletes
per table, point deletes on the vec0 and FTS tables, the blob and session files unlinked, the corpus
files filtered in place, one WAL checkpoint at the end. What it lacks is what the cascade adds: the
footprint and step records in the engine, bounded batches with a checkpoint after each, audit entries
and suppression rows, a new corpus version, crash safety and the evidence files.

Three parts are linear by design and reported apart: fine_tune writes a new corpus version (the old
one minus the subject), audit_log's evidence carries the hash chain from the subject's first entry to
the head, and the scrub after the steps (`tasks.scrub`, also done by the baseline) VACUUMs the whole
database file. Every other step must stay flat: `--explain` traces every statement the cascade runs on
the store and prints those whose EXPLAIN QUERY PLAN scans a table (how the vec0 `IN (...)` deletes,
a full scan of the vector table per batch, were found).

Nothing printed names a subject: they are "subject 1..K".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import apsw

from bench.erase_baseline import baseline
from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.models import ErasureRequestEnvelope
from erasure.sqlite import connect, transaction
from erasure.subject import Subject
from erasure.tiers import CASCADE_ORDER
from memory import demo, subprocessors
from memory.schema import create, db_path
from memory.subprocessor_service import RunningService, start_service
from tasks import runner

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
STEPS = ["prepare", *(t.value for t in CASCADE_ORDER), "checkpoint", "scrub"]
# One request's own cascade: what an erasure window pays per request (the scrub is once per window).
OWN = ("prepare", *(t.value for t in CASCADE_ORDER))
# Work proportional to a corpus, the audit log, the whole database file, by design.
LINEAR = ("fine_tune", "audit_log", "scrub")
# Tables whose rows of everyone else must be the same after the cascade and after the baseline.
SAME_ROWS = (
    "frames",
    "frame_chunks",
    "frame_refs",
    "frame_vectors",
    "chunk_vectors",
    "frames_fts",
    "kg_entities",
    "kg_relations",
    "kg_entity_frames",
    "recall_cache",
    "working_sessions",
    "blobs",
    "blob_locations",
    "subprocessor_records",
    "audit_vault",
)
OWNED = {
    "frames": "subject_id",
    "raw_archive": "subject_id",
    "working_sessions": "subject_id",
    "blobs": "subject_id",
    "ft_examples": "subject_id",
    "subprocessor_records": "subject_id",
    "audit_vault": "subject_id",
}


# --- stores ----------------------------------------------------------------------------------------


def ensure_store(bench_dir: Path, frames: int, *, subjects: int, seed: int, rebuild: bool = False) -> Path:
    """The home of the demo store of `frames` frames: reused when complete (its `build.json` is
    written last), else built here. An incomplete one (perhaps still being built by
    bench/build_store.py) is left alone unless `rebuild`."""
    root = bench_dir / str(frames)
    complete = all(p.exists() for p in (db_path(root / "store"), root / demo.SUBJECTS_FILE, root / "build.json"))
    if complete and not rebuild:
        return root
    if root.exists():
        if not rebuild:
            raise SystemExit(
                f"{root} holds an incomplete store (a build may still be running): wait for it, or pass --rebuild"
            )
        shutil.rmtree(root)
    home = Home.resolve(root, root / "evidence").ensure()
    print(f"building a demo store of {frames:,} frames in {root} ...", flush=True)
    conn = create(home.store_dir)
    try:
        result = demo.build_demo(conn, home.store_dir, frames=frames, subjects=max(subjects, 5), seed=seed)
    finally:
        conn.close()
    demo.write_subjects_file(root / demo.SUBJECTS_FILE, result.subjects, seed=seed, tenant="default")
    (root / "build.json").write_text(json.dumps({"frames": result.frames, "seconds": result.elapsed}) + "\n")
    print(f"  built in {result.elapsed:.1f} s", flush=True)
    return root


def demo_subjects(root: Path) -> tuple[str, list[Subject]]:
    doc = json.loads((root / demo.SUBJECTS_FILE).read_text(encoding="utf-8"))
    return str(doc.get("tenant", "default")), [Subject.model_validate(s) for s in doc["subjects"]]


def copy_store(root: Path, dest: Path) -> Home:
    """A fresh home at `dest` whose store is a copy of the one under `root` (no engine, no evidence)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(root / "store", dest / "store")
    os.sync()  # else the first checkpoint's fsync pays for writing back the whole copy (~1 s at 1M frames)
    return Home.resolve(dest, dest / "evidence").ensure()


def frame_count(root: Path) -> int:
    conn = connect(db_path(root / "store"), readonly=True)
    try:
        return int(cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM frames").fetchone())[0])
    finally:
        conn.close()


@contextmanager
def live_processors(home: Home) -> Iterator[list[RunningService]]:
    """Local processor services for the names in the copy's inventory (re-registered at their URLs)."""
    started: list[RunningService] = []
    conn = connect(home.store_db)
    try:
        for name in [str(r[0]) for r in conn.execute("SELECT name FROM subprocessors ORDER BY name")]:
            svc = start_service(name, home.services_dir)
            started.append(svc)
            with transaction(conn):
                subprocessors.register(conn, name, svc.url, "bench", [])
        conn.close()
        yield started
    finally:
        conn.close()
        for svc in started:
            svc.stop()


# --- the cascade -----------------------------------------------------------------------------------


def submit(home: Home, tenant: str, subject: Subject, request_id: str) -> None:
    env = ErasureRequestEnvelope.model_validate(
        {
            "request_id": request_id,
            "tenant_id": tenant,
            "subject": subject.model_dump(exclude_none=True),
            "legal_basis": "GDPR",
            "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
            "requester_identity_proof_ref": "bench",
            "reason": "erasure benchmark",
        }
    )
    with Engine.borrow(home.engine_db) as engine:
        request_records.submit(engine, env, now=datetime.now(UTC))


def time_cascade(home: Home, request_id: str, batch_size: int) -> dict[str, float]:
    """Seconds of `prepare` (the footprint before the first deletion) and of each of the nine steps, as
    `run_cascade` runs them, then of the scrub."""
    out: dict[str, float] = {}
    t = time.perf_counter()
    runner.prepare(request_id, home)
    out["prepare"] = time.perf_counter() - t
    for tier in CASCADE_ORDER:
        t = time.perf_counter()
        runner.run_step(request_id, tier, home, batch_size=batch_size)
        out[tier.value] = time.perf_counter() - t
    out["checkpoint"] = 0.0  # after every batch, inside the steps
    t = time.perf_counter()
    runner.scrub(request_id, home)  # VACUUM + TRUNCATE checkpoint, as run_cascade and the flow end
    out["scrub"] = time.perf_counter() - t
    return out


# --- checks ----------------------------------------------------------------------------------------


def residue(home: Home, subject: Subject) -> int:
    """Rows that still carry the subject (by its id, entity names, turn keys of its archive rows)."""
    conn = connect(home.store_db, readonly=True)
    try:
        n = sum(
            int(
                cast(
                    tuple[Any, ...], conn.execute(f"SELECT count(*) FROM {t} WHERE {c} = ?", (subject.id,)).fetchone()
                )[0]
            )
            for t, c in OWNED.items()
        )
        for ident in subject.identifiers():
            n += int(
                cast(
                    tuple[Any, ...],
                    conn.execute("SELECT count(*) FROM kg_entities WHERE name = ?", (ident,)).fetchone(),
                )[0]
            )
        return n
    finally:
        conn.close()


def rows(home: Home) -> dict[str, int]:
    conn = connect(home.store_db, readonly=True)
    try:
        return {
            t: int(cast(tuple[Any, ...], conn.execute(f"SELECT count(*) FROM {t}").fetchone())[0]) for t in SAME_ROWS
        }
    finally:
        conn.close()


# --- finding scans -------------------------------------------------------------------------------

SMALL_TABLES = (
    "sqlite_master",
    "store_meta",
    "subprocessors",
    "ft_corpora",
    "model_lineage",
    "audit_checkpoints",
    "holds",
)
CONSTANT = ("ORDER BY seq DESC LIMIT 1",)  # reads the last row of a rowid table: no scan in fact


def explain(root: Path, work: Path, batch_size: int) -> int:
    """Run the cascade for one subject with every store statement traced, then print each distinct
    statement whose query plan scans a table (a cost that grows with the store). Returns how many."""
    tenant, subjects = demo_subjects(root)
    home = copy_store(root, work / "explain")
    submit(home, tenant, subjects[0], "bench-explain")
    seen: dict[str, None] = {}
    store_db = str(home.store_db)

    def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        seen.setdefault(sql.strip(), None)
        return True

    def hook(conn: apsw.Connection) -> None:
        if conn.filename == store_db:
            conn.exec_trace = trace

    apsw.connection_hooks.append(hook)
    try:
        with live_processors(home):
            time_cascade(home, "bench-explain", batch_size)
    finally:
        apsw.connection_hooks.remove(hook)
    conn = connect(home.store_db, readonly=True)
    found = 0
    try:
        for sql in seen:
            head = sql.split(None, 1)[0].upper() if sql else ""
            if head not in ("SELECT", "DELETE", "UPDATE", "INSERT", "WITH") or any(c in sql for c in CONSTANT):
                continue
            try:
                plan = [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, _nulls(sql))]
            except apsw.Error:
                continue
            scans = [
                line
                for line in plan
                if line.startswith("SCAN")
                and not any(f"SCAN {t}" in line for t in SMALL_TABLES)
                and not any(k in line for k in ("INDEX 1:", "INDEX 0:=", "INDEX 0:M"))
            ]  # vec0 key, FTS5 key/MATCH
            if scans:
                found += 1
                print(f"\n{sql[:300]}")
                for line in scans:
                    print(f"    {line}")
    finally:
        conn.close()
    print(f"\n{len(seen)} distinct statements traced; {found} scan a table")
    return found


def _nulls(sql: str) -> tuple[None, ...]:
    return (None,) * sql.count("?")


# --- the run ---------------------------------------------------------------------------------------


def run_size(root: Path, work: Path, k: int, batch_size: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    tenant, subjects = demo_subjects(root)
    cascade: dict[str, list[float]] = {s: [] for s in STEPS}
    raw: dict[str, list[float]] = {s: [] for s in STEPS}
    for i, subject in enumerate(subjects[:k], start=1):
        request_id = f"bench-{i}"
        h1 = copy_store(root, work / "cascade")
        submit(h1, tenant, subject, request_id)
        with live_processors(h1):
            for step, sec in time_cascade(h1, request_id, batch_size).items():
                cascade[step].append(sec)
        h2 = copy_store(root, work / "baseline")
        for step, sec in baseline(h2, subject).items():
            raw[step].append(sec)
        left = (residue(h1, subject), residue(h2, subject))
        same = rows(h1) == rows(h2)
        print(
            f"  subject {i}: cascade {sum(c[-1] for c in cascade.values()):.3f} s, baseline "
            f"{sum(r[-1] for r in raw.values()):.3f} s, residue {left[0]}/{left[1]}, "
            f"same rows of everyone else: {'yes' if same else 'NO'}",
            flush=True,
        )
        if left != (0, 0) or not same:
            print("  WARNING: the two erasures did not remove the same rows", flush=True)
    shutil.rmtree(work / "cascade", ignore_errors=True)
    shutil.rmtree(work / "baseline", ignore_errors=True)
    return cascade, raw


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def _sums(xs: dict[str, list[float]], keys: tuple[str, ...] | list[str]) -> list[float]:
    """Per subject, the seconds of the parts in `keys` added up."""
    return [sum(v) for v in zip(*(xs[k] for k in keys), strict=True)]


def print_table(frames: int, cascade: dict[str, list[float]], raw: dict[str, list[float]]) -> tuple[float, float]:
    print(f"\n{frames:,} frames (median of {len(cascade['prepare'])} subjects, seconds)")
    print(f"{'step':<14}{'cascade':>10}{'baseline':>10}{'ratio':>8}")
    for step in STEPS:
        c, r = med(cascade[step]), med(raw[step])
        print(f"{step:<14}{c:>10.4f}{r:>10.4f}{(c / r if r > 0 else float('nan')):>8.1f}")
    own = med(_sums(cascade, OWN))
    print(f"{'own cascade':<14}{own:>10.4f}{med(_sums(raw, OWN)):>10.4f}   (prepare + nine steps, no scrub)")
    ct = med(_sums(cascade, STEPS))
    rt = med(_sums(raw, STEPS))
    print(f"{'total':<14}{ct:>10.4f}{rt:>10.4f}{ct / rt:>8.1f}")
    print("(each row and each sum is a median over the subjects: the rows need not add up to the sums)")
    return ct, rt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=",".join(str(s) for s in DEFAULT_SIZES), help="comma-separated store sizes in frames"
    )
    parser.add_argument("--subjects", type=int, default=3, help="subjects erased per size (median over them)")
    parser.add_argument("--bench-dir", type=Path, default=Path("/tmp/erasure-bench"), help="where the stores live")
    parser.add_argument("--work-dir", type=Path, default=None, help="where the copies go (default <bench-dir>/work)")
    parser.add_argument("--batch-size", type=int, default=10_000, help="the cascade's batch size")
    parser.add_argument("--seed", type=int, default=7, help="seed of stores built here")
    parser.add_argument("--rebuild", action="store_true", help="build the stores again even if they exist")
    parser.add_argument(
        "--explain",
        action="store_true",
        help="instead: trace one cascade on the smallest size and print every statement whose query plan scans a table",
    )
    args = parser.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    work = args.work_dir or args.bench_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    if args.explain:
        root = ensure_store(args.bench_dir, min(sizes), subjects=args.subjects, seed=args.seed, rebuild=args.rebuild)
        return 1 if explain(root, work, args.batch_size) else 0
    summary: list[tuple[int, float, float, float, float]] = []
    for size in sizes:
        root = ensure_store(args.bench_dir, size, subjects=args.subjects, seed=args.seed, rebuild=args.rebuild)
        frames = frame_count(root)
        print(f"store {root} ({frames:,} frames)", flush=True)
        cascade, raw = run_size(root, work, args.subjects, args.batch_size)
        ct, rt = print_table(frames, cascade, raw)
        own = med(_sums(cascade, OWN))
        flat = med(_sums(cascade, [k for k in OWN if k not in LINEAR]))
        summary.append((frames, ct, rt, own, flat))
    print(
        f"\n{'frames':>12}{'cascade s':>12}{'baseline s':>12}{'ratio':>8}{'own cascade s':>15}{'indexed steps s':>17}"
    )
    for frames, ct, rt, own, flat in summary:
        print(f"{frames:>12,}{ct:>12.4f}{rt:>12.4f}{ct / rt:>8.1f}{own:>15.4f}{flat:>17.4f}")
    if len(summary) > 1:
        small, large = min(summary), max(summary)
        print(
            f"largest/smallest store ({large[0]:,}/{small[0]:,} frames): cascade {large[1] / small[1]:.2f}x; "
            f"baseline {large[2] / small[2]:.2f}x; own cascade {large[3] / small[3]:.2f}x; indexed steps "
            f"{large[4] / small[4]:.2f}x"
        )
    print(
        "(own cascade: prepare and the nine steps of one request, what an erasure window pays per request; "
        f"indexed steps: the same without {', '.join(k for k in LINEAR if k in OWN)}. "
        f"{', '.join(LINEAR)} are linear by design: a new corpus version is the old one minus the subject; "
        "the audit-log evidence carries the hash chain from the subject's first entry to the head; VACUUM "
        "rewrites the whole database file)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
