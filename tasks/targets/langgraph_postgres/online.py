"""The online rewrite of the touched tables, where the server offers one (issue 37, "the lock-out").

`VACUUM FULL` holds an ACCESS EXCLUSIVE lock for the whole rewrite: at 100k items the agent froze 74-125 s
per request (the HNSW index of `store_vectors` is rebuilt under it). Two rewrites copy the live rows into
new files while the agent keeps reading and writing, and lock the table only to swap the files:

1. `REPACK (CONCURRENTLY)`, in core from PostgreSQL 19 (`server_version_num` >= 190000). A server that
   refuses it (its `wal_level`, a missing privilege) is recorded and the next way is tried.
2. `pg_repack`: the extension in the database (created when the server has it available and the
   target's role is a superuser: it is not a trusted extension), and its client program of the same
   version, found beside the server's major version (`/usr/lib/postgresql/N/bin`, `/usr/pgsql-N/bin`)
   or on PATH. Its options: `--no-order` (a VACUUM FULL, not a CLUSTER), `--no-analyze` (statistics
   are `hygiene.py`'s step), `--no-kill-backend` with `--wait-timeout` of the target's `wait_seconds`
   (the agent's sessions are never cancelled: a table whose swap lock did not come in time is left to
   `VACUUM FULL`). It builds the new indexes before the swap, so the vector index too is rebuilt
   while the agent runs. The client gets an allowlisted environment (`erasure/child_env.py`) and the
   connection in a service file and a password file, both 0600 in a 0700 folder removed afterwards:
   never a password on its command line.

A table counts as rewritten only when its file changed (`pg_relation_filenode`): whatever the tool
said, a table whose file is the same is returned to the caller for `VACUUM FULL`. The step record
counts the tables each way rewrote (`rewrite_by_*`) and why an online way was not used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors, sql

from erasure.child_env import child_env
from erasure.target_kinds.langgraph_postgres import PostgresTarget

REPACK_CORE = 190000
"""The first `server_version_num` with `REPACK (CONCURRENTLY)`."""
SERVICE_KEYS = (
    "host",
    "hostaddr",
    "port",
    "user",
    "options",
    "connect_timeout",
    "sslmode",
    "sslcert",
    "sslkey",
    "sslrootcert",
    "sslcrl",
    "requirepeer",
    "krbsrvname",
    "gssencmode",
    "target_session_attrs",
)
"""Connection keywords passed to the client (what every libpq since 12 reads in a service file)."""
REFUSED = (
    errors.FeatureNotSupported,
    errors.ObjectNotInPrerequisiteState,
    errors.InsufficientPrivilege,
    errors.SyntaxError,
)


def filenodes(conn: psycopg.Connection[Any], schema: str, tables: list[str]) -> dict[str, int]:
    """Each table's current relation file number."""
    return {
        t: int(row[0])
        for t in tables
        if (row := conn.execute("SELECT pg_relation_filenode(%s::regclass)", (f"{schema}.{t}",)).fetchone())
        and row[0] is not None
    }


Retry = Callable[[Callable[[], object], str], object]
"""`hygiene.retry_locked` bound to the target: runs a statement again while the agent holds its lock."""


def _repack_core(
    conn: psycopg.Connection[Any], cfg: PostgresTarget, tables: list[str], retry: Retry, out: dict[str, int]
) -> None:
    t0 = time.perf_counter()
    for table in tables:
        statement = sql.SQL("REPACK (CONCURRENTLY) {}").format(sql.Identifier(cfg.schema, table))

        def run(s: sql.Composed = statement) -> object:
            return conn.execute(s)

        try:
            retry(run, f"REPACK (CONCURRENTLY) of {table}")
        except REFUSED:
            out["repack_concurrently_refused"] = 1
            break
    out["repack_concurrently_ms"] = int((time.perf_counter() - t0) * 1000)


def _client(major: int, version: str) -> Path | None:
    """The `pg_repack` program for this server's major version whose version is the extension's."""
    found = shutil.which("pg_repack")
    for cand in (
        Path(f"/usr/lib/postgresql/{major}/bin/pg_repack"),
        Path(f"/usr/pgsql-{major}/bin/pg_repack"),
        *([Path(found)] if found else []),
    ):
        if not os.access(cand, os.X_OK):
            continue
        try:
            said = subprocess.run(
                [str(cand), "--version"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
                env=child_env(),
                stdin=subprocess.DEVNULL,
            ).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if said[-1:] == [version]:
            return cand
    return None


def _extension(conn: psycopg.Connection[Any], retry: Retry, out: dict[str, int]) -> str | None:
    """The pg_repack extension's version in the database, created first where it is available and the
    role may; None (with the reason in `out`) otherwise."""
    row = conn.execute(
        "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'pg_repack'), "
        "(SELECT default_version FROM pg_available_extensions WHERE name = 'pg_repack'), "
        "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
    ).fetchone()
    installed, available, superuser = row if row else (None, None, False)
    if installed:
        return str(installed)
    if not available:
        out["pg_repack_not_available"] = 1
        return None
    if not superuser:
        out["pg_repack_not_permitted"] = 1
        return None
    try:
        retry(lambda: conn.execute("CREATE EXTENSION IF NOT EXISTS pg_repack"), "CREATE EXTENSION pg_repack")
    except (errors.InsufficientPrivilege, errors.FeatureNotSupported, errors.UndefinedFile):
        out["pg_repack_not_permitted"] = 1
        return None
    out["pg_repack_extension_created"] = 1
    return str(available)


def _escape_pgpass(value: str) -> str:
    return value.replace("\\", "\\\\").replace(":", "\\:")


def _pg_repack(
    conn: psycopg.Connection[Any], cfg: PostgresTarget, client: Path, tables: list[str], out: dict[str, int]
) -> None:
    params = conn.info.get_parameters()
    dbname = params.get("dbname") or conn.info.dbname
    password = conn.info.password
    with tempfile.TemporaryDirectory(prefix="erasure-pg_repack-") as folder:
        service = Path(folder, "service")
        lines = [f"{k}={params[k]}" for k in SERVICE_KEYS if params.get(k) and "\n" not in params[k]]
        service.touch(mode=0o600)
        service.write_text("[erasure]\n" + "".join(f"{line}\n" for line in lines))
        env = {**child_env(), "PGSERVICEFILE": str(service), "PGSERVICE": "erasure", "PGAPPNAME": "erasure"}
        if password:
            passfile = Path(folder, "pgpass")
            passfile.touch(mode=0o600)
            passfile.write_text(f"*:*:*:*:{_escape_pgpass(password)}\n")
            env["PGPASSFILE"] = str(passfile)
        cmd = [
            str(client),
            "--no-order",
            "--no-analyze",
            "--no-kill-backend",
            f"--wait-timeout={max(1, int(cfg.wait_seconds))}",
            "--no-superuser-check",
            "--no-password",
            *(f"--table={cfg.schema}.{t}" for t in tables),
            f"--dbname={dbname}",
        ]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, stdin=subprocess.DEVNULL)
        out["pg_repack_ms"] = int((time.perf_counter() - t0) * 1000)
    if done.returncode != 0:
        # Its messages may quote a key (a constraint error): only the exit status is kept.
        out["pg_repack_exit"] = done.returncode


def rewrite_online(
    conn: psycopg.Connection[Any], cfg: PostgresTarget, tables: list[str], retry: Retry
) -> tuple[list[str], dict[str, int]]:
    """Rewrite `tables` online where the server offers a way (see the module docstring). Returns the
    tables still to rewrite (by VACUUM FULL) and counts for the step record. `conn` is autocommit."""
    out: dict[str, int] = {}
    if not tables or not cfg.online_rewrite:
        return tables, out
    before = filenodes(conn, cfg.schema, tables)

    def left() -> list[str]:
        now = filenodes(conn, cfg.schema, tables)
        return [t for t in tables if now.get(t) == before.get(t)]

    remaining = list(tables)
    version = int(conn.info.server_version)
    if version >= REPACK_CORE:
        _repack_core(conn, cfg, remaining, retry, out)
        remaining = left()
        out["rewrite_by_repack_concurrently"] = len(tables) - len(remaining)
    if remaining:
        ext = _extension(conn, retry, out)
        client = _client(version // 10000, ext) if ext else None
        if ext and client is None:
            out["pg_repack_client_missing"] = 1
        if ext and client is not None:
            done_before = len(tables) - len(remaining)
            _pg_repack(conn, cfg, client, remaining, out)
            remaining = left()
            out["rewrite_by_pg_repack"] = len(tables) - len(remaining) - done_before
    return remaining, out
