"""kill -9 drills: the cascade dies by SIGKILL at a step boundary or inside a batch's transaction, then
runs again without the crash point: the end state equals a crash-free run's on an identical store.

Every drill gets its own copy of one template store. One `python -c` driver (it imports the cascade
once) forks, for each drill, a process that runs the cascade with `ERASURE_CRASH_AT` set and must die
by SIGKILL, then a second process without it that must finish; drills run a few at a time. The
tests then compare each drill's end state with the reference run's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.tiers import CASCADE_ORDER, Tier
from memory.schema import create
from memory.subprocessor_service import RunningService, start_service
from tasks.runner import run_cascade
from tests.cascade_fixtures import BYSTANDER, SUBJECT, SUBJECT_PHRASE, build_store, owned_counts, store_bytes, submit

REQUEST = "req-ann-1"
BATCH = 2  # small batches: every step with more than two items runs several
TRANSACTIONAL = [Tier.working, Tier.episodic, Tier.semantic, Tier.vectors, Tier.uploads, Tier.derivatives]
BOUNDARY = [f"{where}:{t.value}" for where in ("start", "end") for t in CASCADE_ORDER]
# batch 0: nothing of the step committed yet; batch 1: the first batch committed, the second dies inside
# its transaction (deletes, audit entry and suppression rows written, not committed)
MID = [f"mid:{t.value}:{b}" for t in TRANSACTIONAL for b in (0, 1)]
VOLATILE_TABLES = {"audit_log", "audit_checkpoints", "audit_merkle"}  # every (re)run appends to the audit log
ROOT = Path(__file__).resolve().parents[2]
PARALLEL = 4

DRIVER = r"""
import json, os, sys, traceback
from erasure.config import Home
from tasks.runner import run_cascade

request, batch, parallel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
drills = json.loads(sys.stdin.read())

def child(drill, point):
    os.environ["ERASURE_HOME"], os.environ["ERASURE_EVIDENCE"] = drill["root"], drill["evidence"]
    os.environ.pop("ERASURE_CRASH_AT", None)
    if point:
        os.environ["ERASURE_CRASH_AT"] = point
    try:
        run_cascade(request, Home.resolve(drill["root"], drill["evidence"]), batch_size=batch)
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    os._exit(0)

def spawn(drill, point):
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child(drill, point)
    return pid

def status(ws):
    return -os.WTERMSIG(ws) if os.WIFSIGNALED(ws) else os.WEXITSTATUS(ws)

out, running, queue = {}, {}, list(drills)
while queue or running:
    while queue and len(running) < parallel:
        d = queue.pop(0)
        running[spawn(d, d["point"])] = (d, "crash")
    pid, ws = os.wait()
    d, phase = running.pop(pid)
    out.setdefault(d["point"], {})[phase] = status(ws)
    if phase == "crash":
        running[spawn(d, None)] = (d, "rerun")
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """Where the drills' homes live: RAM when there is a tmpfs. A kill -9 tests process death, not
    power loss: the page cache outlives the process, so fsync (tens of them per run, ~5 ms each on
    this disk) adds time and no meaning here."""
    shm = Path("/dev/shm")
    path = Path(tempfile.mkdtemp(prefix="crash-drills-", dir=shm if shm.is_dir() else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _mkdir(scratch: Path, name: str) -> Path:
    path = scratch / name
    path.mkdir()
    return path


@pytest.fixture(scope="module")
def processor(scratch: Path) -> Iterator[RunningService]:
    with start_service("crm-sync", _mkdir(scratch, "services")) as svc:
        yield svc


@pytest.fixture(scope="module")
def template(scratch: Path, processor: RunningService) -> Home:
    """A built store with a vaulted request, never erased: copied by every drill."""
    base = _mkdir(scratch, "template")
    h = Home.resolve(base / "home", base / "evidence").ensure()
    build_store(h, base, processors=[processor])
    submit(h)
    return h


def copy_home(src: Home, dst: Home) -> Home:
    shutil.copytree(src.root, dst.root, dirs_exist_ok=True)
    if src.evidence_root.exists():
        shutil.copytree(src.evidence_root, dst.evidence_root, dirs_exist_ok=True)
    return dst


def table_counts(h: Home) -> dict[str, int]:
    """Rows per table (virtual tables counted through themselves, their shadow tables left out)."""
    conn = create(h.store_dir)
    try:
        tables = {
            str(n): str(sql)
            for n, sql in conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        virtual = [n for n, sql in tables.items() if sql.upper().startswith("CREATE VIRTUAL")]
        keep = [n for n in tables if not any(n.startswith(v + "_") for v in virtual) and n not in VOLATILE_TABLES]
        return {
            n: int(cast(tuple[Any, ...], conn.execute(f'SELECT count(*) FROM "{n}"').fetchone())[0])
            for n in sorted(keep)
        }
    finally:
        conn.close()


def end_state(h: Home) -> dict[str, Any]:
    """What must be the same after a crash and a rerun as after a crash-free run (ids and counts)."""
    engine = open_engine(h.engine_db)
    try:
        steps = [
            (s.step, s.status.value, s.before_count, s.after_count, s.removed_digest)
            for s in request_records.steps(engine, REQUEST)
        ]
        exceptions = sorted((e.tier, e.kind, e.item_key) for e in request_records.exceptions(engine, REQUEST))
        receipts = sorted((r.processor, r.status) for r in request_records.receipts(engine, REQUEST))
        step_rows = cast(
            tuple[Any, ...],
            engine.execute("SELECT count(*) FROM step_records WHERE request_id = ?", (REQUEST,)).fetchone(),
        )[0]
        footprint = sorted(
            tuple(r)
            for r in engine.execute("SELECT tier, kind, item_key FROM footprint WHERE request_id = ?", (REQUEST,))
        )
    finally:
        engine.close()
    lines = (h.evidence_dir(REQUEST) / "steps.jsonl").read_text().splitlines()
    return {
        "steps": steps,
        "step_rows": step_rows,
        "exceptions": exceptions,
        "receipts": receipts,
        "footprint": footprint,
        "jsonl": [json.loads(x)["step"] for x in lines],
        "subject": owned_counts(h, SUBJECT),
        "bystander": owned_counts(h, BYSTANDER),
        "tables": table_counts(h),
    }


@pytest.fixture(scope="module")
def reference(template: Home, scratch: Path) -> dict[str, Any]:
    """The end state of a crash-free run on an identical store."""
    base = _mkdir(scratch, "reference")
    h = copy_home(template, Home.resolve(base / "home", base / "evidence"))
    run_cascade(REQUEST, h, batch_size=BATCH)
    return end_state(h)


@pytest.fixture(scope="module")
def drills(template: Home, scratch: Path) -> dict[str, tuple[Home, dict[str, Any]]]:
    """Every drill's home after its crash and its rerun, with the two processes' exit statuses."""
    homes: dict[str, Home] = {}
    for point in BOUNDARY + MID:
        base = _mkdir(scratch, point.replace(":", "-"))
        homes[point] = copy_home(template, Home.resolve(base / "home", base / "evidence"))
    spec = [{"point": p, "root": str(h.root), "evidence": str(h.evidence_root)} for p, h in homes.items()]
    env = {k: v for k, v in os.environ.items() if k != "ERASURE_CRASH_AT"}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, REQUEST, str(BATCH), str(PARALLEL)],
        cwd=ROOT,
        env=env,
        input=json.dumps(spec).encode(),
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    statuses: dict[str, dict[str, Any]] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    for status in statuses.values():
        status["stderr"] = proc.stderr.decode()[-3000:]  # a rerun that raised printed its traceback here
    return {p: (h, statuses[p]) for p, h in homes.items()}


def check_drill(
    point: str, drills: dict[str, tuple[Home, dict[str, Any]]], template: Home, reference: dict[str, Any]
) -> None:
    h, status = drills[point]
    assert (status["crash"], status["rerun"]) == (-signal.SIGKILL, 0), status["stderr"]
    state = end_state(h)
    assert state["subject"] == dict.fromkeys(state["subject"], 0)
    assert state["bystander"] == owned_counts(template, BYSTANDER)
    assert state["step_rows"] == 9
    assert state["jsonl"] == [t.value for t in CASCADE_ORDER]
    for key in reference:
        assert state[key] == reference[key], key
    data = store_bytes(h)
    for needle in [*SUBJECT.identifiers(), SUBJECT_PHRASE]:
        assert needle.encode() not in data


def test_reference_run_erases_everything(reference: dict[str, Any], template: Home) -> None:
    assert reference["subject"] == dict.fromkeys(reference["subject"], 0)
    assert reference["bystander"] == owned_counts(template, BYSTANDER)
    assert [s[1] for s in reference["steps"]].count("erased") == 8  # fine_tune: a model was trained on it
    assert reference["receipts"] == [("crm-sync", "done")]
    assert reference["step_rows"] == 9 and reference["jsonl"] == [t.value for t in CASCADE_ORDER]


@pytest.mark.parametrize("point", BOUNDARY)
def test_kill_at_a_step_boundary_then_rerun(
    point: str, drills: dict[str, tuple[Home, dict[str, Any]]], template: Home, reference: dict[str, Any]
) -> None:
    check_drill(point, drills, template, reference)


@pytest.mark.parametrize("point", MID)
def test_kill_inside_a_batch_transaction_then_rerun(
    point: str, drills: dict[str, tuple[Home, dict[str, Any]]], template: Home, reference: dict[str, Any]
) -> None:
    check_drill(point, drills, template, reference)
