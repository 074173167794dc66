"""The nine tiers of agent memory, in cascade order (DESIGN.md, "The nine tiers")."""

from __future__ import annotations

from enum import StrEnum


class Tier(StrEnum):
    """One tier of agent memory. The order of definition is the cascade order."""

    working = "working"
    episodic = "episodic"
    semantic = "semantic"
    vectors = "vectors"
    fine_tune = "fine_tune"
    uploads = "uploads"
    derivatives = "derivatives"
    subprocessors = "subprocessors"
    audit_log = "audit_log"


CASCADE_ORDER: tuple[Tier, ...] = tuple(Tier)
"""Tiers in the order the cascade erases them."""

ALWAYS_RUN: frozenset[Tier] = frozenset({Tier.audit_log})
"""Tiers the cascade runs whatever the request's data classes say (the audit log is redacted, never
skipped: the erasure itself must be recorded without the subject's values)."""

BYTES_SCOPE = "bytes"
"""Not a tier: the byte probe scans every file of the store, whatever tier wrote it. Verification
reports it beside the nine, and residue it finds is an exception under this name."""


def scope_name(tier: Tier | str) -> str:
    """A tier's name, or the byte scope's; `ValueError` for anything else."""
    return BYTES_SCOPE if tier == BYTES_SCOPE else Tier(tier).value
