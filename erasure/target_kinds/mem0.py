"""Kind `mem0`: a mem0 `Memory` with local Qdrant (path mode, on disk) and its SQLite history.

history_db = "mem0/history.db"    # mem0's SQLite history database (`history_db_path`)
qdrant_path = "qdrant"            # mem0's local Qdrant directory (`vector_store.config.path`)
collection = "mem0"               # the Qdrant collection (`collection_name`); default "mem0"
lock_timeout = 120                # optional: seconds to wait for the agent to release the folder
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from erasure.target_kinds import KindConfig, KindSpec, TargetPath, Text

QDRANT_POINT_CLASSES = frozenset(
    f"qdrant_client.http.models.models.{name}" for name in ("PointStruct", "SparseVector", "Record")
)
"""The classes a pickled local-Qdrant point names (a fact of the format both sides read): loaded as
`erasure.untrusted.PickledRecord`s, every other class refused."""
DEFAULT_COLLECTION = "mem0"
DEFAULT_LOCK_TIMEOUT = 120.0


def _collection(value: str) -> str:
    if not value or "/" in value or "\\" in value or value in (".", "..") or "\x00" in value:
        raise ValueError("key 'collection': must be a Qdrant collection name (no path separators)")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError("key 'lock_timeout': must be a number of seconds, 0 or more")
    return float(value)


class Mem0Config(KindConfig):
    """A mem0 target's keys."""

    history_db: TargetPath
    qdrant_path: TargetPath
    collection: Annotated[Text, AfterValidator(_collection)] = DEFAULT_COLLECTION
    lock_timeout: Annotated[float, BeforeValidator(_seconds)] = DEFAULT_LOCK_TIMEOUT


SPEC = KindSpec(Mem0Config)
