"""`pg_stat_statements` of a `langgraph-postgres` target, as the probe reads it: own code, read-only.

The extension keeps one text per statement. Constants of plannable statements are replaced by `$n`,
but a utility statement (`COMMENT ON ... IS '...'`, `NOTIFY`, `DO $$ ... $$`, `COPY`, `PREPARE`) is
kept as written, literals and all: a text that names the subject is residue of the view (method
`pg_stat_statements-query-texts`). Where the extension is installed but its view cannot be read (not
in `shared_preload_libraries`, or texts hidden from this role), it is declared. Counts only.
"""

from __future__ import annotations

from typing import Any

import psycopg

HIDDEN = "<insufficient privilege>"


def installed(conn: psycopg.Connection[Any]) -> bool:
    """Whether the extension is installed in the connection's database."""
    return conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone() is not None


def texts(conn: psycopg.Connection[Any]) -> tuple[list[str], str | None]:
    """The statements' texts, and why they could not all be read (None: read)."""
    try:
        with conn.transaction():
            rows = [str(r[0] or "") for r in conn.execute("SELECT query FROM pg_stat_statements")]
    except psycopg.Error as exc:
        return [], f"pg_stat_statements not readable ({type(exc).__name__})"
    hidden = sum(1 for t in rows if t == HIDDEN)
    if hidden:
        return rows, f"pg_stat_statements: {hidden} statement text(s) hidden from the probe's role"
    return rows, None


def naming(rows: list[str], words: list[str]) -> int:
    """How many texts hold any of `words` (case-insensitive)."""
    lows = [w.casefold() for w in words if w]
    return sum(1 for t in rows if any(w in t.casefold() for w in lows))
