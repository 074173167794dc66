"""The offline verifier opens only regular files (issue 34, finding 6): a FIFO given as the pack, a FIFO
or a huge sparse file named like the backups follow-up beside a genuine pack, a symlink as the pack:
each ends in one `FAIL` line, quickly and in little memory, with nothing read but what `fstat` allowed."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from proof.pack import attest, write_pack
from tests.proof.test_proof_hostile import PEAK_LIMIT_KIB, Genuine, Run, assert_one_fail_line, run_verifier
from tests.proof_fixtures import make_evidence, make_keys
from wire.format import FOLLOWUP_FILE

GIB = 1024**3
QUICK_SECONDS = 20.0


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Genuine:
    tmp = tmp_path_factory.mktemp("regular")
    keys = make_keys(tmp / "keys", "ecdsa-p256", dpo_algorithm="ed25519")
    path = write_pack(make_evidence(tmp, scenario="exceptions"), keys.engine)
    attest(path, keys.dpo, engine_pub=keys.engine_pub, attested_at="2024-02-02T10:00:00Z")
    return Genuine(keys, path, "", {}, tmp)


def _beside(genuine: Genuine, tmp_path: Path) -> Path:
    """A copy of the genuine pack alone in a folder of its own."""
    pack = tmp_path / "proof.tar.gz"
    shutil.copyfile(genuine.path, pack)
    return pack


def _timed(pack: Path, genuine: Genuine) -> tuple[Run, float]:
    start = time.monotonic()
    run = run_verifier(pack, genuine.keys, timeout=60)
    return run, time.monotonic() - start


def test_a_fifo_given_as_the_pack(genuine: Genuine, tmp_path: Path) -> None:
    fifo = tmp_path / "proof.tar.gz"
    os.mkfifo(fifo)
    run, took = _timed(fifo, genuine)
    assert_one_fail_line(run, "archive", "not a regular file")
    assert took < QUICK_SECONDS and run.peak_kib < PEAK_LIMIT_KIB


def test_a_symlink_given_as_the_pack(genuine: Genuine, tmp_path: Path) -> None:
    link = tmp_path / "proof.tar.gz"
    link.symlink_to(genuine.path)
    run, _took = _timed(link, genuine)
    assert_one_fail_line(run, "archive", "symbolic link")


def test_a_fifo_named_backups_followup_beside_a_genuine_pack(genuine: Genuine, tmp_path: Path) -> None:
    pack = _beside(genuine, tmp_path)
    os.mkfifo(pack.with_name(FOLLOWUP_FILE))
    run, took = _timed(pack, genuine)
    assert_one_fail_line(run, "backups-followup", "not a regular file")
    assert took < QUICK_SECONDS and run.peak_kib < PEAK_LIMIT_KIB


def test_a_huge_sparse_file_beside_a_genuine_pack(genuine: Genuine, tmp_path: Path) -> None:
    """6 GiB of holes, named like the follow-up: refused on its size, before one byte is read."""
    pack = _beside(genuine, tmp_path)
    with open(pack.with_name(FOLLOWUP_FILE), "wb") as fh:
        fh.truncate(6 * GIB)
    run, took = _timed(pack, genuine)
    assert_one_fail_line(run, "backups-followup", "larger than")
    assert took < QUICK_SECONDS and run.peak_kib < PEAK_LIMIT_KIB


def test_a_symlink_named_backups_followup_beside_a_genuine_pack(genuine: Genuine, tmp_path: Path) -> None:
    """A link is refused, not followed (it could name a FIFO, a device or another user's file)."""
    pack = _beside(genuine, tmp_path)
    pack.with_name(FOLLOWUP_FILE).symlink_to("/dev/zero")
    run, took = _timed(pack, genuine)
    assert_one_fail_line(run, "backups-followup", "symbolic link")
    assert took < QUICK_SECONDS
