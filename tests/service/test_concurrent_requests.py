"""Two requests for two different subjects against one store at the same time: both finish, neither
sees "database is locked", and each erases its own subject completely (a shared corpus is rewritten
by both: one's new version must not bring the other's data back or keep it on disk)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from erasure.config import Home
from erasure.tiers import Tier
from tasks.runner import STEPS, open_context, run_cascade, run_step
from tasks.runner import _tier_keys as tier_keys
from tests.cascade_fixtures import BYSTANDER, SUBJECT, SUBJECT_PHRASE, build_store, owned_counts, store_bytes, submit

ANN, BOB = "req-ann-1", "req-other-1"  # a request id never names its subject (README)
BOB_TEXT = "The refund for my laptop never arrived"  # the second subject's own words (a training example)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def built(home: Home, tmp_path: Path) -> Home:
    build_store(home, tmp_path)
    submit(home, ANN, SUBJECT)
    submit(home, BOB, BYSTANDER)
    return home


def assert_both_erased(home: Home) -> None:
    for subject in (SUBJECT, BYSTANDER):
        counts = owned_counts(home, subject)
        assert counts == dict.fromkeys(counts, 0), subject.id
    data = store_bytes(home)
    for needle in [*SUBJECT.identifiers(), *BYSTANDER.identifiers(), SUBJECT_PHRASE, BOB_TEXT]:
        assert needle.encode() not in data, needle


def test_two_requests_in_two_threads(built: Home) -> None:
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(request_id: str) -> None:
        start.wait()
        try:
            run_cascade(request_id, built, batch_size=1)  # many small transactions: they interleave
        except BaseException as exc:  # re-raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in (ANN, BOB)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert_both_erased(built)


@pytest.mark.cascade  # the cascades run in subprocesses, out of the tiers' sight
def test_two_requests_in_two_processes(built: Home) -> None:
    env = {**os.environ, "ERASURE_HOME": str(built.root), "ERASURE_EVIDENCE": str(built.evidence_root)}
    env.pop("ERASURE_CRASH_AT", None)
    code = (
        "import sys; from erasure.config import Home; from tasks.runner import run_cascade; "
        "run_cascade(sys.argv[1], Home.resolve(), batch_size=1)"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, r], cwd=ROOT, env=env, stderr=subprocess.PIPE) for r in (ANN, BOB)
    ]
    errs = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert not any("locked" in e for e in errs)
    assert_both_erased(built)


def test_a_corpus_version_written_by_the_other_request_after_this_one_resolved_is_removed(built: Home) -> None:
    """Bob's fine-tune step has resolved its corpora when Ann's step rewrites the corpus: Ann's new
    version still holds Bob's example. Bob's erase must reach that version and remove its bytes."""
    with open_context(BOB, built) as ctx:
        step = STEPS[Tier.fine_tune]
        keys = tier_keys(ctx, Tier.fine_tune, step)
        run_step(ANN, Tier.fine_tune, built)  # the other request, in between
        step.erase(ctx, keys, ctx.batch_size)
        assert step.count(ctx, keys) == 0
    assert owned_counts(built, BYSTANDER)["ft_examples"] == 0
    corpora = b"".join(p.read_bytes() for p in sorted((built.store_dir / "corpora").rglob("*.jsonl")))
    assert BOB_TEXT.encode() not in corpora and SUBJECT_PHRASE.encode() not in corpora
