"""`pg_stat_statements` keeps utility statements as written, literals and all (`COMMENT ON ... IS
'<email>'`, `NOTIFY`, `DO` blocks): after the erasure the eraser removes the statements whose text names
the subject, with `pg_stat_statements_reset(userid, dbid, queryid)`, where the role may. The extension
keeps texts in a file (`pg_stat_tmp/pgss_query_texts.stat`) that a partial reset does not rewrite; when
the data directory is readable and that file still names the subject, the statistics are reset whole
(timings only, no one's data: the file is then truncated). Counts only in the step record; a role that
may not reset is declared by `beyond_reach` (`declaration`)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors

from erasure.target_kinds.langgraph_postgres import PostgresTarget

TEXTS_FILE = ("pg_stat_tmp", "pgss_query_texts.stat")


def _installed(conn: psycopg.Connection[Any]) -> bool:
    return conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone() is not None


def _may_reset(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT coalesce(bool_or(has_function_privilege(oid, 'EXECUTE')), false) FROM pg_proc"
        " WHERE proname = 'pg_stat_statements_reset'"
    ).fetchone()
    return bool(row and row[0])


def _file_names(cfg: PostgresTarget, lows: list[bytes]) -> bool:
    if cfg.data_dir is None or not cfg.data_dir_readable():
        return False
    try:
        data = cfg.data_dir.joinpath(*TEXTS_FILE).read_bytes().lower()
    except OSError:
        return False
    return any(n in data for n in lows)


def reset(cfg: PostgresTarget, conn: psycopg.Connection[Any], needles: list[bytes]) -> dict[str, int]:
    """Reset the statements whose text holds a needle (case-insensitive); counts for the step record."""
    if not _installed(conn):
        return {}
    lows = [n.lower() for n in needles if n]
    try:
        rows = conn.execute("SELECT userid, dbid, queryid, query FROM pg_stat_statements").fetchall()
    except psycopg.Error:
        return {"pg_stat_statements_not_readable": 1}
    hits = [(u, d, q) for u, d, q, text in rows if text and any(n in str(text).encode().lower() for n in lows)]
    out = {"pg_stat_statements_naming_subject": len(hits), "pg_stat_statements_reset": 0}
    if not hits and not _file_names(cfg, lows):
        return out
    try:
        for u, d, q in hits:
            conn.execute("SELECT pg_stat_statements_reset(%s, %s, %s)", (u, d, q))
            out["pg_stat_statements_reset"] += 1
        if _file_names(cfg, lows):
            conn.execute("SELECT pg_stat_statements_reset()")
            out["pg_stat_statements_reset_all"] = 1
    except errors.InsufficientPrivilege:
        out["pg_stat_statements_not_reset_no_privilege"] = 1
    return out


def declaration(conn: psycopg.Connection[Any]) -> dict[str, Any] | None:
    """The `pg_stat_statements` beyond-reach entry when the extension is installed and the role may not
    reset it (its texts may name the subject), else None."""
    if not _installed(conn) or _may_reset(conn):
        return None
    return {
        "what": "pg_stat_statements",
        "detail": {"extension": "pg_stat_statements", "may_reset": False},
        "ground": "pg_stat_statements keeps utility statements with their literals (which can name the subject) "
        "and the eraser's role may not call pg_stat_statements_reset(): grant it EXECUTE on that function, "
        "or reset the statements that name the subject as a superuser; to stop it, set "
        "pg_stat_statements.track_utility = off",
    }
