"""Tier 7 (derivatives): derived frames, the full-text index and the recall cache.

Residue: the fingerprint's derived frames; any frame that references one of the subject's frames
through frame_refs (to a fixpoint); full-text hits (FTS5 phrase MATCH) for each identifier that land
on a derived frame, on one of the subject's frames, or on an FTS row whose frame is gone (an orphaned
index row); full-text hits for the subject's distinctive content windows (chosen so that, before the
cascade, no bystander frame matched them); FTS rows of the subject's frame ids; recall-cache rows
built from the subject's frames. A bystander's non-derived frame that merely mentions the subject's
name is not counted here: erasing it is outside the cascade's scope.
"""

from __future__ import annotations

import apsw

from probes.context import ProbeContext, to_results
from probes.model import Measurement, ProbeResult
from probes.needles import NeedleKind, fts_phrase
from probes.store import column, count, ids_in, json_list, open_store

TIER = "derivatives"


def _referencing(conn: apsw.Connection, seeds: set[int]) -> set[int]:
    """Frames that reference `seeds`, directly or through each other (seeds that do included)."""
    found: set[int] = set()
    frontier = set(seeds)
    while frontier:
        refs = {
            int(v)
            for v in column(
                conn, f"SELECT frame_id FROM frame_refs WHERE ref_frame_id {ids_in()}", (json_list(frontier),)
            )
        }
        frontier = refs - found
        found |= frontier
    return found


def _fts(conn: apsw.Connection, text: str) -> set[int]:
    phrase = fts_phrase(text)
    if phrase is None:
        return set()
    return {int(v) for v in column(conn, "SELECT rowid FROM frames_fts WHERE frames_fts MATCH ?", (phrase,))}


def _identifier_hits(conn: apsw.Connection, ctx: ProbeContext, mine: set[int]) -> int:
    hits: set[int] = set()
    for _kind, spelling in ctx.spellings():
        hits |= _fts(conn, spelling)
    if not hits:
        return 0
    live = {
        int(fid): str(kind)
        for fid, kind in conn.execute(
            f"SELECT frame_id, kind FROM frames WHERE frame_id {ids_in()}", (json_list(hits),)
        )
    }
    return sum(1 for h in hits if h in mine or h not in live or live[h] == "derived")


def _content_hits(conn: apsw.Connection, ctx: ProbeContext) -> int:
    hits: set[int] = set()
    for needle in ctx.fingerprint.needles:
        if needle.kind is NeedleKind.content:
            hits |= _fts(conn, needle.data.decode())
    return len(hits)


def measure(ctx: ProbeContext) -> list[Measurement]:
    """The subject's derivatives left; bystanders' derived frames, FTS rows and cache rows."""
    keys = ctx.fingerprint.keys
    mine = set(keys.all_frame_ids())
    derived, frames = json_list(keys.derived_frame_ids), json_list(mine)
    with open_store(ctx.store_dir) as conn:
        derived_others = count(
            conn, f"SELECT count(*) FROM frames WHERE kind = 'derived' AND frame_id NOT {ids_in()}", (derived,)
        )
        fts_mine = sum(
            1 for f in sorted(mine) if conn.execute("SELECT 1 FROM frames_fts WHERE rowid = ?", (f,)).fetchone()
        )
        fts_others = count(conn, "SELECT count(*) FROM frames_fts") - fts_mine
        cache_mine = count(
            conn,
            f"SELECT count(*) FROM recall_cache WHERE frame_id {ids_in('?1')} OR cache_id {ids_in('?2')}",
            (frames, json_list(keys.recall_cache_ids)),
        )
        cache_others = count(conn, "SELECT count(*) FROM recall_cache") - cache_mine
        return [
            Measurement(
                "derived-by-fingerprint-id",
                count(conn, f"SELECT count(*) FROM frames WHERE frame_id {ids_in()}", (derived,)),
                "derived",
                derived_others,
            ),
            Measurement("derived-by-reference", len(_referencing(conn, mine)), "derived", derived_others),
            Measurement("fts-identifier", _identifier_hits(conn, ctx, mine), "fts-rows", fts_others),
            Measurement("fts-content", _content_hits(conn, ctx), "fts-rows", fts_others),
            Measurement("fts-rows-by-fingerprint-id", fts_mine, "fts-rows", fts_others),
            Measurement("recall-cache-by-fingerprint-frame", cache_mine, "recall-cache", cache_others),
        ]


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the derivatives tier."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
