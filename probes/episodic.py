"""Tier 2 (episodic): summary and verbatim turn frames, their chunks, and the raw archive.

Frames are looked up by subject id, by the fingerprint's frame ids, by archive link and by turn key
(verbatim turns carry neither subject nor archive link). Archive rows are append-only: residue is a
row that still has the subject's id or still has content.
"""

from __future__ import annotations

from probes.context import ProbeContext, to_results
from probes.model import Measurement, ProbeResult
from probes.store import count, ids_in, json_list, json_pairs, not_mine, open_store, outside, pair_rows, pairs_in

TIER = "episodic"

_FRAMES_MINE = (
    f"(frame_id {ids_in('?2')} OR subject_id {ids_in('?1')} OR archive_id {ids_in('?3')} OR turn_key {ids_in('?4')})"
)


def measure(ctx: ProbeContext) -> list[Measurement]:
    """The subject's frames, chunks and archive content; bystanders' frames, chunks and archive rows."""
    keys = ctx.fingerprint.keys
    sid = ctx.ids_json
    frames, archive = json_list(keys.frame_ids), json_list(keys.archive_ids)
    turns, pairs, chunks = json_list(keys.turn_keys), json_pairs(keys.source_refs), json_list(keys.chunk_ids)
    with open_store(ctx.store_dir) as conn:

        def n(sql: str, *params: object) -> int:
            return count(conn, sql, tuple(params))

        frame_others = n(
            "SELECT count(*) FROM frames WHERE kind != 'derived' AND " + outside(_FRAMES_MINE),
            sid,
            frames,
            archive,
            turns,
        )
        chunk_others = n(
            f"SELECT count(*) FROM frame_chunks c JOIN frames f USING (frame_id)"
            f" WHERE f.kind != 'derived' AND c.chunk_id NOT {ids_in()}",
            chunks,
        )
        archive_others = n(
            "SELECT count(*) FROM raw_archive WHERE content IS NOT NULL AND "
            + not_mine(
                "SELECT value FROM json_each(?2)",
                f"SELECT archive_id FROM raw_archive WHERE subject_id {ids_in('?1')}",
                pair_rows("raw_archive", "?3"),
            ),
            sid,
            archive,
            pairs,
        )
        return [
            Measurement(
                "frames-by-subject-id",
                n(f"SELECT count(*) FROM frames WHERE subject_id {ids_in()}", sid),
                "frames",
                frame_others,
            ),
            Measurement(
                "frames-by-fingerprint-id",
                n(f"SELECT count(*) FROM frames WHERE frame_id {ids_in()}", frames),
                "frames",
                frame_others,
            ),
            Measurement(
                "frames-by-archive-link",
                n(f"SELECT count(*) FROM frames WHERE archive_id {ids_in()}", archive),
                "frames",
                frame_others,
            ),
            Measurement(
                "turn-frames-by-key",
                n(f"SELECT count(*) FROM frames WHERE turn_key {ids_in()}", turns),
                "frames",
                frame_others,
            ),
            Measurement(
                "chunks-by-fingerprint-id",
                n(f"SELECT count(*) FROM frame_chunks WHERE chunk_id {ids_in()}", chunks),
                "chunks",
                chunk_others,
            ),
            Measurement(
                "archive-by-subject-id",
                n(f"SELECT count(*) FROM raw_archive WHERE subject_id {ids_in()}", sid),
                "archive",
                archive_others,
            ),
            Measurement(
                "archive-content-by-source-ref",
                n(f"SELECT count(*) FROM raw_archive WHERE content IS NOT NULL AND {pairs_in()}", pairs),
                "archive",
                archive_others,
            ),
            Measurement(
                "archive-content-by-fingerprint-id",
                n(f"SELECT count(*) FROM raw_archive WHERE content IS NOT NULL AND archive_id {ids_in()}", archive),
                "archive",
                archive_others,
            ),
        ]


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the episodic tier."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
