"""`erasure request run --json` states the verdict of the request's newest pack: after a reopened
request's rerun wrote `proof-2.tar.gz`, the first pack no longer speaks for the request."""

from __future__ import annotations

import shutil
from pathlib import Path

from erasure.config import Home
from proof.pack import write_pack
from proof.review import summary
from service.pack_files import pack_verdict
from tests.proof_fixtures import make_evidence, make_keys

RID = "req-verdict-1"


def test_the_verdict_is_the_newest_packs_not_the_first(home: Home, tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", "ed25519")
    genuine = write_pack(make_evidence(tmp_path / "ev"), keys.engine)
    folder = home.evidence_dir(RID)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "proof.tar.gz").write_bytes(b"not a pack: the first run's, damaged")
    shutil.copyfile(genuine, folder / "proof-2.tar.gz")

    got = pack_verdict(home, RID)

    assert got is not None
    assert got["status"] == summary(folder / "proof-2.tar.gz")["status"], got


def test_a_damaged_newest_pack_is_never_all_clear(home: Home, tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", "ed25519")
    genuine = write_pack(make_evidence(tmp_path / "ev"), keys.engine)
    folder = home.evidence_dir(RID)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(genuine, folder / "proof.tar.gz")
    (folder / "proof-2.tar.gz").write_bytes(b"\x1f\x8b damaged")

    got = pack_verdict(home, RID)

    assert got is not None and got["all_clear"] is False and got["status"].startswith("unreadable"), got
