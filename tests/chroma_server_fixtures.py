"""Test helpers for a `chroma` target served by a real Chroma server (`chroma run`, chromadb 1.5).

The server is started and stopped by two small real scripts, the same ones the erasure is given as its
`start` and `stop` commands: `start` runs `chroma run --path DB --host 127.0.0.1 --port P` in the
background and writes its pid to a pidfile; `stop` sends it SIGTERM and waits until it has exited. Each
call is appended to `calls.log`, so a test sees what the erasure ran, and the pid shows the server was
a new process afterwards.

The store is built through `chromadb.HttpClient`, as an agent talking to the server does: two
collections (`notes`: cosine, the log only, ids naming their owner; `facts`: l2 with a small
`sync_threshold`, so its HNSW files hold vectors too), records of the subject and two bystanders round
robin (tests/chroma_fixtures.py's documents: the subject's name their email and phone).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.chroma_fixtures import BYSTANDERS, SUBJECT, SUBJECT_KEY, _document, hash_embedding

CHROMA = Path(sys.executable).parent / "chroma"
COLLECTIONS = {"notes": {"space": "cosine"}, "facts": {"space": "l2", "sync_threshold": 20, "batch_size": 20}}
PEOPLE = (SUBJECT.id, *BYSTANDERS)

START = """#!/bin/sh
# Start the Chroma server in the background (its own log), its pid in the pidfile.
echo start >> "{dir}/calls.log"
"{chroma}" run --path "{db}" --host 127.0.0.1 --port {port} >> "{dir}/server.log" 2>&1 &
echo $! > "{dir}/server.pid"
"""

STOP = """#!/bin/sh
# Stop the server of the pidfile: SIGTERM, then wait (at most 30 s) until it has exited.
echo stop >> "{dir}/calls.log"
pid=$(cat "{dir}/server.pid" 2>/dev/null) || exit 0
kill -TERM "$pid" 2>/dev/null || exit 0
i=0
while [ -d "/proc/$pid" ] && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != "Z" ]; do
  i=$((i + 1)); [ "$i" -gt 300 ] && exit 1
  sleep 0.1
done
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A real `chroma run` server over `db`, with its start and stop scripts."""

    dir: Path
    db: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def start_script(self) -> Path:
        return self.dir / "start.sh"

    @property
    def stop_script(self) -> Path:
        return self.dir / "stop.sh"

    def pid(self) -> int:
        return int((self.dir / "server.pid").read_text().strip())

    def calls(self) -> list[str]:
        f = self.dir / "calls.log"
        return f.read_text().split() if f.exists() else []

    def up(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def start(self, timeout: float = 60) -> None:
        subprocess.run(
            [str(self.start_script)],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not self.up():
            assert time.monotonic() < deadline, (self.dir / "server.log").read_text()[-2000:]
            time.sleep(0.1)

    def stop(self) -> None:
        subprocess.run([str(self.stop_script)], check=True, stdin=subprocess.DEVNULL)

    def client(self) -> Any:
        import chromadb
        from chromadb.config import Settings

        return chromadb.HttpClient(host="127.0.0.1", port=self.port, settings=Settings(anonymized_telemetry=False))


@contextmanager
def chroma_server(root: Path) -> Iterator[Server]:
    """A running server over `root/db` (stopped at the end, whatever the test left)."""
    root.mkdir(parents=True, exist_ok=True)
    srv = Server(dir=root, db=root / "db", port=free_port())
    for path, text in ((srv.start_script, START), (srv.stop_script, STOP)):
        path.write_text(text.format(dir=root, db=srv.db, port=srv.port, chroma=CHROMA))
        path.chmod(0o755)
    srv.start()
    try:
        yield srv
    finally:
        subprocess.run([str(srv.stop_script)], check=False, stdin=subprocess.DEVNULL)


def build_over_http(client: Any, per_collection: int = 60) -> dict[str, list[str]]:
    """The store through HttpClient; returns collection -> the bystanders' record ids."""
    ef = hash_embedding()
    out: dict[str, list[str]] = {}
    for name, hnsw in COLLECTIONS.items():
        col = client.get_or_create_collection(name, embedding_function=ef, configuration={"hnsw": hnsw})
        ids, docs, metas = [], [], []
        for i in range(per_collection):
            owner = PEOPLE[i % len(PEOPLE)]
            ids.append(f"{owner}/note-{i}" if name == "notes" else f"{name}-{i}")
            docs.append(_document(owner, i, name))
            metas.append({SUBJECT_KEY: owner, "n": i} | ({"email": SUBJECT.email} if owner == SUBJECT.id else {}))
        for s in range(0, per_collection, 20):
            col.add(ids=ids[s : s + 20], documents=docs[s : s + 20], metadatas=metas[s : s + 20])
        out[name] = [rid for rid, m in zip(ids, metas, strict=True) if m[SUBJECT_KEY] != SUBJECT.id]
    return out


def view(client: Any, ids: dict[str, list[str]]) -> dict[str, dict[str, tuple[Any, Any, list[float]]]]:
    """collection -> id -> (document, metadata, embedding) as the server returns them."""
    out: dict[str, dict[str, tuple[Any, Any, list[float]]]] = {}
    for name, wanted in ids.items():
        got = client.get_collection(name, embedding_function=hash_embedding()).get(
            ids=wanted, include=["documents", "metadatas", "embeddings"]
        )
        out[name] = {
            rid: (doc, meta, np.asarray(emb, dtype=np.float32).tolist())
            for rid, doc, meta, emb in zip(
                got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
            )
        }
    return out


def subject_records(client: Any) -> int:
    """The subject's records the server still returns (by metadata, and by the ids naming them)."""
    n = 0
    for name in COLLECTIONS:
        col = client.get_collection(name, embedding_function=hash_embedding())
        n += len(col.get(where={SUBJECT_KEY: SUBJECT.id})["ids"])
    return n


def folder_hits(db: Path) -> dict[str, int]:
    """file -> occurrences of the subject's email (a plain case-insensitive byte search)."""
    needle = (SUBJECT.email or "").lower().encode()
    out = {}
    for p in sorted(db.rglob("*")):
        if p.is_file() and (n := p.read_bytes().lower().count(needle)):
            out[str(p.relative_to(db))] = n
    return out


os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
