"""Tier 4 (vectors): the sqlite-vec tables, by id and by nearest-neighbour search.

By id: each of the fingerprint's frame and chunk ids is looked up in `frame_vectors` / `chunk_vectors`
(chunk vectors are keyed by chunk id and survive a frame deletion unless erased on their own). By
search: the subject's own vectors (kept in the fingerprint, those without an identical bystander twin)
are searched in both tables; a hit at distance 0 is the vector still there, under whatever id. The
search is brute force in sqlite-vec, so at most `MAX_NN_VECTORS` vectors are searched (evenly sampled).
"""

from __future__ import annotations

import apsw

from probes.model import Measurement, ProbeContext, ProbeResult, to_results
from probes.store import count, open_store

TIER = "vectors"
MAX_NN_VECTORS = 32
NN_K = 5
_TABLES = {"frame_vectors": "frame_id", "chunk_vectors": "chunk_id"}


def _present(conn: apsw.Connection, table: str, ids: list[int]) -> int:
    key = _TABLES[table]
    return sum(1 for i in ids
               if conn.execute(f"SELECT 1 FROM {table} WHERE {key} = ?", (i,)).fetchone() is not None)


def _nn_hits(conn: apsw.Connection, ctx: ProbeContext) -> int:
    vectors = ctx.fingerprint.vectors
    step = max(1, len(vectors) // MAX_NN_VECTORS)
    hits = 0
    for ref in vectors[::step][:MAX_NN_VECTORS]:
        for table, key in _TABLES.items():
            rows = conn.execute(f"SELECT {key}, distance FROM {table} WHERE embedding MATCH ? AND k = ?",
                                (ref.embedding, NN_K)).fetchall()
            if any(distance == 0.0 for _, distance in rows):
                hits += 1
                break
    return hits


def measure(ctx: ProbeContext) -> list[Measurement]:
    """The subject's vectors left (by id, by search); bystanders' vectors in each table."""
    keys = ctx.fingerprint.keys
    frames, chunks = keys.all_frame_ids(), keys.chunk_ids
    with open_store(ctx.store_dir) as conn:
        frame_left = _present(conn, "frame_vectors", frames)
        chunk_left = _present(conn, "chunk_vectors", chunks)
        frame_others = count(conn, "SELECT count(*) FROM frame_vectors") - frame_left
        chunk_others = count(conn, "SELECT count(*) FROM chunk_vectors") - chunk_left
        nn = _nn_hits(conn, ctx)
    return [
        Measurement("frame-vectors-by-fingerprint-id", frame_left, "frame-vectors", frame_others),
        Measurement("chunk-vectors-by-fingerprint-id", chunk_left, "chunk-vectors", chunk_others),
        Measurement("nearest-neighbour", nn, "all-vectors", frame_others + chunk_others),
    ]


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the vector tier."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
