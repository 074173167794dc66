"""`attestation.txt`: the human-readable certificate of a pack. It names no data subject."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wire.explain import exception_line, tier_table
from wire.format import DPO_ENVELOPE, ENGINE_ENVELOPE


def _exception_lines(exc: Any) -> list[str]:
    ground = exc.get("ground") if isinstance(exc, Mapping) else None
    return [f"  - {exception_line(exc)}", *([f"    Ground recorded: {ground}"] if ground else [])]


def verify_command(request_id: str, *, audited: bool, timestamped: bool) -> str:
    """The verifier's command for this pack as `erasure export` ships it: the exported file names."""
    return (
        f"python3 erasure-verify.pyz {request_id}-proof.tar.gz --engine-key engine.pub.pem --dpo-key dpo.pub.pem"
        + (" --audit-key audit.pub.pem" if audited else " --no-audit-key")
        + (" --tsa-root tsa-root.pem" if timestamped else "")
    )


def _mention_lines(mentions: Mapping[str, Any]) -> list[str]:
    redacted = mentions.get("redacted") or {}
    reported = mentions.get("reported_tiers") or []
    lines = [f"  - redacted in place: {n} in {tier}" for tier, n in sorted(redacted.items())]
    lines += [f"  - reported, not redacted (policy): {tier}" for tier in reported]
    return lines or ["  (none found)"]


def render(predicate: Mapping[str, Any], *, tool_version: str, timestamped: bool = False, audited: bool = True) -> str:
    """The certificate text for an erasure-proof predicate (request id, dates, tiers, scope, keys).
    `timestamped`: the signatures get RFC 3161 tokens; else the times are the engine's own clock.
    `audited`: the pack carries audit-log checkpoints, checked against the store's audit key."""
    table = tier_table(predicate["tiers"])
    exceptions = [line for e in predicate["exceptions"] for line in _exception_lines(e)] or ["  (none)"]
    scope: Sequence[str] = predicate["out_of_scope"]
    lines = [
        "ERASURE CERTIFICATE",
        "===================",
        "",
        f"Request id:        {predicate['request_id']}",
        f"Legal basis:       {predicate['legal_basis']}",
        f"Received:          {predicate['received_at']}",
        f"Verified:          {predicate['verified_at']}",
        f"Overall status:    {predicate['status']}",
        f"Verification:      {'all clear' if predicate['all_clear'] else 'NOT all clear'}"
        " (independent probes, residue counted per tier)",
        "",
        "What 'all clear' covers: no spelling of any identifier of the subject (ids in any letter case,",
        "email, name, phone in its usual spellings), no distinctive piece of their content and none of",
        "their vectors was found in any byte of any file of the store, nor its WAL, blobs, corpora or",
        "session files, by probes that share no code with the erasure; other people's items and links",
        "were counted before and after and none was lost. The request vault keeps the request itself.",
        "",
        "Mentions of the subject in other people's items",
        *_mention_lines(predicate.get("mentions") or {}),
        "",
        "Status per tier",
        *table,
        "",
        "Exceptions",
        *exceptions,
        "",
        "Out of scope (not covered by this erasure)",
        *([f"  - {s}" for s in scope] or ["  (none)"]),
        "",
        "Keys",
        f"  Engine key id:   {predicate['engine_keyid']}",
        "                   (sha256 of the public key's SubjectPublicKeyInfo DER)",
        f"  Engine signature: {ENGINE_ENVELOPE}",
        f"  DPO attestation:  {DPO_ENVELOPE} (signed separately with the DPO's own key)",
        "",
        "Times",
        *(
            [
                "  Each signature is timestamped by a timestamp authority (RFC 3161 tokens in",
                "  signatures/engine.tsr and signatures/dpo.tsr; verify with --tsa-root and the TSA's root).",
            ]
            if timestamped
            else ["  No timestamp authority: every time in this pack is the engine's own clock."]
        ),
        "",
        "This certificate names no data subject: request.json holds the subject's identifiers only as",
        "salted commitments. Verify it offline, in the folder `erasure export` writes for you, with the",
        "trusted public keys you confirmed with the controller (never keys from the pack):",
        "  " + verify_command(predicate["request_id"], audited=audited, timestamped=timestamped),
        "or with standard tools only: the recipe in VERIFY.md, in the same folder.",
        "",
        f"Written by erasure-cascade {tool_version}.",
    ]
    return "\n".join(lines) + "\n"
