"""`erasure request run --json` and the pack agree on all clear, in every exit path (issue 35): the
JSON's `all_clear` is true only when the pack it wrote says `erased`, and its `pack_status` is the
status the pack's signed statement states (read here from the tarball itself, not through our code)."""

from __future__ import annotations

import base64
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from erasure.config import Home
from erasure.exception_kinds import KINDS
from tests.cascade_fixtures import SUBJECT, build_store, submit
from tests.cli_fixtures import erasure
from wire.format import ENGINE_ENVELOPE

RID = "req-ann-1"


@pytest.fixture
def ready(home: Home, tmp_path: Path, prefect_harness: None) -> Home:
    from proof.keys import generate_keypair

    build_store(home, tmp_path)
    submit(home)
    generate_keypair("engine", home.keys_dir)
    return home


def pack_status(h: Home) -> str | None:
    """The status in the pack's engine-signed statement (None: no pack)."""
    path = h.evidence_dir(RID) / "proof.tar.gz"
    if not path.exists():
        return None
    with tarfile.open(path) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(ENGINE_ENVELOPE))
        f = tar.extractfile(member)
        assert f is not None
        envelope = json.loads(f.read())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    return str(statement["predicate"]["status"])


def run_json(h: Home) -> tuple[int, dict[str, Any] | None]:
    res = erasure("request", "run", RID, "--home", str(h.root), "--json")
    try:
        return res.code, json.loads(res.out)
    except ValueError:
        return res.code, None


def agree(h: Home, doc: dict[str, Any] | None) -> None:
    status = pack_status(h)
    if doc is None:  # refused before a run: nothing printed claims all clear
        assert status is None
        return
    assert doc["pack_status"] == status
    assert doc["all_clear"] is (status == "erased"), (doc["all_clear"], status)


def test_exit_0_with_exceptions_is_not_all_clear(ready: Home) -> None:
    code, doc = run_json(ready)
    assert code == 0 and doc is not None
    agree(ready, doc)
    assert doc["pack_status"] == "erasedWithExceptions" and doc["all_clear"] is False
    assert doc["probes_all_clear"] is True  # the probes found nothing; the exception is the model
    (exc,) = [e for e in doc["exceptions"] if e["kind"] == "model_trained_on_subject"]
    assert exc["meaning"] == KINDS["model_trained_on_subject"].meaning


def test_exit_7_residue(ready: Home) -> None:
    leak = ready.store_dir / "exports" / "crm-dump.txt"
    leak.parent.mkdir(parents=True, exist_ok=True)
    leak.write_text(f"contact: {SUBJECT.email}\n")
    code, doc = run_json(ready)
    assert code == 7 and doc is not None
    agree(ready, doc)
    assert doc["pack_status"] == "notErased" and doc["all_clear"] is False


def test_exit_6_held(ready: Home) -> None:
    from memory import holds
    from memory.schema import open_store

    store = open_store(ready.store_dir)
    holds.place(store, SUBJECT.id, "litigation: case 2026-201", "legal-team")
    store.close()
    code, doc = run_json(ready)
    assert code == 6 and doc is not None
    agree(ready, doc)
    assert doc["all_clear"] is False and doc["pack_status"] is None


def test_exit_4_no_such_request(ready: Home) -> None:
    res = erasure("request", "run", "req-nobody", "--home", str(ready.root), "--json")
    assert res.code == 4 and '"all_clear": true' not in res.out


def test_exit_3_no_engine_key(ready: Home) -> None:
    (ready.keys_dir / "engine.pem").unlink()
    code, doc = run_json(ready)
    assert code == 3
    agree(ready, doc)


def test_exit_2_bad_input(ready: Home) -> None:
    res = erasure("request", "run", "--all", RID, "--home", str(ready.root), "--json")
    assert res.code == 2 and '"all_clear": true' not in res.out
    assert pack_status(ready) is None


def test_exit_8_store_problem(ready: Home) -> None:
    """The store's database is damaged: the run stops with a store problem and claims nothing."""
    db = ready.store_dir / "memory.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4080)
    for side in ("memory.db-wal", "memory.db-shm"):
        (ready.store_dir / side).unlink(missing_ok=True)
    code, doc = run_json(ready)
    assert code == 8, (code, doc)
    agree(ready, doc)
    assert doc is None or doc["all_clear"] is False


def test_exit_1_erased_but_no_pack_a_retired_engine_key_signs_nothing(ready: Home) -> None:
    """A copy of the engine key kept after a rotation: the subject is erased and verified, but the pack
    writer refuses the retired key, so the run fails (exit 1, `NoPack`) and nothing printed claims all
    clear."""
    import shutil

    kept = ready.root / "kept-engine.pem"
    shutil.copyfile(ready.keys_dir / "engine.pem", kept)
    assert erasure("keys", "rotate", "--role", "engine", "--home", str(ready.root)).code == 0
    shutil.copyfile(kept, ready.keys_dir / "engine.pem")
    code, doc = run_json(ready)
    assert code == 1 and doc is not None and doc["flow_state"] == "NoPack", (code, doc)
    agree(ready, doc)
    assert pack_status(ready) is None and doc["all_clear"] is False
