"""A backups follow-up statement is made once per pack and never written over (issue 34, evidence is
append-only): a reopened request's second pack gets `proof-2.backups-followup.intoto.json` beside the
first pack's, which stays byte for byte; the verifier checks each beside its own pack, also under the
names an export gives them."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from proof.backups_followup import write_followup
from proof.pack import write_pack
from proof.verify.backups import FollowupError, check_beside
from tests.proof_fixtures import make_evidence, make_keys
from wire.format import followup_name

BACKUPS = [{"ref": "nightly/memory-0301.db", "expires_at": "2026-04-01T02:00:00Z", "ended": "expired"}]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_the_second_packs_followup_leaves_the_first_packs_as_it_was(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", "ed25519")
    first = write_pack(make_evidence(tmp_path / "one"), keys.engine)
    second = write_pack(make_evidence(tmp_path / "two", n_audit=21), keys.engine)
    folder = tmp_path / "evidence"
    folder.mkdir()
    shutil.copyfile(first, folder / "proof.tar.gz")

    made = write_followup(folder, keys.engine, "req-0001", BACKUPS, "2026-04-02T00:00:00Z")
    assert made.name == "backups-followup.intoto.json"
    was = _sha(made)

    shutil.copyfile(second, folder / "proof-2.tar.gz")  # the rerun of the reopened request
    again = write_followup(folder, keys.engine, "req-0001", BACKUPS, "2026-05-02T00:00:00Z")

    assert again.name == "proof-2.backups-followup.intoto.json"
    assert _sha(made) == was  # the first pack's statement, as a regulator may already hold it
    assert check_beside(folder / "proof.tar.gz", keys.engine_pem) is not None
    assert check_beside(folder / "proof-2.tar.gz", keys.engine_pem) is not None
    later = _sha(again)
    write_followup(folder, keys.engine, "req-0001", BACKUPS, "2026-06-02T00:00:00Z")
    assert _sha(again) == later  # made once


def test_a_followup_checks_only_beside_its_own_pack(tmp_path: Path) -> None:
    """Put beside another pack (renamed to that pack's name), a follow-up names the wrong digest."""
    keys = make_keys(tmp_path / "keys", "ed25519")
    folder = tmp_path / "evidence"
    folder.mkdir()
    shutil.copyfile(write_pack(make_evidence(tmp_path / "one"), keys.engine), folder / "proof.tar.gz")
    made = write_followup(folder, keys.engine, "req-0001", BACKUPS, "2026-04-02T00:00:00Z")
    shutil.copyfile(write_pack(make_evidence(tmp_path / "two", n_audit=21), keys.engine), folder / "proof-2.tar.gz")
    shutil.copyfile(made, folder / followup_name("proof-2.tar.gz"))

    with pytest.raises(FollowupError, match="its subject is not this pack"):
        check_beside(folder / "proof-2.tar.gz", keys.engine_pem)


@pytest.mark.parametrize("exported", ["req-0001-proof.tar.gz", "req-0001-proof-2.tar.gz"])
def test_under_an_exports_names_the_followup_still_checks(tmp_path: Path, exported: str) -> None:
    keys = make_keys(tmp_path / "keys", "ed25519")
    folder = tmp_path / "evidence"
    folder.mkdir()
    own = exported.removeprefix("req-0001-")
    shutil.copyfile(write_pack(make_evidence(tmp_path / "one"), keys.engine), folder / own)
    made = write_followup(folder, keys.engine, "req-0001", BACKUPS, "2026-04-02T00:00:00Z")
    out = tmp_path / "export"
    out.mkdir()
    shutil.copyfile(folder / own, out / exported)
    shutil.copyfile(made, out / followup_name(exported))

    assert check_beside(out / exported, keys.engine_pem) is not None
