"""`attestation.txt`: the human-readable certificate of a pack. It names no data subject."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from erasure.exception_kinds import explain
from proof.verify.wire import DPO_ENVELOPE, ENGINE_ENVELOPE

_WIDTHS = (14, 22, 8, 8, 8)


def _count(v: Any) -> str:
    return "-" if v is None else str(v)


def _exception_line(exc: Any) -> str:
    if isinstance(exc, Mapping):
        tier, kind, ground = exc.get("tier"), exc.get("kind"), exc.get("ground")
        if tier and kind:
            rest = {k: v for k, v in exc.items() if k not in ("tier", "kind", "ground")}
            line = f"{tier}: {kind}" + (f" (Art.17(3) ground: {ground})" if ground else "")
            line += f" {json.dumps(rest, sort_keys=True)}" if rest else ""
            return line + f"\n      {explain(str(kind))}"
    return json.dumps(exc, sort_keys=True)


def _mention_lines(mentions: Mapping[str, Any]) -> list[str]:
    redacted = mentions.get("redacted") or {}
    reported = mentions.get("reported_tiers") or []
    lines = [f"  - redacted in place: {n} in {tier}" for tier, n in sorted(redacted.items())]
    lines += [f"  - reported, not redacted (policy): {tier}" for tier in reported]
    return lines or ["  (none found)"]


def render(predicate: Mapping[str, Any], *, tool_version: str, timestamped: bool = False) -> str:
    """The certificate text for an erasure-proof predicate (request id, dates, tiers, scope, keys).
    `timestamped`: the signatures get RFC 3161 tokens; else the times are the engine's own clock."""
    head = ("tier", "status", "before", "after", "residue")
    rows = [head] + [
        (tier, str(row["status"]), _count(row["before"]), _count(row["after"]), _count(row["residue"]))
        for tier, row in predicate["tiers"].items()
    ]
    table = [
        "  "
        + r[0].ljust(_WIDTHS[0])
        + r[1].ljust(_WIDTHS[1])
        + "".join(c.rjust(w) for c, w in zip(r[2:], _WIDTHS[2:], strict=True))
        for r in rows
    ]
    exceptions = [f"  - {_exception_line(e)}" for e in predicate["exceptions"]] or ["  (none)"]
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
        "salted commitments. Verify offline with the trusted public keys (never keys from the pack):",
        "  python -m proof.verify proof.tar.gz --engine-key engine.pub.pem --dpo-key dpo.pub.pem",
        "or with standard tools: see docs/verify-with-openssl.md.",
        "",
        f"Written by erasure-cascade {tool_version}.",
    ]
    return "\n".join(lines) + "\n"
