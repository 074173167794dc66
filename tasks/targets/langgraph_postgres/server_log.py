"""The erasing side's view of a PostgreSQL server log: when the cluster's settings may have written the
subject into its log and the log lies where the verification cannot read it, it is declared
`beyond_reach` (`server_log`), naming the settings and what the team must do.

Where the log may hold the subject: `log_statement` = mod/all (every INSERT with its parameters),
`log_min_messages` <= error (an error's DETAIL: a duplicate key's values), `log_min_error_statement`
<= error (the failing statement), `log_min_duration_statement` >= 0. Where it is read: with
`logging_collector` on, `log_directory` under the data directory (when that is readable) or an absolute
folder this process can read; any other destination only through the target's `log_dir`.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import psycopg

from erasure.target_kinds.langgraph_postgres import PostgresTarget

_NAMES = (
    "log_destination",
    "logging_collector",
    "log_directory",
    "log_statement",
    "log_min_messages",
    "log_min_error_statement",
    "log_min_duration_statement",
    "log_parameter_max_length",
    "log_parameter_max_length_on_error",
)
_UP_TO_ERROR = ("debug5", "debug4", "debug3", "debug2", "debug1", "info", "notice", "warning", "error")


def _settings(conn: psycopg.Connection[Any]) -> dict[str, str]:
    rows = conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(_NAMES),))
    return {str(n): str(v) for n, v in rows if v is not None}


def _causes(s: dict[str, str]) -> list[str]:
    out = [f"log_statement = {s['log_statement']}"] if s.get("log_statement") in ("mod", "all") else []
    out += [
        f"{k} = {s.get(k, d)}"
        for k, d in (("log_min_messages", "warning"), ("log_min_error_statement", "error"))
        if s.get(k, d) in _UP_TO_ERROR
    ]
    if s.get("log_min_duration_statement", "-1") not in ("-1", ""):
        out.append(f"log_min_duration_statement = {s['log_min_duration_statement']}")
    return out


def _can_read(d: Path | None) -> bool:
    return d is not None and d.is_dir() and os.access(d, os.R_OK | os.X_OK)


def _unread(cfg: PostgresTarget, s: dict[str, str]) -> list[str]:
    """The destinations of the log the verification cannot read."""
    dests = {d.strip() for d in s.get("log_destination", "stderr").split(",") if d.strip()}
    collected = {"stderr", "csvlog", "jsonlog"} & dests if s.get("logging_collector") == "on" else set()
    out = []
    if collected:
        folder = Path(s.get("log_directory", "log"))
        inside = not folder.is_absolute()
        if (inside and not cfg.data_dir_readable()) or (not inside and not _can_read(folder)):
            out.append("log_directory")
    if dests - collected and not _can_read(cfg.log_dir):
        out += sorted(dests - collected)
    return out


def declaration(cfg: PostgresTarget, conn: psycopg.Connection[Any]) -> dict[str, Any] | None:
    """The `server_log` beyond-reach entry, or None (nothing logged of the subject, or the log is read)."""
    s = _settings(conn)
    causes = _causes(s)
    unread = _unread(cfg, s)
    if not causes or not unread:
        return None
    return {
        "what": "server_log",
        "detail": {
            "unread": unread,
            "because": causes,
            **{k: s[k] for k in ("log_destination", "logging_collector", "log_parameter_max_length") if k in s},
        },
        "ground": f"the server log may hold the subject's data ({', '.join(causes)}: statements with their "
        "parameters, and errors naming the values, such as a duplicate key) and it is written where the "
        f"verification cannot read it ({', '.join(unread)}): give the target a readable log_dir so it is "
        "scanned, or remove the lines that name the subject from every log file and its rotated and "
        "shipped copies (or record the log's retention as the date they expire); to stop it, set "
        "log_statement = ddl and log_parameter_max_length(_on_error) = 0",
    }


def _folders(cfg: PostgresTarget, s: dict[str, str]) -> list[Path]:
    out = []
    if s.get("logging_collector") == "on":
        folder = Path(s.get("log_directory", "log"))
        out.append(folder if folder.is_absolute() or cfg.data_dir is None else cfg.data_dir / folder)
    if cfg.log_dir is not None:
        out.append(cfg.log_dir)
    return [d for d in out if _can_read(d)]


def _rotate(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> Path | None:
    """Rotate the collector's log until it writes to a new file (its name can hold the second only):
    the file it writes to now, or None (no collector, or it would not move on)."""

    def current() -> str | None:
        row = conn.execute("SELECT pg_current_logfile()").fetchone()
        return str(row[0]) if row and row[0] else None

    before = current()
    for _ in range(4):
        conn.execute("SELECT pg_rotate_logfile()")
        for _ in range(20):
            now = current()
            if now is not None and now != before:
                p = Path(now)
                return p if p.is_absolute() or cfg.data_dir is None else cfg.data_dir / p
            time.sleep(0.1)
        time.sleep(1.0)
    return None


def _without(path: Path, lows: list[bytes]) -> int:
    """Rewrite `path` without its lines that hold a needle (case-insensitive), in place of it (same
    owner and mode); how many lines went."""
    lines = path.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if not any(n in line.lower() for n in lows)]
    if len(kept) == len(lines):
        return 0
    st = path.stat()
    tmp = path.with_name(f".{path.name}.erasure-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, st.st_mode & 0o777)
    with os.fdopen(fd, "wb") as f:
        f.write(b"".join(kept))
        f.flush()
        os.fsync(f.fileno())
    with contextlib.suppress(PermissionError):
        os.chown(tmp, st.st_uid, st.st_gid)
    os.replace(tmp, path)
    return len(lines) - len(kept)


def rewrite(cfg: PostgresTarget, conn: psycopg.Connection[Any], needles: list[bytes]) -> dict[str, int]:
    """`rewrite_logs`: rotate the collector's log, then rewrite every closed log file that names the
    subject without those lines. Counts only. Without the collector the server keeps its log file open
    (stderr): it is left as it is, and the verification names it."""
    s = _settings(conn)
    if s.get("logging_collector") != "on":
        return {"log_rotated": 0, "log_files_rewritten": 0}
    live = _rotate(conn, cfg)
    if live is None:
        return {"log_rotated": 0, "log_files_rewritten": 0}
    lows = [n.lower() for n in needles if n]
    files = lines = 0
    for folder in _folders(cfg, s):
        for path in sorted(folder.iterdir()):
            if path.is_symlink() or not path.is_file() or path.resolve() == live.resolve():
                continue
            gone = _without(path, lows)
            files += gone > 0
            lines += gone
    return {"log_rotated": 1, "log_files_rewritten": files, "log_lines_removed": lines}
