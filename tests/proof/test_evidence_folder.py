"""`EvidenceFolder`: a request's evidence folder read as one object: its packs (newest and history), the
current run's verification.json and the one of the run that wrote a pack, each pack's statements and
follow-up; links and names the product never writes are not taken.

The folder is laid out here by hand, as docs/architecture.md describes it (not by the code under test).
"""

from __future__ import annotations

import json
from pathlib import Path

from proof.evidence_folder import EvidenceFolder


def _write(path: Path, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _verification(folder: Path, verified_at: str) -> None:
    _write(folder / "verification.json", json.dumps({"verified_at": verified_at}).encode())


def test_an_empty_or_missing_folder_has_no_pack_and_no_verification(tmp_path: Path) -> None:
    ev = EvidenceFolder(tmp_path / "nothing")
    assert ev.packs == () and ev.history == ()
    assert ev.newest == tmp_path / "nothing" / "proof.tar.gz"  # where the first pack will be
    assert ev.verification is None and ev.statements() == []


def test_packs_newest_history_and_each_runs_verification(tmp_path: Path) -> None:
    first, second = _write(tmp_path / "proof.tar.gz"), _write(tmp_path / "proof-2.tar.gz")
    _write(tmp_path / "proof-1.tar.gz")  # a name the product never writes
    (tmp_path / "proof-3.tar.gz").symlink_to(first)  # a link is never a pack
    _verification(tmp_path, "2024-01-01T00:00:00Z")
    _verification(tmp_path / "run-2", "2024-02-01T00:00:00Z")
    ev = EvidenceFolder(tmp_path)
    assert ev.packs == (first, second) and ev.newest == second and ev.history == (first,)
    assert ev.verification == {"verified_at": "2024-02-01T00:00:00Z"}  # the current run's: run-2/
    assert ev.verification_of(first) == {"verified_at": "2024-01-01T00:00:00Z"}
    assert ev.verification_of(second) == ev.verification


def test_a_verification_that_is_not_a_json_object_reads_as_none(tmp_path: Path) -> None:
    _write(tmp_path / "verification.json", b"[1, 2]")
    assert EvidenceFolder(tmp_path).verification is None
    _write(tmp_path / "verification.json", b"{broken")
    assert EvidenceFolder(tmp_path).verification is None


def test_each_pack_has_its_own_statements_and_followup_and_links_are_left_out(tmp_path: Path) -> None:
    first, second = _write(tmp_path / "proof.tar.gz"), _write(tmp_path / "proof-2.tar.gz")
    mine = [_write(tmp_path / f"reverify-{n}.intoto.json") for n in (2, 1, 10)]
    later = _write(tmp_path / "proof-2.reverify-1.intoto.json")
    (tmp_path / "reverify-11.intoto.json").symlink_to(tmp_path / "elsewhere.json")
    _write(tmp_path / "elsewhere.json")
    followup = _write(tmp_path / "backups-followup.intoto.json")
    (tmp_path / "proof-2.backups-followup.intoto.json").symlink_to(followup)
    ev = EvidenceFolder(tmp_path)
    assert ev.statements(first) == [mine[1], mine[0], mine[2]]  # in chain order: 1, 2, 10
    assert ev.statements() == ev.statements(second) == [later]
    assert ev.followup(first) == followup and ev.followup(second) is None
