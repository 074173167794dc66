"""Issue 23 item 6: one request-id limit everywhere, and a run that erases but cannot write its pack
never exits 0.

Seen: `request submit` took ids of up to 128 characters, the pack writer, the verifier and `export`
only 64. A 100-character request was erased, the flow ended "awaiting DPO attestation" (exit 0) and
no `proof.tar.gz` was written; only a log warning said so. These tests run the real `erasure` entry
point on a real store and a real Prefect test server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wire.format
from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.request_ids import is_safe_token
from proof.evidence import REQUEST_ID
from tests.cascade_fixtures import SUBJECT, build_store, owned_counts
from tests.cli_fixtures import erasure

LONG_ID = "req-" + "x" * 92 + "-100"
assert len(LONG_ID) == 100
LONGEST_ID = "r" + "9" * 127

ALLOWED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def oracle_is_request_id(value: str) -> bool:
    """The README's rule, written out by hand: 1-128 characters of A-Z a-z 0-9 . _ -, the first a
    letter or digit."""
    return 1 <= len(value) <= 128 and value[0] not in "._-" and all(c in ALLOWED for c in value)


def _state(h: Home, rid: str) -> str:
    engine = open_engine(h.engine_db)
    try:
        return request_records.get(engine, rid).state.value
    finally:
        engine.close()


def _envelope(tmp: Path, rid: str) -> Path:
    path = tmp / f"{rid[:20]}.json"
    path.write_text(
        json.dumps(
            {
                "request_id": rid,
                "tenant_id": "default",
                "subject": SUBJECT.model_dump(exclude_none=True),
                "legal_basis": "GDPR",
                "received_at": (datetime.now(UTC) - timedelta(days=2)).isoformat(),
                "requester_identity_proof_ref": "idv-case-77",
                "reason": "data subject request via privacy portal",
            }
        )
    )
    return path


@pytest.fixture
def store(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_harness: None) -> Home:
    from proof.keys import generate_keypair

    build_store(home, tmp_path)
    generate_keypair("engine", home.keys_dir)
    return home


@pytest.mark.parametrize("rid", [LONG_ID, LONGEST_ID], ids=["100 chars", "128 chars"])
def test_a_long_request_id_is_erased_with_a_pack_that_verifies(store: Home, tmp_path: Path, rid: str) -> None:
    h = str(store.root)
    sub = erasure("request", "submit", str(_envelope(tmp_path, rid)), "--home", h)
    assert sub.code == 0, sub
    res = erasure("request", "run", rid, "--home", h, "--json")
    assert all(v == 0 for v in owned_counts(store, SUBJECT).values())  # it did erase
    pack = store.evidence_dir(rid) / "proof.tar.gz"
    assert pack.is_file(), f"erased without a pack; exit {res.code}: {res.out[-400:]}"
    assert res.code == 0, res
    assert _state(store, rid) == "awaiting attestation"
    audit_pub = tmp_path / "audit.pub.pem"
    assert erasure("keys", "audit", "--out", str(audit_pub), "--home", h).code == 0
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.verify",
            str(pack),
            "--engine-key",
            str(store.keys_dir / "engine.pub.pem"),
            "--no-dpo",
            "--audit-key",
            str(audit_pub),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and out.stdout.split(":")[0].strip() == "OK", out.stdout + out.stderr


def test_a_run_that_erases_and_cannot_write_its_pack_does_not_exit_0(store: Home, tmp_path: Path) -> None:
    """The pack writer cannot write the request's evidence (its request.json is a folder in the way):
    the run erased, so it must not end 0 nor `awaiting attestation`."""
    h = str(store.root)
    rid = "req-nopack-1"
    assert erasure("request", "submit", str(_envelope(tmp_path, rid)), "--home", h).code == 0
    ev = store.evidence_dir(rid)
    ev.mkdir(parents=True, exist_ok=True)
    (ev / "request.json").mkdir()  # the pack writer cannot write its request.json
    res = erasure("request", "run", rid, "--home", h, "--json")
    assert all(v == 0 for v in owned_counts(store, SUBJECT).values())  # it did erase
    assert not (ev / "proof.tar.gz").exists()
    assert res.code != 0, res
    assert _state(store, rid) == "exception"


def test_one_limit_submit_writer_verifier_and_export_agree() -> None:
    from erasure.request_ids import REQUEST_ID_MAX_CHARS

    assert REQUEST_ID_MAX_CHARS == 128
    assert REQUEST_ID.pattern == wire.format.REQUEST_ID.pattern
    assert REQUEST_ID.fullmatch(LONGEST_ID) and not REQUEST_ID.fullmatch(LONGEST_ID + "9")
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "1-64" not in readme and not re.search(r"\b64 (characters|chars)\b", readme)


@given(
    st.one_of(
        st.text(alphabet="".join(sorted(ALLOWED)) + "/ é\x00", min_size=0, max_size=140),
        st.integers(120, 135).map(lambda n: "a" * n),
    )
)
def test_every_layer_accepts_exactly_the_ids_of_the_rule(value: str) -> None:
    want = oracle_is_request_id(value)
    assert is_safe_token(value) is want
    assert (REQUEST_ID.fullmatch(value) is not None) is want
    assert (wire.format.REQUEST_ID.fullmatch(value) is not None) is want
