"""The one way to open a SQLite database in this project.

The interpreter's own `sqlite3` here is SQLite 3.40 without extension loading, so sqlite-vec cannot
load and FTS5 `secure-delete` (3.44+) does not exist. We use apsw, which bundles a current SQLite.
Every connection gets `foreign_keys=ON`, `secure_delete=ON`, a busy timeout and sqlite-vec; new
databases start in WAL mode; an existing database keeps the journal mode it was created with (the
byte-level tests run both WAL and rollback-journal stores).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import apsw

from erasure.errors import ConfigError, StoreError
from erasure.files import create_private_file, private_dirs

BUSY_TIMEOUT_MS = 30_000
MIN_SQLITE = (3, 44, 0)  # FTS5 secure-delete
JournalMode = Literal["wal", "delete"]

Connection = apsw.Connection


DAMAGED = (apsw.NotADBError, apsw.CorruptError)
"""SQLite's errors for a file that is not a database or whose pages are damaged: a store problem (exit 8)."""


def _vec0_path() -> str:
    """sqlite-vec's loadable extension, found without importing `sqlite_vec` (whose import pulls in
    numpy: a quarter of a second on every command that opens a database)."""
    import importlib.util
    import os.path

    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("sqlite-vec is not installed")
    return os.path.join(next(iter(spec.submodule_search_locations)), "vec0")


def _check_features(conn: apsw.Connection) -> None:
    version = tuple(int(p) for p in apsw.sqlite_lib_version().split("."))
    if version < MIN_SQLITE:
        raise ConfigError(f"SQLite {apsw.sqlite_lib_version()} is too old: FTS5 secure-delete needs 3.44 or newer")
    options = {row[0] for row in conn.execute("PRAGMA compile_options")}
    if "ENABLE_FTS5" not in options:
        raise ConfigError("this SQLite build has no FTS5")
    (secure,) = conn.execute("PRAGMA secure_delete").fetchone() or (0,)
    if secure != 1:
        raise ConfigError("this SQLite build refuses PRAGMA secure_delete=ON")


def connect(
    path: str | Path,
    *,
    readonly: bool = False,
    journal_mode: JournalMode | None = None,
    factory: type[apsw.Connection] = apsw.Connection,
) -> apsw.Connection:
    """Open `path` with the project's settings and sqlite-vec loaded.

    `readonly=True` opens a `file:...?mode=ro` URI (the probes' handles): nothing can be written
    through it. A new database file is created 0600 (folders made for it 0700). `journal_mode` is
    applied to a writable connection; left `None`, a new file starts in WAL and an existing one keeps
    its mode. `factory` makes the connection (a subclass of `apsw.Connection`). Raises `ConfigError`
    when the SQLite build lacks
    sqlite-vec, FTS5, FTS5 secure-delete or `secure_delete`, `StoreError` when a read-only target is
    missing.
    """
    p = Path(path)
    if readonly:
        if not p.exists():
            raise StoreError(f"no database at {p}")
        uri = f"file:{quote(str(p.resolve()))}?mode=ro"
        flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        conn = factory(uri, flags=flags)
    else:
        is_new = not p.exists() or p.stat().st_size == 0
        private_dirs(p.parent)
        # A new database is its owner's only: 0600 before SQLite writes a byte, and SQLite gives its
        # -wal, -shm and -journal files the database file's mode.
        create_private_file(p)
        conn = factory(str(p))
        if journal_mode is None and is_new:
            journal_mode = "wal"
    conn.setbusytimeout(BUSY_TIMEOUT_MS)
    try:
        conn.enable_load_extension(True)
        conn.load_extension(_vec0_path())
        conn.enable_load_extension(False)
    except apsw.Error as exc:  # pragma: no cover - depends on the build
        raise ConfigError(f"sqlite-vec could not be loaded: {exc}") from exc
    try:
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA secure_delete=ON")
        _check_features(conn)
        if not readonly:
            if journal_mode is not None:
                conn.execute(f"PRAGMA journal_mode={journal_mode}")
            conn.execute("PRAGMA synchronous=NORMAL")
    except DAMAGED as exc:
        conn.close()
        raise StoreError(f"the database at {p} is damaged or is not a SQLite database ({exc})") from exc
    return conn


@contextmanager
def transaction(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` on any exception.

    Immediate, because two writers that both start deferred and then upgrade get SQLITE_BUSY at once
    instead of waiting on the busy timeout.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def checkpoint_truncate(conn: apsw.Connection, *, attempts: int = 20, pause: float = 0.05) -> tuple[int, int, int]:
    """`wal_checkpoint(TRUNCATE)`: copy the WAL into the database and cut the WAL to zero bytes, so
    frames written before an erasure leave the -wal file. A reader of another process can hold it back
    (busy = 1): it is retried `attempts` times. Returns (busy, log frames, checkpointed); a caller that
    needs the bytes gone must check `busy` (the independent byte probe checks the -wal file too)."""
    import time

    for i in range(attempts):
        row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert row is not None
        result = (int(row[0]), int(row[1]), int(row[2]))
        if result[0] == 0:
            return result
        time.sleep(pause * (i + 1))
    return result


def journal_mode(conn: apsw.Connection) -> str:
    row = conn.execute("PRAGMA journal_mode").fetchone()
    return str(row[0]) if row else "unknown"


def scalar(conn: apsw.Connection, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> Any:
    """The first column of the first row, or None."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def one(conn: apsw.Connection, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> tuple[Any, ...]:
    """The first row, which must exist (a row the caller just found or wrote): `StoreError` if it is gone."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise StoreError("a row the erasure had just found is gone: another writer changed the store; run again")
    return tuple(row)
