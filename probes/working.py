"""Tier 1 (working memory): session rows and session files, by subject id, fingerprint id and key."""

from __future__ import annotations

import json
from pathlib import Path

from probes.context import ProbeContext, to_results
from probes.model import Measurement, ProbeResult
from probes.store import (
    SESSIONS_DIR,
    count,
    ids_in,
    json_list,
    json_pairs,
    mentions_subject,
    not_mine,
    open_store,
    pair_rows,
    pairs_in,
    regular_files,
)

TIER = "working"


def measure(ctx: ProbeContext) -> list[Measurement]:
    """Sessions of the subject still in the table or on disk; bystanders' sessions and files."""
    keys = ctx.fingerprint.keys
    sid, ids, pairs = ctx.ids_json, json_list(keys.session_ids), json_pairs(keys.source_refs)
    with open_store(ctx.store_dir) as conn:
        by_subject = count(conn, f"SELECT count(*) FROM working_sessions WHERE subject_id {ids_in()}", (sid,))
        by_id = count(conn, f"SELECT count(*) FROM working_sessions WHERE session_id {ids_in()}", (ids,))
        by_ref = count(conn, f"SELECT count(*) FROM working_sessions WHERE {pairs_in()}", (pairs,))
        others = count(
            conn,
            "SELECT count(*) FROM working_sessions WHERE "
            + not_mine(
                f"SELECT rowid FROM working_sessions WHERE subject_id {ids_in('?1')}",
                f"SELECT rowid FROM working_sessions WHERE session_id {ids_in('?2')}",
                pair_rows("working_sessions", "?3"),
            ),
            (sid, ids, pairs),
        )
    files_mine, files_others = _session_files(ctx.store_dir / SESSIONS_DIR, ctx)
    return [
        Measurement("sessions-by-subject-id", by_subject, "sessions", others),
        Measurement("sessions-by-fingerprint-id", by_id, "sessions", others),
        Measurement("sessions-by-source-ref", by_ref, "sessions", others),
        Measurement("session-files", files_mine, "session-files", files_others),
    ]


def _session_files(root: Path, ctx: ProbeContext) -> tuple[int, int]:
    """Every file under sessions/ (whatever its name): the subject's by name or by content."""
    ids = set(ctx.fingerprint.keys.session_ids)
    pairs = {(s, r) for s, r in ctx.fingerprint.keys.source_refs}
    mine = others = 0
    for path in regular_files(root):
        if path.name.split(".", 1)[0] in ids or _names_subject(path, ctx.ids, pairs):
            mine += 1
        else:
            others += 1
    return mine, others


def _names_subject(path: Path, subject_ids: list[str], pairs: set[tuple[str, str]]) -> bool:
    """The file (read once) names one of the ids or pairs."""
    data = path.read_bytes()
    try:
        return mentions_subject(json.loads(data), subject_ids, pairs)
    except (UnicodeDecodeError, json.JSONDecodeError):
        # not JSON (a half-written or foreign file): the subject's id or a source_ref in it is enough
        return any(s.encode() in data for s in subject_ids) or any(r.encode() in data for _, r in pairs)


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the working tier."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
