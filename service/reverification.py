"""Re-verification: a sealed request is probed again later (every N days, and on demand), and the
engine signs a statement of what the probes saw beside the pack (`proof.reverification`); the pack
and its evidence are never rewritten.

What it probes with: after an erasure the sealed fingerprint is destroyed (its content needles held
the subject's text), so a re-verification takes a fresh fingerprint from the identifiers in the
request vault, as a verification without a sealed fingerprint does. It needs the vault: once the
vault no longer holds the request's subject, nothing can be probed, and the re-verification says so
(`VaultEmpty`) and writes nothing. A fingerprint taken now has no bystander baseline from before the
erasure, so a re-verification judges residue only.

If the subject is back (a sync job, a restore, an agent that kept an old client), the statement says
where and the request is `reopened`, with a `residue` exception per tier: a rerun of the erasure takes
it up (`erasure request run ID`). The scan manifest of the pack's `verification.json` is compared
with this scan's: the statement lists the files added, removed and modified since (keyed path hashes).
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import NotFound, RequestBlocked
from erasure.ledger import ledger_key
from erasure.request_ids import checked_request_id
from erasure.states import RequestState
from erasure.subject import Subject
from probes import manifest
from proof import verify
from proof.evidence_folder import EvidenceFolder
from proof.history import current_pack, run_of, statement_prefix
from proof.keys import load_private_key, public_key_pem
from proof.reverification import statement_files, write_reverification
from service.locks import request_lock, store_lock
from service.verification import duty_records, probe_store_subjects, take_all

REVERIFIABLE = frozenset({RequestState.sealed, RequestState.notified})
"""A request is re-verified once its pack is sealed (and after the requester was told)."""
DEFAULT_DAYS = 30
REOPENED_EVENT = "request.reopened"
REVERIFIED_EVENT = "request.reverified"


class VaultEmpty(NotFound):
    """The request vault no longer holds the request's subject: there is nothing to probe with."""


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_reverifiable(engine: Engine, h: Home, request_id: str) -> Subject:
    """The request's subject (from the vault, in memory only) when the request can be re-verified: it
    exists, is sealed (or notified), has its pack, and the vault still holds its subject. Raises
    `NotFound`, `RequestBlocked` or `VaultEmpty` with a message that says which."""
    checked_request_id(request_id)
    with engine.lent() as conn:
        row = request_records.get(conn, request_id)
        if row.state not in REVERIFIABLE:
            raise RequestBlocked(
                f"request {request_id} is {row.state.value!r}: only a sealed request is re-verified"
                " (after the DPO attested its pack)"
            )
        if not current_pack(h.evidence_dir(request_id)).is_file():
            raise NotFound(f"request {request_id} has no proof pack in its evidence folder: nothing to re-verify")
        try:
            return request_records.load_envelope(conn, request_id).subject
        except NotFound as exc:
            raise VaultEmpty(
                f"request {request_id} cannot be re-verified: the request vault no longer holds its subject"
                " (its retention ended), so there is nothing to probe with; its pack and earlier"
                " re-verifications stand as they are"
            ) from exc


def _pack_facts(h: Home, request_id: str) -> tuple[str, dict[str, Any]]:
    """The pack's name (checked against the engine's key: this is our pack, whole) and the
    `verification.json` it holds."""
    pub = public_key_pem(load_private_key(h.keys_dir / "engine.pem").public_key())
    pack = current_pack(h.evidence_dir(request_id))
    try:
        result = verify.verify_pack(pack, pub, None, require_dpo=False)
        _top, files = verify.extract(verify.read_pack(pack))
    except verify.PackError as exc:
        raise RequestBlocked(f"request {request_id}: its pack does not verify ({exc.check}: {exc})") from exc
    if result.request_id != request_id:
        raise RequestBlocked(f"the pack in request {request_id}'s evidence folder is another request's")
    doc = json.loads(files["verification.json"])
    return result.pack_name, doc if isinstance(doc, dict) else {}


MAX_LISTED = 1000
"""Labels listed per kind of change in a statement (the counts are always whole): a statement stays
small (the verifier reads at most 1 MiB of one), and this scan's whole manifest is kept beside it."""


def _changes(h: Home, before_doc: dict[str, Any], now: list[manifest.ManifestEntry]) -> dict[str, Any]:
    """Which files changed since the pack's scan manifest (labels under the same key)."""
    named = before_doc.get("scan_manifest")
    before = manifest.from_json(named, run_of(current_pack(h.evidence_dir(str(before_doc.get("request_id"))))))
    if before is None:
        why = (
            "the pack's verification.json has no scan manifest"
            if not isinstance(named, dict)
            else f"the manifest file the pack names ({manifest.FILE}, by its sha256) is gone or changed"
        )
        return {"compared": False, "reason": why}
    changes = manifest.diff(before, now)
    out: dict[str, Any] = {"compared": True, "since": before_doc.get("verified_at"), "unchanged": changes.unchanged}
    for kind in ("added", "removed", "modified"):
        labels: list[str] = getattr(changes, kind)
        out[kind] = labels[:MAX_LISTED]
        out[f"{kind}_count"] = len(labels)
    return out


def reverify_request(engine: Engine, h: Home, request_id: str, *, now: datetime | None = None) -> dict[str, Any]:
    """Probe a sealed request's subject again, sign `reverify-<n>.intoto.json` beside its pack, and
    reopen the request if anything of the subject is found. Returns the statement's predicate with
    `statement` (its file name) and `reopened` (ids, counts, tier names and keyed hashes only)."""
    with request_lock(h, request_id):  # one run of a request at a time: an erasure, or this (`Conflict`)
        return _reverify(engine, h, request_id, now)


def _reverify(engine: Engine, h: Home, request_id: str, now: datetime | None) -> dict[str, Any]:
    subject = check_reverifiable(engine, h, request_id)
    pack_name, pack_verification = _pack_facts(h, request_id)
    with store_lock(h):  # no erasure moves the store while its probes read it
        probed = probe_store_subjects(engine, h, [(subject, take_all(engine, h, subject))])
    result = probed.finish()[0]  # the processors asked with the store released (issue 34)
    if not result.probes:  # zero probes is never all clear, nor a finding: nothing was re-verified
        raise RequestBlocked(f"request {request_id}: no probe could run (no store or target in this home)")
    at = now or datetime.now(UTC)
    residue: dict[str, int] = {}
    for p in result.probes:
        residue[p.tier] = residue.get(p.tier, 0) + p.residue
    residue_tiers = result.residue_tiers()
    scanned = manifest.to_json(manifest.entries(ledger_key(h), result.scanned))
    scanned_bytes = manifest.document_bytes(scanned)
    predicate = {
        "request_id": request_id,
        "pack_name": pack_name,
        "reverified_at": _iso(at),
        "all_clear": not residue_tiers,
        "residue": residue,
        "residue_tiers": residue_tiers,
        "residue_methods": sorted({f"{p.tier}/{p.method}" for p in result.probes if p.residue > 0}),
        "probes": len(result.probes),
        "unscanned_content": len(result.unscanned),
        "duty_records": duty_records(engine, h),
        "fingerprint": "taken at re-verification from the request vault's identifiers (no bystander baseline)",
        "changed_files": _changes(h, pack_verification, manifest.from_json(scanned) or []),
        "scan_manifest": {
            "format": manifest.FORMAT,
            "file_count": scanned["file_count"],
            "bytes": scanned["bytes"],
            "sha256": hashlib.sha256(scanned_bytes).hexdigest(),
        },
    }
    prefix = _prefix(h, request_id)
    path = write_reverification(
        h.evidence_dir(request_id), h.keys_dir / "engine.pem", predicate, subject.identifiers(), prefix
    )
    n = int(path.name.removeprefix(prefix).split("-")[1].split(".")[0])
    # This scan's whole manifest, named by the signed statement's digest: what the next comparison needs.
    (path.parent / f"{prefix}reverify-{n}.{manifest.FILE}").write_bytes(scanned_bytes)
    with engine.lent() as conn:
        if predicate["all_clear"]:
            request_records.log_event(conn, request_id, REVERIFIED_EVENT, {"sequence": n, "all_clear": True}, now=at)
        else:
            for tier in residue_tiers:
                request_records.open_exception(
                    conn, request_id, tier, "residue", f"reverification-{n}", {"probe": "reverification"}, now=at
                )
            request_records.set_state(
                conn,
                request_id,
                RequestState.reopened,
                f"re-verification {n}: residue in {', '.join(residue_tiers)}",
                now=at,
            )
            request_records.log_event(conn, request_id, REOPENED_EVENT, {"sequence": n, "tiers": residue_tiers}, now=at)
    return {**predicate, "sequence": n, "statement": path.name, "reopened": not predicate["all_clear"]}


def last_checked(h: Home, request_id: str) -> datetime | None:
    """When the request was last verified or re-verified (the pack's verification, or the newest
    statement beside it); None when neither can be read."""
    times: list[str] = []
    ev = EvidenceFolder.of(h, request_id)
    if (doc := ev.verification_of(ev.newest)) is not None and "verified_at" in doc:
        times.append(str(doc["verified_at"]))
    for p in ev.statements():
        try:
            env = json.loads(p.read_bytes())
            times.append(str(json.loads(base64.b64decode(env["payload"]))["predicate"]["reverified_at"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    parsed = [_parse(t) for t in times]
    known = [t for t in parsed if t is not None]
    return max(known) if known else None


def _parse(text: str) -> datetime | None:
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def due_requests(engine: Engine, h: Home, days: int = DEFAULT_DAYS, *, now: datetime | None = None) -> list[str]:
    """Sealed (or notified) requests last verified `days` or more days ago, oldest first."""
    at = now or datetime.now(UTC)
    with engine.lent() as conn:
        rows = request_records.list_requests(conn, sorted(REVERIFIABLE))
    due: list[tuple[datetime, str]] = []
    for row in rows:
        last = last_checked(h, row.request_id)
        if last is None or at - last >= timedelta(days=days):
            due.append((last or datetime.min.replace(tzinfo=UTC), row.request_id))
    return [rid for _t, rid in sorted(due)]


def statements_of(h: Home, request_id: str) -> list[Path]:
    """The re-verification statements of the request's current pack, in order."""
    return [p for _n, p in statement_files(h.evidence_dir(request_id), _prefix(h, request_id))]


def _prefix(h: Home, request_id: str) -> str:
    """The prefix of the current pack's statements (`proof.history`: each pack has its own chain)."""
    return statement_prefix(current_pack(h.evidence_dir(request_id)))
