"""Tier 4 (vectors): the sqlite-vec tables, by id and by nearest-neighbour search.

By id: each of the fingerprint's frame and chunk ids is looked up in `frame_vectors` / `chunk_vectors`
(chunk vectors are keyed by chunk id and survive a frame deletion unless erased on their own). By
content: every one of the subject's own vectors kept in the fingerprint (those without an identical
bystander twin) is looked for in both tables under whatever id, by one pass over each table that
compares the stored bytes. sqlite-vec's k-nearest-neighbour query is itself a full scan per query
vector, so one pass for all of them (a whole window's) costs what one query did, and nothing is sampled.
"""

from __future__ import annotations

import apsw

from probes.context import ProbeContext, to_results
from probes.model import Measurement, ProbeResult
from probes.store import count, open_store

TIER = "vectors"
_TABLES = {"frame_vectors": "frame_id", "chunk_vectors": "chunk_id"}


def _present(conn: apsw.Connection, table: str, ids: list[int]) -> int:
    key = _TABLES[table]
    return sum(1 for i in ids if conn.execute(f"SELECT 1 FROM {table} WHERE {key} = ?", (i,)).fetchone() is not None)


def _identical_left(conn: apsw.Connection, ctx: ProbeContext) -> int:
    """The fingerprint's vectors whose exact bytes some row of either table still holds."""
    wanted = {ref.embedding for ref in ctx.fingerprint.vectors}
    if not wanted:
        return 0
    seen: set[bytes] = set()
    for table in _TABLES:
        for (emb,) in conn.execute(f"SELECT embedding FROM {table}"):
            if bytes(emb) in wanted:
                seen.add(bytes(emb))
    return sum(1 for ref in ctx.fingerprint.vectors if ref.embedding in seen)


def measure(ctx: ProbeContext) -> list[Measurement]:
    """The subject's vectors left (by id, by search); bystanders' vectors in each table."""
    keys = ctx.fingerprint.keys
    frames, chunks = keys.all_frame_ids(), keys.chunk_ids
    with open_store(ctx.store_dir) as conn:
        frame_left = _present(conn, "frame_vectors", frames)
        chunk_left = _present(conn, "chunk_vectors", chunks)
        frame_others = count(conn, "SELECT count(*) FROM frame_vectors") - frame_left
        chunk_others = count(conn, "SELECT count(*) FROM chunk_vectors") - chunk_left
        identical = _identical_left(conn, ctx)
    return [
        Measurement("frame-vectors-by-fingerprint-id", frame_left, "frame-vectors", frame_others),
        Measurement("chunk-vectors-by-fingerprint-id", chunk_left, "chunk-vectors", chunk_others),
        Measurement("identical-vector", identical, "all-vectors", frame_others + chunk_others),
    ]


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the vector tier."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
