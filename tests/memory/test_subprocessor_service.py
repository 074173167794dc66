"""Tier 8 over real HTTP on 127.0.0.1: the simulated processor service and our client for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest

from erasure.config import Home
from erasure.errors import ErasureError, InputError
from erasure.sqlite import connect, transaction
from memory import schema
from memory import subprocessors as sp
from memory.subprocessor_service import RunningService, start_demo_processors, start_service

ALICE = "subj-alice"
BOB = "subj-bob"
ALICE_TEXT = "Alice asked about her knee surgery on Tuesday"
BOB_TEXT = "Bob ordered a blue bicycle"


@pytest.fixture
def data_dir(home: Home) -> Path:
    return home.services_dir


@pytest.fixture
def crm(data_dir: Path) -> Iterator[RunningService]:
    with start_service("crm-sync", data_dir) as svc:
        yield svc


def _post_records(svc: RunningService, subject: str, records: list[tuple[str, str]]) -> httpx.Response:
    return httpx.post(
        svc.url + "/v1/records",
        json={"subject_ref": subject, "records": [{"ref": r, "content": c} for r, c in records]},
    )


def _file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


# --- the service ---------------------------------------------------------------------------------


def test_records_lookup_and_synchronous_deletion(crm: RunningService) -> None:
    assert crm.url.startswith("http://127.0.0.1:")
    resp = _post_records(crm, ALICE, [("chat/1", ALICE_TEXT), ("chat/2", "second")])
    assert resp.status_code == 201
    ids = resp.json()["ids"]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert _post_records(crm, ALICE, [("chat/2", "second"), ("chat/1", ALICE_TEXT)]).json()["ids"] == ids[::-1]
    assert _post_records(crm, BOB, [("chat/9", BOB_TEXT)]).status_code == 201
    assert sp.lookup_count(crm.url, ALICE) == 2
    assert _file_bytes(crm.db_path).count(ALICE_TEXT.encode()) >= 1

    receipt = sp.request_deletion(crm.url, ALICE, attempts=4, backoff=0.01)
    assert receipt.status == "done" and receipt.http_status == 200 and receipt.attempts == 1
    assert receipt.deleted == 2 and receipt.ticket_id.startswith("del_")
    assert receipt.completed_at is not None and receipt.completed_at.endswith("Z")
    assert sp.lookup_count(crm.url, ALICE) == 0
    assert sp.lookup_count(crm.url, BOB) == 1
    job = httpx.get(f"{crm.url}/v1/jobs/{receipt.ticket_id}").json()
    assert job["status"] == "done" and job["deleted"] == 2
    # deleted content is gone from the processor's files, and its job keeps no subject ref
    raw = _file_bytes(crm.db_path)
    assert ALICE_TEXT.encode() not in raw and ALICE.encode() not in raw
    assert BOB_TEXT.encode() in raw
    # a second deletion is a no-op with its own receipt
    again = sp.request_deletion(crm.url, ALICE, attempts=4, backoff=0.01)
    assert again.status == "done" and again.deleted == 0 and again.ticket_id != receipt.ticket_id


def test_deletion_by_remote_ids(crm: RunningService) -> None:
    ids = _post_records(crm, ALICE, [("a", "x"), ("b", "y"), ("c", "z")]).json()["ids"]
    receipt = sp.request_deletion(crm.url, ALICE, ids=ids[:2], attempts=4, backoff=0.01)
    assert receipt.deleted == 2
    assert sp.lookup_count(crm.url, ALICE) == 1


@pytest.mark.parametrize(
    "path,body",
    [
        ("/v1/records", {"records": []}),
        ("/v1/records", {"subject_ref": ALICE, "records": [{"ref": "a"}]}),
        ("/v1/deletions", {}),
        ("/v1/deletions", {"subject_ref": ALICE, "ids": ["x"]}),
        ("/v1/deletions", {"ids": "x"}),
    ],
)
def test_bad_requests_answer_400(crm: RunningService, path: str, body: dict[str, Any]) -> None:
    assert httpx.post(crm.url + path, json=body).status_code == 400


def test_unknown_paths_and_jobs_answer_404(crm: RunningService) -> None:
    assert httpx.get(crm.url + "/v1/nothing").status_code == 404
    assert httpx.get(crm.url + "/v1/jobs/del_unknown").status_code == 404
    with pytest.raises(sp.SubprocessorError, match="HTTP 404"):
        sp.poll_job(crm.url, "del_unknown", timeout=1, interval=0.01)


def test_asynchronous_deletion_completes_via_polling(data_dir: Path) -> None:
    with start_service("llm-kb", data_dir, async_delay=0.4) as svc:
        _post_records(svc, ALICE, [("a", ALICE_TEXT)])
        t0 = time.monotonic()
        receipt = sp.request_deletion(svc.url, ALICE, attempts=4, backoff=0.01)
        assert receipt.status == "pending" and receipt.http_status == 202
        assert receipt.completed_at is None and receipt.deleted is None
        assert sp.lookup_count(svc.url, ALICE) == 1  # not yet deleted
        early = sp.poll_job(svc.url, receipt.ticket_id, timeout=0.05, interval=0.01)
        assert early.status == "pending" and early.ticket_id == receipt.ticket_id
        done = sp.poll_job(svc.url, receipt.ticket_id, timeout=5, interval=0.05)
        assert time.monotonic() - t0 >= 0.4
        assert done.status == "done" and done.deleted == 1 and done.completed_at is not None
        assert done.attempts >= 2 and done.requested_at.endswith("Z")
        assert sp.lookup_count(svc.url, ALICE) == 0


def test_asynchronous_job_completes_without_being_asked(data_dir: Path) -> None:
    """The reaper thread finishes due jobs even when nobody polls."""
    with start_service("llm-kb", data_dir, async_delay=0.2) as svc:
        _post_records(svc, ALICE, [("a", ALICE_TEXT)])
        receipt = sp.request_deletion(svc.url, ALICE, attempts=4, backoff=0.01)
        seen = svc.requests_seen
        deadline = time.monotonic() + 5
        status = "pending"
        while status != "done" and time.monotonic() < deadline:
            time.sleep(0.05)
            ro = connect(svc.db_path, readonly=True)
            row = ro.execute("SELECT status FROM jobs WHERE ticket_id = ?", (receipt.ticket_id,)).fetchone()
            assert row is not None
            status = str(row[0])
            ro.close()
        assert status == "done" and svc.requests_seen == seen


def test_flaky_processor_fails_deterministically_and_retries_succeed(data_dir: Path) -> None:
    with start_service("vector-saas", data_dir, fail_every=2) as svc:
        assert _post_records(svc, ALICE, [("a", "x")]).status_code == 201  # request 1
        assert httpx.get(svc.url + "/v1/lookup", params={"subject_ref": ALICE}).status_code == 503  # 2
        assert httpx.get(svc.url + "/healthz").status_code == 200  # not counted
        assert _post_records(svc, BOB, [("b", "y")]).status_code == 201  # request 3
        receipt = sp.request_deletion(svc.url, ALICE, attempts=4, backoff=0.01)  # 4 fails, 5 succeeds
        assert receipt.status == "done" and receipt.attempts == 2 and receipt.deleted == 1
        assert svc.requests_seen == 5
        assert sp.lookup_count(svc.url, ALICE, attempts=4, backoff=0.01) == 0


def test_processor_failing_every_request_raises_after_the_attempts(data_dir: Path) -> None:
    with start_service("down-ish", data_dir, fail_every=1) as svc:
        with pytest.raises(sp.SubprocessorError, match="after 3 attempts: HTTP 503") as err:
            sp.request_deletion(svc.url, ALICE, attempts=3, backoff=0.01)
        assert svc.requests_seen == 3
        assert isinstance(err.value, ErasureError) and ALICE not in str(err.value)


def test_failing_processor_raises_without_retrying_a_500(data_dir: Path) -> None:
    with start_service("broken", data_dir, always_fail=True) as svc:
        assert _post_records(svc, ALICE, [("a", "x")]).status_code == 201
        with pytest.raises(sp.SubprocessorError, match="refused the deletion: HTTP 500"):
            sp.request_deletion(svc.url, ALICE, attempts=4, backoff=0.01)
        assert svc.requests_seen == 2
        assert sp.lookup_count(svc.url, ALICE) == 1


def test_unreachable_processor_raises_after_the_attempts(data_dir: Path) -> None:
    svc = start_service("gone", data_dir)
    url = svc.url
    svc.stop()
    svc.stop()  # idempotent
    t0 = time.monotonic()
    with pytest.raises(sp.SubprocessorError, match="after 3 attempts: ConnectError"):
        sp.request_deletion(url, ALICE, attempts=3, backoff=0.05)
    assert time.monotonic() - t0 >= 0.05 + 0.1  # backoff 0.05 then 0.1


def test_latency_is_added_to_each_request(data_dir: Path) -> None:
    with start_service("slow", data_dir, latency=0.2) as svc:
        t0 = time.monotonic()
        assert sp.lookup_count(svc.url, ALICE) == 0
        assert time.monotonic() - t0 >= 0.2


def test_bad_names_and_ports_are_input_errors(data_dir: Path, crm: RunningService) -> None:
    with pytest.raises(InputError):
        start_service("../etc", data_dir)
    port = int(crm.url.rsplit(":", 1)[1])
    with pytest.raises(InputError, match="cannot bind"):
        start_service("other", data_dir, port=port)


def test_demo_processors_start_and_register(home: Home) -> None:
    services = start_demo_processors(home.services_dir)
    try:
        assert [s.name for s in services] == ["crm-sync", "llm-kb", "vector-saas"]
        assert services[1].mode.async_delay == pytest.approx(1.0)
        assert services[2].mode.fail_every == 2
        conn = schema.create(home.store_dir)
        with transaction(conn):
            inv = sp.register_demo(conn, services)
        assert [(p.name, p.base_url) for p in inv] == [(s.name, s.url) for s in services]
        assert inv[2].holds == ["vectors"]
        with transaction(conn):  # upsert: a restarted processor gets a new URL
            sp.register(conn, "crm-sync", "http://127.0.0.1:1/", "moved", ["episodic"])
        assert sp.inventory(conn)[0] == sp.Processor("crm-sync", "http://127.0.0.1:1", "moved", ["episodic"])
        conn.close()
    finally:
        for s in services:
            s.stop()


def test_command_line_prints_its_url_and_stops_on_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memory.subprocessor_service",
            "--name",
            "cli-proc",
            "--port",
            "0",
            "--data",
            str(tmp_path / "svc"),
            "--fail-every",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url + "/healthz").json() == {"ok": True, "name": "cli-proc"}
        assert httpx.get(url + "/v1/lookup", params={"subject_ref": ALICE}).json()["count"] == 0
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0
        assert ALICE not in err and err == ""  # no request lines logged
        assert (tmp_path / "svc" / "cli-proc.db").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- sync_pending --------------------------------------------------------------------------------


def _seed(conn: apsw.Connection, up: str, down: str) -> None:
    with transaction(conn):
        sp.register(conn, "crm-sync", up, "crm", ["episodic"])
        sp.register(conn, "vector-saas", down, "vectors", ["vectors"])
        now = "2024-01-01T00:00:00Z"
        conn.executemany(
            "INSERT INTO raw_archive(archive_uid, source, source_ref, subject_id, content, created_at)"
            " VALUES (?, 'chat', ?, ?, ?, ?)",
            [
                ("u1", "m1", ALICE, ALICE_TEXT, now),
                ("u2", "m2", ALICE, "alice two", now),
                ("u3", "m3", BOB, BOB_TEXT, now),
                ("u4", "m4", ALICE, "erased earlier", now),
            ],
        )
        conn.executemany(
            "INSERT INTO subprocessor_records(processor, subject_id, source, source_ref, created_at)"
            " VALUES (?, ?, 'chat', ?, ?)",
            [
                ("crm-sync", ALICE, "m1", now),
                ("crm-sync", ALICE, "m2", now),
                ("crm-sync", BOB, "m3", now),
                ("crm-sync", BOB, "m-noarchive", now),
                ("vector-saas", ALICE, "m1", now),
                ("crm-sync", ALICE, "m4", now),
            ],
        )
        conn.execute("INSERT INTO erased_subjects(source, source_ref, erased_at) VALUES ('chat', 'm4', ?)", (now,))


def _remote_refs(conn: apsw.Connection) -> dict[tuple[str, str], str | None]:
    return {
        (r[0], r[1]): r[2] for r in conn.execute("SELECT processor, source_ref, remote_ref FROM subprocessor_records")
    }


def test_sync_pending_fills_remote_refs_and_leaves_a_down_processor_pending(home: Home, crm: RunningService) -> None:
    gone = start_service("vector-saas", home.services_dir)
    down_url = gone.url
    gone.stop()
    conn = schema.create(home.store_dir)
    _seed(conn, crm.url, down_url)

    report = sp.sync_pending(conn, attempts=2, backoff=0.01)
    assert (report.sent, report.skipped_suppressed, report.pending) == (4, 1, 2)
    assert report.failed_processors == ["vector-saas"] and report.groups == 3
    refs = _remote_refs(conn)
    assert all(refs[("crm-sync", m)] for m in ("m1", "m2", "m3", "m-noarchive"))
    assert refs[("vector-saas", "m1")] is None and refs[("crm-sync", "m4")] is None
    assert sp.pending_count(conn) == 2
    # what the processor holds: Alice's two records with their archive content, Bob's two
    assert sp.lookup_count(crm.url, ALICE) == 2 and sp.lookup_count(crm.url, BOB) == 2
    ro = connect(crm.db_path, readonly=True)
    held = {str(r[0]): str(r[1]) for r in ro.execute("SELECT id, content FROM records")}
    ro.close()
    assert held[str(refs[("crm-sync", "m1")])] == ALICE_TEXT
    assert held[str(refs[("crm-sync", "m-noarchive")])] == ""
    assert "erased earlier" not in held.values()

    # a second round sends nothing new; once the processor is back, its rows go out
    again = sp.sync_pending(conn, attempts=2, backoff=0.01)
    assert (again.sent, again.pending) == (0, 2)
    assert _remote_refs(conn) == refs
    with start_service("vector-saas", home.services_dir) as back:
        with transaction(conn):
            sp.register(conn, "vector-saas", back.url, "vectors", ["vectors"])
        final = sp.sync_pending(conn, attempts=2, backoff=0.01)
        assert (final.sent, final.pending, final.failed_processors) == (1, 1, [])
        assert sp.lookup_count(back.url, ALICE) == 1
    conn.close()


def test_sync_pending_inside_a_callers_transaction_writes_there(home: Home, crm: RunningService) -> None:
    conn = schema.create(home.store_dir)
    _seed(conn, crm.url, crm.url)
    with pytest.raises(RuntimeError), transaction(conn):
        assert sp.sync_pending(conn).sent == 5
        raise RuntimeError("the caller rolls back")
    assert sp.pending_count(conn) == 6  # the ids were written in the rolled-back transaction
    conn.close()
