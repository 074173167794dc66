"""One request spanning all four target kinds at once (the reference store, a LangGraph memory, a Chroma
store and a mem0 memory, each built with the real framework) ends all clear with one pack, through the
real CLI (`erasure request run` on a temporary Prefect server), and that pack verifies offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from erasure.config import PROJECT_ROOT, Home
from memory.ingest import ingest
from memory.items import MemoryItem
from memory.schema import create
from tests import chroma_fixtures, langgraph_sqlite_fixtures, mem0_fixtures
from tests.backup_fixtures import verify_offline

SUBJECT = mem0_fixtures.SUBJECT  # one person, with the same id in every store (the key they use)


def _walk_hits(root: Path, needles: list[bytes]) -> list[str]:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes().lower()
            if any(n in data for n in needles):
                out.append(str(p.relative_to(root)))
    return out


@pytest.fixture
def four_targets(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agents = tmp_path / "agents"
    agents.mkdir()
    # The reference store holds two items of the subject and one of a bystander.
    conn = create(home.store_dir)
    items = [
        {
            "source": "chat",
            "source_ref": f"conv-4k-{i}",
            "subject": SUBJECT.model_dump(exclude_none=True),
            "content": f"Please send the kiln rental invoice number {i} to my accountant.",
        }
        for i in range(2)
    ]
    items.append(
        {
            "source": "chat",
            "source_ref": "conv-4k-9",
            "subject": mem0_fixtures.BYSTANDERS[0].model_dump(exclude_none=True),
            "content": "Reschedule the typewriter repair to Monday morning.",
        }
    )
    ingest(conn, home.store_dir, [MemoryItem.model_validate(i) for i in items])
    conn.close()
    # Each framework's memory, for the same person.
    # The LangGraph builder writes the texts it keeps for its own subject: give them to this one.
    topics = {
        **langgraph_sqlite_fixtures._TOPICS,
        SUBJECT.id: langgraph_sqlite_fixtures._TOPICS[langgraph_sqlite_fixtures.SUBJECT.id],
    }
    monkeypatch.setattr(langgraph_sqlite_fixtures, "_TOPICS", topics)
    monkeypatch.setattr(langgraph_sqlite_fixtures, "SUBJECT", SUBJECT)
    monkeypatch.setattr(chroma_fixtures, "SUBJECT", SUBJECT)
    langgraph_sqlite_fixtures.build_memory(
        agents / "langgraph", copies=4, threads_per_person=2, mentions=False, case_variants=False
    )
    chroma_fixtures.build_memory(agents / "chroma")
    # The builder (the agent) must be done with Chroma before the erasure: chromadb keeps each index in
    # memory and persists it when its objects are collected, which would write the subject back over
    # the rewritten index files (Chroma is not process-safe; see README).
    import gc

    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    gc.collect()
    mem0_fixtures.build_memory(agents / "mem0")
    (home.root / "targets.toml").write_text(f'''
[[targets]]
name = "reference"
kind = "reference"

[[targets]]
name = "support-agent"
kind = "langgraph-sqlite"
store = "{agents}/langgraph/store.sqlite"
checkpoints = "{agents}/langgraph/checkpoints.sqlite"
namespace = ["users", "{{subject_id}}"]
thread_key = "user_id"

[[targets]]
name = "kb-vectors"
kind = "chroma"
path = "{agents}/chroma"
subject_key = "user_id"

[[targets]]
name = "assistant-memory"
kind = "mem0"
history_db = "{agents}/mem0/{mem0_fixtures.HISTORY_DB}"
qdrant_path = "{agents}/mem0/{mem0_fixtures.QDRANT_PATH}"
collection = "{mem0_fixtures.COLLECTION}"
''')
    return agents


def _cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
    env.update(
        ERASURE_HOME=str(home.root),
        ERASURE_EVIDENCE=str(home.evidence_root),
        PREFECT_HOME=str(home.prefect_home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=PROJECT_ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=900,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_one_request_across_all_four_kinds_ends_all_clear_with_one_pack(
    home: Home, four_targets: Path, tmp_path: Path
) -> None:
    needles = [s.lower().encode() for s in (SUBJECT.id, SUBJECT.email or "", SUBJECT.name or "")]
    assert _walk_hits(four_targets, needles) and _walk_hits(home.store_dir, needles)

    listed = _cli(home, "targets", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["kind"] for t in json.loads(listed.stdout)["targets"]] == [
        "reference",
        "langgraph-sqlite",
        "chroma",
        "mem0",
    ]
    assert all(t["reachable"] for t in json.loads(listed.stdout)["targets"])

    assert _cli(home, "keys", "generate", "--role", "engine").returncode == 0
    envelope = {
        "request_id": "req-four-0001",
        "tenant_id": "default",
        "subject": SUBJECT.model_dump(exclude_none=True),
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/four",
        "reason": "Art.17 request",
    }
    req = tmp_path / "request.json"
    req.write_text(json.dumps(envelope))
    assert _cli(home, "request", "submit", str(req)).returncode == 0

    checked = _cli(home, "targets", "check", "--request", "req-four-0001", "--json")
    assert checked.returncode == 0, checked.stderr
    counts = json.loads(checked.stdout)["targets"]
    assert all(any(v for v in per_tier.values() if v) for per_tier in counts.values()), counts

    run = _cli(home, "request", "run", "req-four-0001", "--json")
    ver = home.evidence_dir("req-four-0001") / "verification.json"
    failing = [p for p in json.loads(ver.read_text())["probes"] if p["residue"]] if ver.exists() else []
    assert run.returncode == 0, json.dumps(failing) + run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["all_clear"] is True
    assert {p.get("target") for p in out["verification"]} >= {"support-agent", "kb-vectors", "assistant-memory"}

    assert _walk_hits(four_targets, needles) == []
    assert _walk_hits(home.store_dir, needles) == []
    steps = [json.loads(line) for line in (home.evidence_dir("req-four-0001") / "steps.jsonl").read_text().splitlines()]
    assert {s.get("target") for s in steps} == {None, "support-agent", "kb-vectors", "assistant-memory"}
    pack = home.evidence_dir("req-four-0001") / "proof.tar.gz"
    from memory.audit import checkpoint_public_pem

    audit_pub = tmp_path / "audit.pub.pem"
    audit_pub.write_bytes(checkpoint_public_pem(home.store_dir))
    verified = verify_offline(str(pack), home, audit_pub)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_home_with_no_reference_store_gets_a_pack_that_verifies(home: Home, tmp_path: Path) -> None:
    """targets.toml alone (no reference store): the request runs, and its pack says there is no audit
    log of ours (audit-log-redaction/none/v1) and verifies offline."""
    import shutil

    shutil.rmtree(home.store_dir)
    mem = langgraph_sqlite_fixtures.build_memory(
        tmp_path / "lg", copies=3, threads_per_person=1, mentions=False, case_variants=False
    )
    subject = langgraph_sqlite_fixtures.SUBJECT
    (home.root / "targets.toml").write_text(f'''tenant = "acme"
[[targets]]
name = "support-agent"
kind = "langgraph-sqlite"
store = "{mem.store_path}"
checkpoints = "{mem.checkpoints_path}"
namespace = ["users", "{{subject_id}}"]
thread_key = "user_id"
''')
    assert _cli(home, "keys", "generate", "--role", "engine").returncode == 0
    envelope = {
        "request_id": "req-lg-only-1",
        "tenant_id": "acme",
        "subject": subject.model_dump(exclude_none=True),
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/lg",
        "reason": "Art.17 request",
    }
    req = tmp_path / "request.json"
    req.write_text(json.dumps(envelope))
    assert _cli(home, "request", "submit", str(req)).returncode == 0
    run = _cli(home, "request", "run", "req-lg-only-1", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout)["all_clear"] is True
    audit = json.loads((home.evidence_dir("req-lg-only-1") / "audit-log-redaction.json").read_text())
    assert audit["format"] == "audit-log-redaction/none/v1"
    pack = home.evidence_dir("req-lg-only-1") / "proof.tar.gz"
    verified = verify_offline(str(pack), home)
    assert verified.returncode == 0, verified.stdout + verified.stderr
