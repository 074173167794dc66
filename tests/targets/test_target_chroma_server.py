"""Kind `chroma` served by a real Chroma server (issue 25): `chroma run` over the target's folder, the
store built and read through `chromadb.HttpClient`, erased by the real `erasure request run` (in this
process, on the session's Prefect test server) with the target's `stop` and `start` commands: two small
real scripts (tests/chroma_server_fixtures.py) that stop the server (SIGTERM, wait for its exit) and
start it in the background (a pidfile).

The erasure stops the server before it edits the folder and starts it after; the verification stops it
again while the probes read the folder, and starts it again. Checked: all clear; the calls and a new pid;
the step records' unavailability; the independent oracle over every file of the folder; the bystanders
read back through a new HttpClient, identical; the agent's HttpClient, kept open throughout, works
after the restart. A server that will not stop fails the request, and no byte of its folder changes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from erasure.config import Home
from tests import oracle
from tests.chroma_fixtures import SUBJECT, SUBJECT_KEY, embed, hash_embedding
from tests.chroma_server_fixtures import (
    Server,
    build_over_http,
    chroma_server,
    folder_hits,
    subject_records,
    view,
)
from tests.cli_fixtures import erasure, snapshot

pytest.importorskip("chromadb")

RID = "req-chroma-srv-0001"


def _prepare(home: Home, tmp_path: Path, srv: Server, **keys: Any) -> None:
    """targets.toml naming the server, the engine key, and the request submitted."""
    from proof.keys import generate_keypair

    lines = [
        f"{k} = {json.dumps(v)}"
        for k, v in {
            "name": "agent-vectors",
            "kind": "chroma",
            "path": str(srv.db),
            "subject_key": SUBJECT_KEY,
            "url": srv.url,
            "stop": [str(srv.stop_script)],
            "start": [str(srv.start_script)],
            **keys,
        }.items()
    ]
    (home.root / "targets.toml").write_text("[[targets]]\n" + "\n".join(lines) + "\n")
    generate_keypair("engine", home.keys_dir)
    envelope = {
        "request_id": RID,
        "tenant_id": "default",
        "subject": SUBJECT.model_dump(exclude_none=True),
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/chroma-server",
        "reason": "Art.17 request",
    }
    req = tmp_path / "request.json"
    req.write_text(json.dumps(envelope))
    assert erasure("request", "submit", str(req), "--home", str(home.root)).code == 0


def _steps(home: Home) -> list[dict[str, Any]]:
    path = home.evidence_dir(RID) / "steps.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_served_store_is_stopped_erased_verified_and_started_again(
    home: Home, tmp_path: Path, prefect_harness: None
) -> None:
    with chroma_server(tmp_path / "srv") as srv:
        agent = srv.client()  # the agent's client: kept open throughout
        bystanders = build_over_http(agent)
        before = view(agent, bystanders)
        assert subject_records(agent) > 0 and folder_hits(srv.db)
        first_pid = srv.pid()
        _prepare(home, tmp_path, srv)

        res = erasure("request", "run", RID, "--home", str(home.root), "--json")

        ver = home.evidence_dir(RID) / "verification.json"
        failing = [p for p in json.loads(ver.read_text())["probes"] if p["residue"]] if ver.exists() else []
        assert res.code == 0, json.dumps(failing) + res.err[-3000:]
        assert json.loads(res.out)["all_clear"] is True
        # Stopped and started for the erasure, and again for the verification: a new server process.
        assert srv.calls() == ["start", "stop", "start", "stop", "start"]
        assert srv.up() and srv.pid() != first_pid
        steps = [s for s in _steps(home) if s.get("target") == "agent-vectors" and s["status"] != "skipped"]
        assert {s["step"] for s in steps} == {"episodic", "vectors", "derivatives"}
        for s in steps:
            assert s["status"] == "erased" and s["after_count"] == 0
            assert s["detail"]["server_restarted"] == 1 and 0 < s["detail"]["unavailable_seconds"] < 120

        # Every file of the folder: nothing of the subject in any decoded view (the independent oracle).
        scan = oracle.scan_tree(srv.db, SUBJECT)
        assert not scan, scan.summary()
        assert not scan.unread and folder_hits(srv.db) == {}

        # The bystanders, read back through a new client: documents, metadata and embeddings identical.
        fresh = srv.client()
        assert view(fresh, bystanders) == before
        assert subject_records(fresh) == 0
        # The agent's client, open since before the run, works after the restart: read, query, write.
        notes = agent.get_collection("notes", embedding_function=hash_embedding())
        assert notes.count() == len(bystanders["notes"])
        assert subject_records(agent) == 0
        some = bystanders["notes"][0]
        doc = before["notes"][some][0]
        assert notes.query(query_embeddings=[embed(doc).tolist()], n_results=1)["ids"] == [[some]]
        notes.add(ids=["after-restart"], documents=["a new note after the erasure"], metadatas=[{SUBJECT_KEY: "u9"}])
        assert fresh.get_collection("notes").get(ids=["after-restart"])["ids"] == ["after-restart"]


def test_a_server_that_will_not_stop_fails_the_request_and_its_folder_is_untouched(
    home: Home, tmp_path: Path, prefect_harness: None
) -> None:
    with chroma_server(tmp_path / "srv") as srv:
        agent = srv.client()
        build_over_http(agent, per_collection=30)
        pid = srv.pid()
        # The stop command "succeeds" but the server keeps running: the erasure waits 2 s, then fails.
        _prepare(home, tmp_path, srv, stop=["/bin/true"], stop_wait_seconds=2)
        files = snapshot(srv.db)

        res = erasure("request", "run", RID, "--home", str(home.root), "--json")

        assert res.code != 0, res.out[-2000:]
        last = res.err.strip().splitlines()[-1]
        assert "was not stopped" in last and "nothing of its folder was touched" in last, res.err[-3000:]
        assert srv.url in last and SUBJECT.id not in res.err + res.out
        assert snapshot(srv.db) == files
        assert srv.up() and srv.pid() == pid and srv.calls() == ["start"]
        assert subject_records(agent) > 0
        ver = home.evidence_dir(RID) / "verification.json"
        assert not ver.exists() or json.loads(ver.read_text())["all_clear"] is not True


def test_a_server_that_does_not_start_again_fails_the_step_and_says_it_is_down(
    home: Home, tmp_path: Path, prefect_harness: None
) -> None:
    with chroma_server(tmp_path / "srv") as srv:
        build_over_http(srv.client(), per_collection=30)
        _prepare(home, tmp_path, srv, start=["/bin/false"])

        res = erasure("request", "run", RID, "--home", str(home.root), "--json")

        assert res.code != 0, res.out[-2000:]
        last = res.err.strip().splitlines()[-1]
        assert "did not start again" in last and "the server is down" in last, res.err[-3000:]
        assert "erasure is done" in last and SUBJECT.id not in res.err + res.out
        assert not srv.up() and srv.calls() == ["start", "stop"]
        steps = [s for s in _steps(home) if s.get("target") == "agent-vectors" and s["status"] != "skipped"]
        assert steps and all(
            s["status"] == "failed" and s["after_count"] == 0 and s["detail"]["server_down"] == 1 for s in steps
        )
        assert folder_hits(srv.db) == {}  # the data was erased: only the server is missing
        ver = home.evidence_dir(RID) / "verification.json"
        assert not ver.exists() or json.loads(ver.read_text())["all_clear"] is not True


# --- the keys, and waiting for a server someone else stops (no Chroma needed) ------------------------------

BAD_KEYS = [
    ({"url": "ftp://127.0.0.1:8000"}, "key 'url' must be the server's http:// or https:// URL"),
    ({"url": "http://admin:secret@127.0.0.1:8000"}, "without credentials"),
    ({"url": "http://h", "stop": "/bin/kill -TERM 42", "start": ["/bin/true"]}, "never a shell string"),
    ({"url": "http://h", "stop": [], "start": ["/bin/true"]}, "key 'stop' must name a command"),
    ({"url": "http://h", "stop": ["./stop.sh"], "start": ["/bin/true"]}, "an absolute path or a bare name on PATH"),
    ({"url": "http://h", "stop": ["no-such-command-25"], "start": ["true"]}, "'no-such-command-25' is not found"),
    ({"url": "http://h", "stop": ["{tmp}/plain.txt"], "start": ["true"]}, "is not an executable file"),
    ({"url": "http://h", "stop": ["/bin/true"]}, "keys 'stop' and 'start' go together"),
    ({"stopped_check": ["/bin/true"]}, "key 'url' is required with"),
    ({"url": "http://h", "stop_wait_seconds": 0}, "key 'stop_wait_seconds' must be a number of seconds"),
]


@pytest.mark.parametrize(("keys", "says"), BAD_KEYS)
def test_server_keys_are_checked_by_the_one_model_on_both_sides(
    tmp_path: Path, keys: dict[str, Any], says: str
) -> None:
    from erasure.errors import ConfigError
    from probes.targets.probe import probe_for
    from tasks.targets.eraser import eraser_for
    from tests.chroma_fixtures import target_for

    (tmp_path / "plain.txt").write_text("not a program\n")
    keys = {k: [x.replace("{tmp}", str(tmp_path)) for x in v] if isinstance(v, list) else v for k, v in keys.items()}
    target = target_for(tmp_path / "chroma", **keys)
    with pytest.raises(ConfigError) as erasing:
        eraser_for(target)
    with pytest.raises(ConfigError) as probing:
        probe_for(target)
    assert says in str(erasing.value) and str(erasing.value) == str(probing.value)


def _listener() -> Any:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_with_only_a_url_the_eraser_waits_until_it_refuses_connections_bounded() -> None:
    import threading
    import time

    from erasure.server_control import ServerControl, ServerNotStopped, quiesced

    s = _listener()
    url = f"http://127.0.0.1:{s.getsockname()[1]}"
    c = ServerControl(target="t", url=url, stop_wait_seconds=1)
    with (
        pytest.raises(ServerNotStopped, match=r"still answers after 1 s \(stop it, or give `stop`"),
        quiesced(c, "the erasure"),
    ):
        raise AssertionError("never entered")
    threading.Timer(0.5, s.close).start()  # someone stops it meanwhile
    with quiesced(ServerControl(target="t", url=url, stop_wait_seconds=10), "the erasure") as w:
        time.sleep(0.1)
    assert w.detail()["server_left_stopped"] == 1 and w.detail()["server_restarted"] == 0
    assert 0 < w.seconds < 5


def test_a_stopped_check_that_fails_keeps_the_folder_untouched(tmp_path: Path) -> None:
    from erasure.server_control import ServerControl, ServerNotStopped, quiesced

    s = _listener()
    url = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()  # the URL refuses connections, but the check says the process is still there
    c = ServerControl(target="t", url=url, stopped_check=("/bin/false",), stop_wait_seconds=1)
    with pytest.raises(ServerNotStopped, match="stopped_check did not exit 0 within 1 s"), quiesced(c, "the erasure"):
        raise AssertionError("never entered")
    with quiesced(ServerControl(target="t", url=url, stopped_check=("/bin/true",)), "the erasure") as w:
        pass
    assert w.control is not None and not w.restarted
