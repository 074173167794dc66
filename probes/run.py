"""Run the independent probes and turn their results into `verification.json`.

`run_probes` runs the byte scan first (before any SQL handle touches the store), then each tier's
probe with its own read-only handle. A probe that cannot run (store missing, table missing, I/O
error) is not silently skipped: it yields a `probe-error` result with residue 1. All clear needs at
least one probe to have run, every residue to be 0 and no bystander population to have shrunk.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from erasure.subject import Subject
from erasure.tiers import Tier
from probes.fingerprint_model import Fingerprint
from probes.model import DEFAULT_HTTP_TIMEOUT, Verification
from probes.rule import RULE_VERSION
from probes.window import verify_window

__all__ = ["MATCHING_RULE", "Verification", "run_probes", "to_json"]

MATCHING_RULE = {
    "version": RULE_VERSION,
    "document": "docs/matching.md",
    "meaning": (
        "all clear: under this rule, no unambiguous hit of the subject in any parsed or decoded view of any byte "
        "outside the product's own duty records (the request vault, the requester's notice), and nothing left "
        "unread (what was not read is listed in unscanned_content)"
    ),
    "families": [
        "names: given and family words near each other in one record (JSON object, table row, paragraph), "
        "either order, initials or middle names between, never glued inside another word; character names "
        "(CJK, Thai) as character sequences",
        "emails: parsed addresses, IDNA in both forms, spelt out (at/dot), md5/sha1/sha256 of the address",
        "phones: E.164 by libphonenumber, digits of every script",
        "ids: whole words, joiners (- _ ') ignored",
        "ambiguous (reported, never residue): names of everyday words written as words, numeric or word-like ids",
    ],
    "formats": [
        "text (UTF-8, UTF-16, UTF-32)",
        "escapes (JSON, percent, HTML references, quoted-printable), base64",
        "HTML/XML",
        "PDF",
        "OOXML/ODF",
        "RTF",
        "MIME mail",
        "vCard/iCalendar",
        "gzip, zlib, bz2, xz, zstd, lz4, brotli, zip, tar, 7z",
        "SQLite databases",
        "images through Tesseract where installed",
    ],
}
"""What "all clear" means in this pack (`verification.json`: `matching_rule`)."""


def run_probes(
    store_dir: Path,
    subject: Subject,
    fingerprint: Fingerprint,
    *,
    tiers: Iterable[str | Tier] | None = None,
    http_timeout: float = DEFAULT_HTTP_TIMEOUT,
    extra_roots: Iterable[Path] = (),
) -> Verification:
    """Probe `tiers` (default: all nine and the byte scan, which also covers `extra_roots`): a window of
    one subject (`probes.window.verify_window`)."""
    wanted = None if tiers is None else [str(t.value if isinstance(t, Tier) else t) for t in tiers]
    return verify_window(
        store_dir, [(subject, fingerprint)], tiers=wanted, http_timeout=http_timeout, extra_roots=extra_roots
    )[0]


def to_json(verification: Verification, request_id: str, verified_at: datetime) -> dict[str, Any]:
    """The `verification.json` document (ids and counts only)."""
    at = verified_at if verified_at.tzinfo else verified_at.replace(tzinfo=UTC)
    return {
        "request_id": request_id,
        "verified_at": at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "all_clear": verification.all_clear,
        "probes": [p.model_dump(exclude={"target"} if p.target is None else set()) for p in verification.probes],
        "failing_tiers": verification.failing_tiers(),
        "residue_tiers": verification.residue_tiers(),
        "lost_bystander_tiers": verification.lost_bystander_tiers(),
        "unscanned_content": [u.model_dump(exclude_none=True) for u in verification.unscanned],
        "others_content": [o.model_dump() for o in verification.others_content],
        "matching_rule": MATCHING_RULE,
    }
