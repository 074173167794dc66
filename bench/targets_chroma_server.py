"""Server mode of bench/targets_chroma.py: a window of requests on a Chroma store served by a real
`chroma run`, with an agent writing throughout (issue 37, item 6).

The store (`size` records in two collections, `people` people round robin, the subjects `person(1..n)`)
is built through the server's HttpClient; a home names it as a served `chroma` target with the test
suite's start and stop scripts (each call appended to calls.log). While the window runs (the one cascade
driver, `service.cascade.run_requests`, without Prefect), a thread adds one record every 50 ms through
its own HttpClient and counts the calls the server refused. Reported: the server's stops (calls.log),
each outage from the step records (what it covered, its seconds) and their sum, the window's time, and
the writer's calls, refused calls and longest stretch without a successful write.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from erasure.config import Home
from tests.chroma_fixtures import embed
from tests.chroma_server_fixtures import Server, chroma_server

KEY = "user_id"
WRITE_EVERY = 0.05


class Writer(threading.Thread):
    """The agent: one `add` every 50 ms through its own HttpClient, refused calls counted."""

    def __init__(self, srv: Server) -> None:
        super().__init__(daemon=True)
        self.srv = srv
        self.calls = self.refused = 0
        self.longest_gap = 0.0
        self.halt = threading.Event()

    def run(self) -> None:
        client = self.srv.client()
        col = client.get_or_create_collection("agent", embedding_function=None)
        last_ok = time.monotonic()
        n = 0
        while not self.halt.is_set():
            self.calls += 1
            n += 1
            doc = f"agent note {n} written during the erasure window"
            try:
                vec = [embed(doc).tolist()]
                col.add(ids=[f"agent-{n}"], documents=[doc], embeddings=vec, metadatas=[{KEY: "agent"}])
                last_ok = time.monotonic()
            except Exception:  # a server that is down refuses: counted, and the agent carries on
                self.refused += 1
                self.longest_gap = max(self.longest_gap, time.monotonic() - last_ok)
            self.halt.wait(WRITE_EVERY)


def _build(srv: Server, size: int, people: int) -> None:
    from chroma_people import person, text  # bench/chroma_people.py

    client = srv.client()
    for name, space in (("notes", "cosine"), ("facts", "l2")):
        col = client.get_or_create_collection(name, embedding_function=None, configuration={"hnsw": {"space": space}})
        ns = list(range(size // 2))
        for s in range(0, len(ns), 500):
            part = ns[s : s + 500]
            docs = [text(n % people, n) for n in part]
            col.add(
                ids=[f"{name}-{n}" for n in part],
                documents=docs,
                embeddings=[embed(d).tolist() for d in docs],
                metadatas=[{KEY: person(n % people).id, "n": n} for n in part],
            )


def _home(root: Path, srv: Server, window: int) -> tuple[Home, list[str]]:
    from chroma_people import person  # bench/chroma_people.py

    from erasure.engine_db import Engine
    from proof.keys import generate_keypair
    from service.intake import submit_envelope

    h = Home.resolve(root / "home", root / "evidence").ensure()
    keys = {
        "name": "served",
        "kind": "chroma",
        "path": str(srv.db),
        "subject_key": KEY,
        "url": srv.url,
        "stop": [str(srv.stop_script)],
        "start": [str(srv.start_script)],
    }
    (h.root / "targets.toml").write_text("[[targets]]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in keys.items()))
    generate_keypair("engine", h.keys_dir)
    rids = []
    with Engine.open(h.engine_db) as engine:  # this bench's own
        for i in range(1, window + 1):
            rid = f"req-bench-srv-{i:04d}"
            envelope = {
                "request_id": rid,
                "tenant_id": "default",
                "subject": person(i).model_dump(exclude_none=True),
                "legal_basis": "GDPR",
                "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
                "requester_identity_proof_ref": "idv/bench",
                "reason": "Art.17 request",
            }
            submit_envelope(engine, json.dumps(envelope).encode())
            rids.append(rid)
    return h, rids


def serve_window(root: Path, size: int, people: int, window: int) -> dict[str, Any]:
    """Build, serve, run a window of `window` requests with the agent writing; print and return the figures."""
    import os

    from erasure.engine_db import Engine
    from service import cascade, stages

    shutil.rmtree(root, ignore_errors=True)
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    with chroma_server(root / "srv") as srv:
        _build(srv, size, people)
        h, rids = _home(root, srv, window)
        os.environ["ERASURE_HOME"] = str(h.root)
        os.environ["ERASURE_EVIDENCE"] = str(h.evidence_root)
        stops_before = srv.calls().count("stop")
        writer = Writer(srv)
        writer.start()
        time.sleep(1.0)  # the agent is writing before the window begins
        t0 = time.monotonic()
        with Engine.session(h.engine_db) as engine:  # the bench's run engine, passed down
            results = cascade.run_requests(engine, h, rids, stages.direct(h, engine))
        took = time.monotonic() - t0
        time.sleep(1.0)
        writer.halt.set()
        writer.join()
        stops = srv.calls().count("stop") - stops_before
        outages: dict[tuple[str, str], dict[str, Any]] = {}
        for rid in rids:
            for line in (h.evidence_dir(rid) / "steps.jsonl").read_text().splitlines():
                step = json.loads(line)
                for o in step.get("detail", {}).get("outages", []):
                    outages[(o["during"], str(o["stopped_at"]))] = o
    outcomes = sorted({r.outcome.value for r in results.values()})
    down = sum(float(o["seconds"]) for o in outages.values())
    print(f"chroma server: {size:,} items, {people} people, a window of {window} requests")
    print(f"  outcomes: {', '.join(outcomes)}; window {took:.1f} s")
    print(f"  server stops: {stops}; outages recorded: {len(outages)}, down {down:.1f} s in all")
    for o in outages.values():
        print(f"    {o['during']}: {o['seconds']:.1f} s, {o['requests']} request(s), restarted {o['restarted']}")
    print(
        f"  writing client: {writer.calls} calls, {writer.refused} refused "
        f"({100 * writer.refused / max(1, writer.calls):.0f}%), longest without a write {writer.longest_gap:.1f} s"
    )
    return {
        "size": size,
        "window": window,
        "outcomes": outcomes,
        "window_s": took,
        "stops": stops,
        "down_s": down,
        "calls": writer.calls,
        "refused": writer.refused,
    }
