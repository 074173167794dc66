"""Kind `chroma`, the framework's API: the subject's records deleted through the installed chromadb,
only when it would open the store without migrating it (see the package docstring, step 1).

chromadb is imported inside the functions that use it: it is heavy (its Rust core, onnxruntime), and
the eraser works where it is not installed."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import apsw

from erasure.sqlite import connect
from erasure.target_kinds.chroma import ChromaConfig
from tasks.targets.chroma.sql import DB_FILE, Collection, Found
from tasks.targets.eraser import WAIT_SECONDS

if TYPE_CHECKING:
    from chromadb.api.client import Client

DELETE_BATCH = 500

T = TypeVar("T")


@lru_cache(maxsize=1)
def _installed_migrations() -> frozenset[tuple[str, int, str]] | None:
    """The migrations the installed chromadb applies to a new store (None: chromadb not installed)."""
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError:
        return None
    with tempfile.TemporaryDirectory(prefix="erasure-chroma-") as tmp:
        client = _persistent_client(chromadb, tmp, Settings(anonymized_telemetry=False))
        client.close()
        conn = connect(Path(tmp) / DB_FILE, readonly=True)
        try:
            return _migrations(conn)
        finally:
            conn.close()


def _migrations(conn: apsw.Connection) -> frozenset[tuple[str, int, str]]:
    return frozenset((str(d), int(v), str(h)) for d, v, h in conn.execute("SELECT dir, version, hash FROM migrations"))


def _retry_locked(fn: Callable[[], T], *, seconds: float = WAIT_SECONDS) -> T:
    """Run a chromadb call, retrying while its SQLite reports the agent's lock."""
    deadline = time.monotonic() + seconds
    pause = 0.05
    while True:
        try:
            return fn()
        except Exception as exc:
            if "database is locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 1.0)


def api_delete(cfg: ChromaConfig, found: Found, collections: list[Collection]) -> int:
    """Delete the subject's records through chromadb (only when it is installed and would not migrate
    the store). Returns the records deleted, or -1 when the API was not used."""
    if not cfg.use_api or not any(found.ids.values()):
        return -1
    installed = _installed_migrations()
    if installed is None:
        return -1
    conn = connect(cfg.path / DB_FILE, readonly=True)
    try:
        if _migrations(conn) != installed:
            return -1
    finally:
        conn.close()
    names = {c.id: c.name for c in collections}
    return _retry_locked(lambda: _api_session(cfg.path, names, found.ids))


def _api_session(root: Path, names: dict[str, str], ids: dict[str, set[str]]) -> int:
    """One client session: open, delete by id in batches, close (a rerun after "database is locked"
    anywhere, even while the client starts, deletes what is left: deletes by id are idempotent)."""
    import chromadb
    from chromadb.config import Settings

    client = _persistent_client(chromadb, str(root), Settings(anonymized_telemetry=False))
    deleted = 0
    try:
        for cid, wanted in sorted(ids.items()):
            if cid not in names or not wanted:
                continue
            # No embedding function is needed to delete by id; None keeps chromadb from building the
            # agent's own (its configuration stays in the store as it was).
            col = client.get_collection(names[cid], embedding_function=None)
            batch = sorted(wanted)
            before = col.count()
            for s in range(0, len(batch), DELETE_BATCH):
                col.delete(ids=batch[s : s + DELETE_BATCH])
            deleted += before - col.count()
    finally:
        client.close()
    return deleted


def _persistent_client(chromadb: Any, path: str, settings: Any) -> Client:
    """`chromadb.PersistentClient`, typed as the client it returns (its declared type, `ClientAPI`,
    lacks the `close` that releases the files)."""
    return cast("Client", chromadb.PersistentClient(path=path, settings=settings))
