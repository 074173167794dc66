"""Kind `langgraph-sqlite`: LangGraph's `SqliteStore` (long-term memory, with its `store_vectors` index)
and `SqliteSaver` (thread checkpoints).

    store = "agent/store.sqlite"              # SqliteStore database (with or without a vector index)
    checkpoints = "agent/checkpoints.sqlite"  # SqliteSaver database (may be the same file)
    namespace = ["users", "{subject_id}"]     # namespace prefix holding one subject's items, or
    namespaces = [["memories", "{subject_id}"], ["users", "{subject_id}", "prefs"]]  # several
    thread_key = "user_id"                    # checkpoint metadata key naming the subject, or
    thread_keys = ["user_id", "uid"]          # several (an older version of the app wrote `uid`)
    episodic = ["episodes"]                   # optional: namespace labels right under the prefix whose
                                              # items are episodic memories (the rest are semantic)

At least one of `store` and `checkpoints` is needed; a namespace goes with `store`, a thread key with
`checkpoints`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Self

from pydantic import BeforeValidator, model_validator

from erasure.target_kinds import KindConfig, KindSpec, TargetPath, Text, Texts

SUBJECT_LABEL = "{subject_id}"
"""The label of a namespace prefix that stands for the subject's id."""
LANGGRAPH_METADATA_KEYS = frozenset(
    {
        "source",
        "step",
        "parents",
        "writes",
        "thread_id",
        "thread_ts",
        "checkpoint_id",
        "checkpoint_ns",
        "run_id",
        "run_name",
        "task_id",
    }
)
"""Checkpoint metadata keys LangGraph writes itself, on SQLite and PostgreSQL alike: a person is never
named there (a subject whose id is `3` is not the owner of every thread at step 3). A fact of the
format both sides read, like the HNSW header; each side keeps its own reading of the metadata."""
_METADATA_KEY = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def _prefixes(value: Any) -> tuple[tuple[str, ...], ...]:
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(ns, list | tuple) and all(isinstance(x, str) for x in ns) for ns in value)
    ):
        raise ValueError("key 'namespaces' must be a list of namespace prefixes (lists of labels)")
    return tuple(tuple(ns) for ns in value)


class LangGraphSqliteConfig(KindConfig):
    """A langgraph-sqlite target's keys. `prefixes` and `metadata_keys` are what the sides read: the
    one-value and the list keys together."""

    store: TargetPath | None = None
    checkpoints: TargetPath | None = None
    namespace: Texts | None = None
    namespaces: Annotated[tuple[tuple[str, ...], ...], BeforeValidator(_prefixes)] = ()
    thread_key: Text | None = None
    thread_keys: Texts = ()
    episodic: Texts = ()

    @property
    def prefixes(self) -> dict[tuple[str, ...], str]:
        """Every namespace prefix (`namespace` first, then `namespaces`) -> the key it came from."""
        out = {self.namespace: "namespace"} if self.namespace is not None else {}
        return out | {ns: "namespaces" for ns in self.namespaces if ns not in out}

    @property
    def metadata_keys(self) -> tuple[str, ...]:
        """Every checkpoint metadata key naming the subject (`thread_key`, then `thread_keys`)."""
        one = () if self.thread_key is None else (self.thread_key,)
        return tuple(dict.fromkeys((*one, *self.thread_keys)))

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if self.store is None and self.checkpoints is None:
            raise ValueError("key 'store' or 'checkpoints' is required")
        if self.store is not None:
            if not self.prefixes:
                raise ValueError("key 'namespace' (or 'namespaces') is required")
            for namespace, key in self.prefixes.items():
                if not namespace or any(not label for label in namespace):
                    raise ValueError(f"key {key!r} must be a list of non-empty labels")
                if sum(SUBJECT_LABEL in label for label in namespace) != 1:
                    raise ValueError(f"key {key!r} must hold {SUBJECT_LABEL} in exactly one label")
                if any("." in label for label in namespace):
                    raise ValueError(f"key {key!r}: LangGraph namespace labels cannot contain '.'")
        if self.checkpoints is not None:
            if not self.metadata_keys:
                raise ValueError("key 'thread_key' (or 'thread_keys') is required")
            if not all(_METADATA_KEY.fullmatch(k) for k in self.metadata_keys):
                raise ValueError("key 'thread_key' / 'thread_keys' must name metadata keys (letters, digits, _ and -)")
        return self


SPEC = KindSpec(LangGraphSqliteConfig, backup_paths=("store", "checkpoints"))
