"""The evidence folder is append-only, its loose files too (issue 34, finding 11). A sealed request is
reopened and run again: every file the first run left in the evidence folder (the pack, and its loose
steps.jsonl, verification.json, request.json, receipts, manifest, signatures...) is still there byte
for byte, after the rerun and after the DPO attests the new pack; the rerun's own files are in
`run-2/` beside `proof-2.tar.gz`, and the verifier verifies both packs."""

from __future__ import annotations

import hashlib
from pathlib import Path

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.states import RequestState
from proof import verify
from proof.keys import generate_keypair
from service import signoff
from service.cascade import run_requests
from service.outcome import Outcome
from service.stages import direct
from tests.cascade_fixtures import build_store, submit

RID = "req-append-1"


def _digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder`, by its path inside it."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _run(home: Home) -> None:
    result = run_requests(home, [RID], direct(home))[RID]
    assert result.outcome is Outcome.all_clear, result


def test_a_reopened_requests_rerun_leaves_every_earlier_evidence_file_byte_identical(
    home: Home, tmp_path: Path
) -> None:
    build_store(home, tmp_path)
    generate_keypair("engine", home.keys_dir)
    dpo = generate_keypair("dpo", tmp_path / "dpo-machine")
    submit(home, RID)
    _run(home)
    signoff.seal(home, RID, dpo.private)
    folder = home.evidence_dir(RID)
    before = _digests(folder)
    assert {"proof.tar.gz", "verification.json", "steps.jsonl", "signatures/dpo.intoto.json"} <= set(before)

    engine = open_engine(home.engine_db)
    try:  # what a re-verification that found the subject again does (tests/service/test_reverify.py)
        request_records.set_state(engine, RID, RequestState.reopened)
    finally:
        engine.close()
    _run(home)
    after_rerun = _digests(folder)
    assert {k: after_rerun.get(k) for k in before} == before  # nothing earlier rewritten or removed
    assert {"proof-2.tar.gz", "run-2/verification.json", "run-2/steps.jsonl"} <= set(after_rerun)
    assert home.run_dir(RID) == folder / "run-2"

    signoff.seal(home, RID, dpo.private)
    after_seal = _digests(folder)
    assert {k: after_seal.get(k) for k in before} == before
    assert "run-2/signatures/dpo.intoto.json" in after_seal

    engine_pub = (home.keys_dir / "engine.pub.pem").read_bytes()
    dpo_pub = dpo.public.read_bytes()
    first = verify.verify_pack(folder / "proof.tar.gz", engine_pub, dpo_pub)
    second = verify.verify_pack(folder / "proof-2.tar.gz", engine_pub, dpo_pub)
    assert second.previous_pack == first.pack_name
