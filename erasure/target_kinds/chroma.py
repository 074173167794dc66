"""Kind `chroma`: a Chroma `PersistentClient` directory, every collection in it.

    path = "chroma"             # the PersistentClient directory (chroma.sqlite3 + one folder per HNSW segment)
    subject_key = "user_id"     # the metadata field naming the subject (compared after NFKC + case folding)
    use_api = true              # optional: delete through the installed chromadb first (the eraser's step 1)
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from erasure.target_kinds import KindConfig, TargetPath, Text


def _metadata_key(value: str) -> str:
    if not value or value.startswith(("#", "chroma:")) or "\x00" in value:
        raise ValueError("key 'subject_key' must be a Chroma metadata key (not empty, not starting with # or chroma:)")
    return value


def _true_or_false(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("key 'use_api' must be true or false")
    return value


class ChromaConfig(KindConfig):
    """A chroma target's keys."""

    path: TargetPath
    subject_key: Annotated[Text, AfterValidator(_metadata_key)]
    use_api: Annotated[bool, BeforeValidator(_true_or_false)] = True


CONFIG = ChromaConfig
