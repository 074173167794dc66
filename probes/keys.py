"""The keys that reach the subject in every tier, resolved by the probes before the cascade.

After the cascade most of these keys point at nothing (that is the point); the probes look each one
up again. They are ids and opaque keys, plus the subject's (source, source_ref) pairs: the fingerprint
that holds them is sealed, never written in plaintext.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SubjectKeys(BaseModel):
    """Ids of the subject's items, per tier, as the probes' own queries resolved them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source_refs: list[tuple[str, str]] = Field(default_factory=list, repr=False)
    archive_ids: list[int] = Field(default_factory=list)
    frame_ids: list[int] = Field(default_factory=list)
    """Summary and verbatim turn frames (tier 2)."""
    turn_keys: list[str] = Field(default_factory=list, repr=False)
    derived_frame_ids: list[int] = Field(default_factory=list)
    """Derived frames that reference the subject's frames (to a fixpoint) or quote an identifier."""
    chunk_ids: list[int] = Field(default_factory=list)
    entity_ids: list[int] = Field(default_factory=list)
    """Person/email/phone entities named by an identifier, and entities linked only to the subject's
    frames (the cascade's orphan sweep removes those)."""
    relation_ids: list[int] = Field(default_factory=list)
    blob_keys: list[str] = Field(default_factory=list)
    example_ids: list[int] = Field(default_factory=list)
    session_ids: list[str] = Field(default_factory=list)
    audit_commitments: list[str] = Field(default_factory=list)
    recall_cache_ids: list[int] = Field(default_factory=list)
    subprocessors: list[str] = Field(default_factory=list)
    """Names of processors holding a record of the subject."""
    subprocessor_bystanders: dict[str, list[str]] = Field(default_factory=dict, repr=False)
    """Per processor, a few other subjects' refs it holds: looked up again to see they survive."""

    def all_frame_ids(self) -> list[int]:
        """Episodic and derived frame ids together."""
        return sorted({*self.frame_ids, *self.derived_frame_ids})
