"""The proof writer: gathers the request's evidence files (identifiers only as salted commitments) and
has `proof.pack.write_pack` sign the pack with the engine key."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from proof.history import next_target, run_of
from proof.pack import write_pack
from service.scope import scope_of


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def write_evidence(engine: Engine, h: Home, request_id: str) -> Path:
    """Write request.json and subprocessor-receipts.jsonl beside the steps and probe results, in the
    folder of the run whose pack comes next (`proof.history.run_of`); returns that folder."""
    with engine.lent() as conn:
        row = request_records.get(conn, request_id)
        env = request_records.load_envelope(conn, request_id)
        salt = request_records.subject_salt(conn, request_id)
        subject = env.subject
        commitments = {
            k: request_records.commit_identifier(salt, v)
            for k, v in (("id", subject.id), ("email", subject.email), ("name", subject.name), ("phone", subject.phone))
            if v
        }
        doc = {
            "request_id": row.request_id,
            "tenant_id": row.tenant_id,
            "legal_basis": row.legal_basis.value,
            "received_at": row.received_at.isoformat().replace("+00:00", "Z"),
            "deadline": row.deadline.isoformat().replace("+00:00", "Z"),
            "data_classes": [t.value for t in row.data_classes],
            "subject_commitments": commitments,
            "commitment_rule": "sha256(salt || utf8(value)) hex; the salt stays in the request vault",
            "reason_digest": hashlib.sha256(env.reason.encode()).hexdigest(),
            "requester_identity_proof_digest": hashlib.sha256(env.requester_identity_proof_ref.encode()).hexdigest(),
        }
        out = run_of(next_target(h.evidence_dir(request_id))[0])
        out.mkdir(parents=True, exist_ok=True)
        if not scope_of(h).reference:
            # No reference store among the targets: no audit log of ours to redact, and the pack says so.
            (out / "audit-log-redaction.json").write_text(
                json.dumps(
                    {
                        "format": "audit-log-redaction/none/v1",
                        "request_id": row.request_id,
                        "reason": "the targets include no reference store: there is no audit log of ours to redact",
                    },
                    sort_keys=True,
                    separators=(",", ":"),
                )
                + "\n"
            )
        (out / "request.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        _jsonl(
            out / "subprocessor-receipts.jsonl",
            [
                {
                    "request_id": request_id,
                    "processor": r.processor,
                    "ticket_id": r.ticket_id,
                    "status": r.status,
                    "requested_at": r.requested_at.isoformat().replace("+00:00", "Z"),
                    "completed_at": None
                    if r.completed_at is None
                    else r.completed_at.isoformat().replace("+00:00", "Z"),
                    "attempts": r.attempts,
                }
                for r in request_records.receipts(conn, request_id)
            ],
        )
        return out


def forbidden_strings(engine: Engine, request_id: str) -> list[str]:
    """The subject's identifiers, in memory only: the pack writer refuses a pack that contains any."""
    with engine.lent() as conn:
        return request_records.load_envelope(conn, request_id).subject.identifiers()


def write_engine_pack(engine: Engine, h: Home, request_id: str) -> dict[str, Any]:
    """Evidence files, then the engine-signed pack. Returns the pack path (no identifiers)."""
    write_evidence(engine, h, request_id)
    pack = write_pack(
        h.evidence_dir(request_id), h.keys_dir / "engine.pem", forbidden=forbidden_strings(engine, request_id)
    )
    return {"request_id": request_id, "pack": str(pack)}
