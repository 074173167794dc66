"""`make demo`'s steps on the embedded default store (`cli.demo` prints them): a fresh demo store with
three local subprocessors on 127.0.0.1, the engine's and the DPO's keys, one GDPR request for a demo
subject, and the audit key the regulator pins. Rerunnable: the demo's store, engine and evidence are
rebuilt each time."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.models import ErasureRequestEnvelope
from erasure.subject import Subject
from memory.audit import checkpoint_public_pem
from memory.demo import DemoResult, build_demo, write_subjects_file
from memory.schema import create
from memory.subprocessor_service import RunningService, start_demo_processors
from memory.subprocessors import register_demo
from proof.keys import generate_keypair

FRAMES = 5000
SUBJECTS = 3
SEED = 7
REQUEST_ID = "req-demo-0001"


def reset(h: Home) -> None:
    """Remove the demo's store, engine, subprocessors and evidence, then recreate the home's folders."""
    for d in (h.store_dir, h.engine_dir, h.services_dir, h.evidence_dir(REQUEST_ID)):
        shutil.rmtree(d, ignore_errors=True)
    h.ensure()


def start_processors(h: Home) -> list[RunningService]:
    """The demo's three subprocessors on 127.0.0.1 (the caller stops them)."""
    return start_demo_processors(h.services_dir)


def build_store(
    h: Home, services: list[RunningService], on_progress: Callable[[int, int], None] | None = None
) -> DemoResult:
    """A new demo store of `FRAMES` frames for `SUBJECTS` subjects (seed `SEED`), the running
    subprocessors registered in it, and demo-subjects.json written beside it."""
    conn = create(h.store_dir)
    try:
        register_demo(conn, services)
        result = build_demo(conn, h.store_dir, frames=FRAMES, subjects=SUBJECTS, seed=SEED, on_progress=on_progress)
    finally:
        conn.close()
    write_subjects_file(h.root / "demo-subjects.json", result.subjects, seed=SEED, tenant="default")
    return result


def make_keys(h: Home) -> Path:
    """The engine's and the DPO's keys in the home's keys folder (kept when present); the folder."""
    for role in ("engine", "dpo"):
        if not (h.keys_dir / f"{role}.pem").exists():
            generate_keypair(role, h.keys_dir)
    return h.keys_dir


def submit(engine: Engine, subject: Subject) -> request_records.SubmitResult:
    """The demo's GDPR request for `subject`, received three days ago; its deadlines."""
    env = ErasureRequestEnvelope.model_validate(
        {
            "request_id": REQUEST_ID,
            "tenant_id": "default",
            "subject": subject.model_dump(exclude_none=True),
            "legal_basis": "GDPR",
            "received_at": (datetime.now(UTC) - timedelta(days=3)).isoformat(),
            "requester_identity_proof_ref": "idv/demo-0001",
            "reason": "Art.17 request via the privacy portal",
        }
    )
    with engine.lent() as conn:
        return request_records.submit(conn, env, now=datetime.now(UTC))


def pin_audit_key(h: Home) -> Path:
    """Write the store's audit checkpoint public key where `erasure keys audit --out` would: the key the
    regulator pins (keys/audit.pub.pem)."""
    audit_pub = h.keys_dir / "audit.pub.pem"
    audit_pub.write_bytes(checkpoint_public_pem(h.store_dir))
    return audit_pub
