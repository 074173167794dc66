"""What Graphiti's own delete leaves on its embedded Kuzu backend, measured (docs/targets.md):

    .venv/bin/python -m bench.graphiti_own_delete [FOLDER]

Builds the test graph (tests/graphiti_fixtures.py), then prints after each stage the database file's
size, how often the subject's identifiers and content occur in its bytes, and query counts (rows,
orphaned fact edges, rows naming the subject): before; after `Graphiti.remove_episode` of each of the
subject's episodes; after `EntityNode.delete` of their person entity; after a `CHECKPOINT`; and after
our erasure (`tasks.targets.graphiti`). Counts only; the test subject is fictional.
"""

from __future__ import annotations

import gc
import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import kuzu

from tasks.targets.graphiti import ERASER
from tests.graphiti_fixtures import SUBJECT, HashEmbedder, build_graph, with_driver

NEEDLES = {
    "name": SUBJECT.name or "",
    "id": SUBJECT.id,
    "email": SUBJECT.email or "",
    "place": "Montrouge",
    "content": "harpsichords",
}
QUERIES = {
    "entities": "MATCH (n:Entity) RETURN count(n)",
    "episodes": "MATCH (n:Episodic) RETURN count(n)",
    "fact_edges": "MATCH (e:RelatesToNode_) RETURN count(e)",
    "orphaned_fact_edges": (
        "MATCH (e:RelatesToNode_) WHERE NOT EXISTS { MATCH (:Entity)-[:RELATES_TO]->(e) } "
        "OR NOT EXISTS { MATCH (e)-[:RELATES_TO]->(:Entity) } RETURN count(e)"
    ),
    "facts_naming_subject": "MATCH (e:RelatesToNode_) WHERE e.fact CONTAINS $name RETURN count(e)",
    "episodes_naming_subject": "MATCH (n:Episodic) WHERE n.content CONTAINS $name RETURN count(n)",
    "communities_naming_subject": "MATCH (n:Community) WHERE n.summary CONTAINS $name RETURN count(n)",
}


def measure(db: Path) -> dict[str, Any]:
    """Size, needle occurrences in every file of the folder, and the query counts."""
    data = b"".join(p.read_bytes() for p in sorted(db.parent.iterdir()) if p.is_file())
    out: dict[str, Any] = {"bytes": db.stat().st_size}
    out |= {f"in_file:{k}": data.count(v.encode()) for k, v in NEEDLES.items()}
    database = kuzu.Database(str(db), read_only=True)
    conn = kuzu.Connection(database)
    try:
        for key, query in QUERIES.items():
            result = conn.execute(query, {"name": SUBJECT.name} if "$name" in query else {})
            assert isinstance(result, kuzu.QueryResult)
            row: list[Any] = list(result.get_next())
            result.close()
            out[key] = row[0]
    finally:
        gc.collect()
        conn.close()
        database.close()
    return out


def main(folder: Path) -> None:
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.graphiti import Graphiti
    from graphiti_core.llm_client.client import LLMClient
    from graphiti_core.nodes import EntityNode

    class NoLLM(LLMClient):
        async def _generate_response(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            raise RuntimeError("no LLM here")

    class NoRank(CrossEncoderClient):
        async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
            return [(p, 0.0) for p in passages]

    built = build_graph(folder)
    print(json.dumps({"stage": "built", **measure(built.db)}))

    async def remove_episodes(driver: Any) -> None:
        g = Graphiti(graph_driver=driver, llm_client=NoLLM(None), embedder=HashEmbedder(), cross_encoder=NoRank())
        for uuid in built.episode_uuids[SUBJECT.id]:
            await g.remove_episode(uuid)

    logging.disable(logging.CRITICAL)
    with_driver(built.db, remove_episodes)
    print(json.dumps({"stage": "after Graphiti.remove_episode x3", **measure(built.db)}))

    async def delete_person(driver: Any) -> None:
        node = await EntityNode.get_by_uuid(driver, built.person_uuids[SUBJECT.id])
        await node.delete(driver)

    with_driver(built.db, delete_person)
    print(json.dumps({"stage": "after EntityNode.delete", **measure(built.db)}))
    database = kuzu.Database(str(built.db))
    conn = kuzu.Connection(database)
    result = conn.execute("CHECKPOINT")
    assert isinstance(result, kuzu.QueryResult)
    result.close()
    conn.close()
    database.close()
    print(json.dumps({"stage": "after CHECKPOINT", **measure(built.db)}))
    ERASER.erase(built.target(), SUBJECT)
    print(json.dumps({"stage": "after our erasure", **measure(built.db)}))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "graph")
            shutil.rmtree(Path(tmp) / "graph", ignore_errors=True)
