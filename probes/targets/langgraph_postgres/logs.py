"""The server log of a `langgraph-postgres` target, as the probe sees it: own code, read-only.

PostgreSQL writes the subject into its log in three ways: `log_statement = mod` (or `all`) logs every
INSERT/UPDATE with its parameters; an error's DETAIL names the values (`Key (prefix, key)=(users.<id>.
contacts, <email>) already exists`, logged when `log_min_messages` <= error, the default); and
`log_min_error_statement` <= error (the default) adds the failing statement. The probe reads those
settings (and where the log goes) at verification:

- with `logging_collector` on, the log is in `log_directory`: under the data directory (scanned with
  it) or an absolute folder (scanned when readable);
- anything else (stderr caught by `pg_ctl -l` or the service manager, syslog, the event log) is read
  only from the target's `log_dir`.

Log files read are scanned like every other file of the target, and any find is residue named by file.
Where the settings may have logged the subject and the log cannot be read here, `unscanned` says so
(never all clear by bytes). Settings only, never a line of the log, in anything returned.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg

from erasure.target_kinds.langgraph_postgres import PostgresTarget

SETTINGS = (
    "log_destination",
    "logging_collector",
    "log_directory",
    "data_directory",
    "log_statement",
    "log_min_messages",
    "log_min_error_statement",
    "log_min_duration_statement",
    "log_parameter_max_length",
    "log_parameter_max_length_on_error",
)
LEVELS = ("debug5", "debug4", "debug3", "debug2", "debug1", "info", "notice", "warning", "error", "log", "fatal")
"""Message levels in the order of `log_min_messages` / `log_min_error_statement` (then `panic`)."""
COLLECTED = frozenset({"stderr", "csvlog", "jsonlog"})
"""Destinations the logging collector writes into `log_directory`."""


def read_settings(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """The log settings this role may see (`pg_settings`; one it may not see is absent)."""
    rows = conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(SETTINGS),))
    return {str(name): str(value) for name, value in rows if value is not None}


def _at_most_error(level: str) -> bool:
    return level in LEVELS and LEVELS.index(level) <= LEVELS.index("error")


def why_logged(s: dict[str, str]) -> list[str]:
    """The settings (`name = value`) under which the log may hold the subject's data."""
    out = []
    if s.get("log_statement", "none") in ("mod", "all"):
        out.append(f"log_statement = {s['log_statement']}")
    if _at_most_error(s.get("log_min_messages", "warning")):
        out.append(f"log_min_messages = {s.get('log_min_messages', 'warning')}")
    if _at_most_error(s.get("log_min_error_statement", "error")):
        out.append(f"log_min_error_statement = {s.get('log_min_error_statement', 'error')}")
    if s.get("log_min_duration_statement", "-1") not in ("-1", ""):
        out.append(f"log_min_duration_statement = {s['log_min_duration_statement']}")
    return out


def _readable(d: Path) -> bool:
    return d.is_dir() and os.access(d, os.R_OK | os.X_OK)


def places(cfg: PostgresTarget, s: dict[str, str]) -> tuple[dict[str, Path], list[str]]:
    """Where the log is that this process can read (`log_directory`: an absolute folder outside the
    data directory; `log_dir`: the target's option), by role; and why any other part cannot be read."""
    found: dict[str, Path] = {}
    gaps: list[str] = []
    dests = {d.strip() for d in s.get("log_destination", "stderr").split(",") if d.strip()}
    collector = s.get("logging_collector", "off") == "on"
    if collector and dests & COLLECTED:
        where = Path(s.get("log_directory", "log"))
        if not where.is_absolute():
            if not (cfg.data_dir is not None and cfg.data_dir_readable()):
                gaps.append("logging_collector writes into the data directory, which this process cannot read")
        elif cfg.data_dir is not None and where.is_relative_to(cfg.data_dir):
            pass  # scanned with the data directory
        elif _readable(where):
            found["log_directory"] = where
        else:
            gaps.append("log_directory is outside the data directory and this process cannot read it")
    elsewhere = sorted(dests - COLLECTED if collector else dests)
    if elsewhere:
        what = f"log_destination = {','.join(sorted(dests))}, logging_collector = {s.get('logging_collector', '?')}"
        if cfg.log_dir is None:
            gaps.append(f"the log goes to {'/'.join(elsewhere)} outside the data directory ({what}) and no log_dir")
        elif not _readable(cfg.log_dir):
            gaps.append(f"log_dir cannot be read by this process ({what})")
    if cfg.log_dir is not None and _readable(cfg.log_dir):
        found["log_dir"] = cfg.log_dir
    return found, gaps


def unscanned_reason(cfg: PostgresTarget, s: dict[str, str]) -> str | None:
    """Why the server log may hold the subject and is not read here (None: read, or nothing logged)."""
    why = why_logged(s)
    gaps = places(cfg, s)[1]
    if not why or not gaps:
        return None
    return f"server log not readable: {'; '.join(gaps)}; it may hold the subject under {', '.join(why)}"
