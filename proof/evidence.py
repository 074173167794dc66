"""Reading the evidence the flows write into `evidence/erasure/<request_id>/`, and scanning a pack
for plaintext identifiers before it is signed."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from erasure.request_ids import REQUEST_ID_MAX_CHARS, SAFE_TOKEN
from proof.errors import EvidenceInvalid, IdentifierInPack
from wire.format import RECEIPT_STATUSES, TIERS, step_order

EVIDENCE_ROLES: dict[str, str] = {
    "request.json": "request",
    "steps.jsonl": "steps",
    "verification.json": "verification",
    "subprocessor-receipts.jsonl": "subprocessor-receipts",
    "audit-log-redaction.json": "audit-log-redaction",
}
"""The files the flows write, each with its role in the manifest. All five are required."""

REQUEST_ID = SAFE_TOKEN
"""A request id (`erasure.request_ids.SAFE_TOKEN`, the one rule `request submit` applies): a directory name
inside a USTAR archive (its 155-byte prefix field holds the top directory and `signatures`)."""


@dataclass(frozen=True)
class Evidence:
    """The raw bytes of the five evidence files and the parsed records the pack is derived from."""

    files: dict[str, bytes]
    request: dict[str, Any]
    steps: list[dict[str, Any]]
    verification: dict[str, Any]

    @property
    def request_id(self) -> str:
        return str(self.request["request_id"])


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise EvidenceInvalid(f"{what} is not a JSON object")
    return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(name: str, data: bytes) -> Any:
    """JSON without NaN or Infinity: the statement is signed as canonical JSON, which has neither."""
    try:
        text = data.decode("utf-8")
        if name.endswith(".jsonl"):
            return [json.loads(line, parse_constant=_not_json) for line in text.splitlines() if line.strip()]
        return json.loads(text, parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError) as exc:
        raise EvidenceInvalid(f"evidence file {name} is not valid UTF-8 JSON") from exc


def _count_ok(v: Any, nullable: bool) -> bool:
    return (v is None and nullable) or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)


def _check_records(
    request: dict[str, Any], steps: list[dict[str, Any]], verification: dict[str, Any], receipts: list[dict[str, Any]]
) -> None:
    rid = request.get("request_id")
    if not isinstance(rid, str) or not REQUEST_ID.fullmatch(rid):
        raise EvidenceInvalid(f"request.json has no valid request_id (1-{REQUEST_ID_MAX_CHARS} of A-Z a-z 0-9 . _ -)")
    for field in ("legal_basis", "received_at"):
        if not isinstance(request.get(field), str):
            raise EvidenceInvalid(f"request.json has no {field}")
    order: tuple[int, str, int] | None = None
    for rec in steps:
        if rec.get("request_id") != rid:
            raise EvidenceInvalid("steps.jsonl holds a record of another request")
        if rec.get("step") not in TIERS or not isinstance(rec.get("status"), str):
            raise EvidenceInvalid("steps.jsonl holds a record without a known step or a status")
        target = rec.get("target")
        if target is not None and (not isinstance(target, str) or not target):
            raise EvidenceInvalid("steps.jsonl holds a record whose target is not a name")
        here = step_order(rec)
        if order is not None and here <= order:
            raise EvidenceInvalid(
                f"steps.jsonl repeats step {rec['step']} or lists it out of order (the reference"
                " store's records, then each target's by name, tiers in cascade order)"
            )
        order = here
        if not (_count_ok(rec.get("before_count"), True) and _count_ok(rec.get("after_count"), True)):
            raise EvidenceInvalid(f"step {rec['step']}: counts must be non-negative integers or null")
    if verification.get("request_id") != rid:
        raise EvidenceInvalid("verification.json is of another request")
    if not isinstance(verification.get("verified_at"), str) or not isinstance(verification.get("all_clear"), bool):
        raise EvidenceInvalid("verification.json has no verified_at or all_clear")
    probes, exceptions = verification.get("probes"), verification.get("exceptions", [])
    if not isinstance(probes, list) or not isinstance(exceptions, list):
        raise EvidenceInvalid("verification.json has no probes list, or exceptions is not a list")
    for p in probes:
        p = _obj(p, "a probe in verification.json")
        if (
            not isinstance(p.get("tier"), str)
            or not isinstance(p.get("method"), str)
            or not _count_ok(p.get("residue"), False)
        ):
            raise EvidenceInvalid("verification.json holds a probe without tier, method or residue count")
    processors: set[str] = set()
    for r in receipts:
        if r.get("request_id") != rid:
            raise EvidenceInvalid("subprocessor-receipts.jsonl holds a receipt of another request (or of none)")
        proc = r.get("processor")
        if not isinstance(proc, str) or not proc or proc in processors:
            raise EvidenceInvalid("subprocessor-receipts.jsonl holds a receipt without a processor, or two of one")
        processors.add(proc)
        if r.get("status") not in RECEIPT_STATUSES:
            raise EvidenceInvalid(f"the receipt of {proc} has a status not in {', '.join(RECEIPT_STATUSES)}")


def load_evidence(evidence_dir: Path) -> Evidence:
    """Read and check the five evidence files. `EvidenceInvalid` names the first problem."""
    files: dict[str, bytes] = {}
    for name in EVIDENCE_ROLES:
        path = Path(evidence_dir) / name
        if path.is_symlink() or not path.is_file():
            raise EvidenceInvalid(f"evidence file {name} is missing from {evidence_dir}")
        files[name] = path.read_bytes()
    request = _obj(_parse("request.json", files["request.json"]), "request.json")
    steps = [_obj(s, "a line of steps.jsonl") for s in _parse("steps.jsonl", files["steps.jsonl"])]
    verification = _obj(_parse("verification.json", files["verification.json"]), "verification.json")
    receipts = [
        _obj(r, "a line of subprocessor-receipts.jsonl")
        for r in _parse("subprocessor-receipts.jsonl", files["subprocessor-receipts.jsonl"])
    ]
    _obj(_parse("audit-log-redaction.json", files["audit-log-redaction.json"]), "audit-log-redaction.json")
    _check_records(request, steps, verification, receipts)
    return Evidence(files, request, steps, verification)


def _needles(forbidden: Sequence[str]) -> list[str]:
    out: set[str] = set()
    for ident in forbidden:
        if not ident or not ident.strip():
            continue
        for form in (ident, json.dumps(ident)[1:-1], json.dumps(ident, ensure_ascii=False)[1:-1]):
            out.add(form.casefold())
    return sorted(out)


MIN_IDENTIFIER_CHARS = 3
"""Identifiers shorter than this are not searched as text: `ab` is in every digest."""


def scan_identifiers(files: Mapping[str, bytes], forbidden: Sequence[str]) -> None:
    """Raise `IdentifierInPack` naming the first file whose text holds any identifier (case-folded,
    raw or JSON-escaped) as a whole token: not inside a longer run of letters and digits, so a short
    numeric id such as `48213` is not "found" inside a sha256 hex digest. The message names the file,
    never the identifier."""
    needles = [n for n in _needles(forbidden) if len(n) >= MIN_IDENTIFIER_CHARS]
    if not needles:
        return
    pattern = re.compile("|".join(rf"(?<![^\W_]){re.escape(n)}(?![^\W_])" for n in needles))
    for name in files:  # in the caller's order: evidence first, so the message names the source
        text = files[name].decode("utf-8", "replace").casefold()
        if pattern.search(text):
            raise IdentifierInPack(f"{name} would hold a subject identifier in plaintext: pack not written")
