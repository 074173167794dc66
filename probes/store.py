"""The probes' own read-only handle on the store, and small query and walk helpers.

Nothing here comes from `memory/`: the probes open `memory.db` through a `mode=ro` URI and read the
files beside it themselves, so a bug in the code under test cannot hide itself from its probe.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from erasure.sqlite import connect

DB_FILE = "memory.db"
SESSIONS_DIR = "sessions"
BLOBS_DIR = "blobs"
CORPORA_DIR = "corpora"
PERSONAL_ENTITY_KINDS = ("person", "email", "phone")


@contextmanager
def open_store(store_dir: Path) -> Iterator[apsw.Connection]:
    """A read-only connection to the store's database, closed on exit (`StoreError` if missing). SQL
    compares names with `unicode_lower(x)`, Python's lower(): SQLite's own lower() folds ASCII only."""
    conn = connect(Path(store_dir) / DB_FILE, readonly=True)
    conn.create_scalar_function("unicode_lower", _unicode_lower, 1, deterministic=True)
    try:
        yield conn
    finally:
        conn.close()


def _unicode_lower(*values: apsw.SQLiteValue) -> apsw.SQLiteValue:
    (value,) = values
    return value.lower() if isinstance(value, str) else value


def count(conn: apsw.Connection, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
    """The integer in the first column of the first row (0 when there is no row)."""
    row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def column(conn: apsw.Connection, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Any]:
    """The first column of every row."""
    return [r[0] for r in conn.execute(sql, params)]


def json_list(values: Iterable[Any]) -> str:
    """A JSON array for `json_each(?)`: how the probes pass id sets into one indexed query."""
    return json.dumps(sorted(set(values)))


def json_pairs(pairs: Iterable[tuple[str, str]]) -> str:
    """A JSON array of [source, source_ref] for `(source, source_ref) IN (... json_each(?))`."""
    return json.dumps(sorted({(s, r) for s, r in pairs}))


def pairs_in(param: str = "?") -> str:
    """SQL: the row's (source, source_ref) is one of the pairs bound to `param` (a `json_pairs`)."""
    return f"(source, source_ref) IN (SELECT value->>0, value->>1 FROM json_each({param}))"


def pair_rows(table: str, param: str = "?") -> str:
    """SQL: the rowids of `table`'s rows whose (source, source_ref) is one of the pairs bound to
    `param`, found by joining the pairs to the table (an index seek each, or SQLite's automatic index)."""
    return (
        f"SELECT t.rowid FROM json_each({param}) AS j JOIN {table} AS t"
        f" ON t.source = j.value->>0 AND t.source_ref = j.value->>1"
    )


def not_mine(*mine: str) -> str:
    """SQL: the row's rowid is in none of the `mine` selects (each returning rowids). Their union is
    built once and probed per row, so a bystander count costs the same for one subject or a window's
    thirty; `outside` with a list of pairs compared row by row grew with the pairs (1.2 s at 1M frames)."""
    return "rowid NOT IN (" + " UNION ".join(mine) + ")"


def outside(mine: str) -> str:
    """SQL: the row is NOT matched by the condition `mine`. A plain `NOT` would drop rows where a
    clause of `mine` is NULL (a turn frame's NULL subject_id): such a row is not the subject's."""
    return f"NOT ifnull({mine}, 0)"


def ids_in(param: str = "?") -> str:
    """SQL: `IN` the JSON array bound to `param` (a `json_list`)."""
    return f"IN (SELECT value FROM json_each({param}))"


def regular_files(root: Path) -> Iterator[Path]:
    """Every regular file under `root` (symlinks not followed), in a stable order; none if absent."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            try:
                if stat.S_ISREG(path.lstat().st_mode):
                    yield path
            except FileNotFoundError:
                continue


def json_objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object nested anywhere in `value` (itself included)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            yield v
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def mentions_subject(value: Any, subject_ids: str | Collection[str], pairs: set[tuple[str, str]]) -> bool:
    """True when a parsed JSON document names the subject: an object with `subject_id` equal to one of
    the subject's ids, or with `source`/`source_ref` equal to one of the subject's pairs."""
    ids = {subject_ids} if isinstance(subject_ids, str) else set(subject_ids)
    for obj in json_objects(value):
        if obj.get("subject_id") in ids:
            return True
        src, ref = obj.get("source"), obj.get("source_ref")
        if isinstance(src, str) and isinstance(ref, str) and (src, ref) in pairs:
            return True
    return False


def local_blob_roots(conn: apsw.Connection, store_dir: Path) -> tuple[list[Path], list[str]]:
    """The configured blob locations (`store_meta.blob_locations`): local roots as paths (relative ones
    under the store directory, `file://` URLs), and the locations that are not local (e.g. `s3://`)."""
    row = conn.execute("SELECT value FROM store_meta WHERE key = 'blob_locations'").fetchone()
    try:
        configured = json.loads(row[0]) if row else []
    except json.JSONDecodeError:
        configured = []
    local: list[Path] = []
    remote: list[str] = []
    for loc in configured if isinstance(configured, list) else []:
        loc = str(loc)
        if loc.startswith("file://"):
            local.append(Path(loc[len("file://") :]))
        elif "://" in loc:
            remote.append(loc)
        else:
            p = Path(loc)
            local.append(p if p.is_absolute() else Path(store_dir) / p)
    return local, remote
