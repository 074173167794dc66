"""The lock-out (issue 37, item 2): the eraser's rewrite of the touched tables froze the agent for the
whole `VACUUM FULL` (74-125 s per request at 100k items). With `pg_repack` on the server the rewrite runs
online; without it, VACUUM FULL runs and its lock-out is recorded as measured.

Debian's PostgreSQL 15 (`make postgres`, with `postgresql-15-repack`) has no pgvector package, so these
tests rewrite the `store` table and the checkpoint tables of a LangGraph memory without a vector index
(`store_vectors` goes the same way: `pg_repack` rebuilds every index of a table before the swap). The
store is padded with bystanders' items (about 1 KB each) so that a rewrite takes seconds, not
milliseconds, while an agent thread writes through LangGraph every 50 ms and times each write.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from erasure.tiers import Tier
from tasks.targets.langgraph_postgres import ERASER
from tests.langgraph_postgres_fixtures import LIVE, SUBJECT, Writer, agent, build_memory, make_target, writing
from tests.pg_cluster import Cluster, cluster, debian_bindir

PADDING_ROWS = 100_000
SETTINGS = ("min_wal_size=4MB", "max_wal_size=16MB")
NEEDLES = [s.lower().encode() for s in (SUBJECT.id, SUBJECT.email or "", SUBJECT.name or "")]


def _pg15() -> Path:
    found = Path("/usr/lib/postgresql/15/bin")
    assert debian_bindir() is not None and (found / "initdb").exists(), "Debian PostgreSQL 15 missing (make postgres)"
    assert (found / "pg_repack").exists(), "pg_repack missing (make postgres installs postgresql-15-repack)"
    return found


def pad(c: Cluster, database: str) -> None:
    """Other people's items, ~1 KB each (inline, uncompressed), so the store takes seconds to rewrite."""
    c.psql(
        "INSERT INTO store (prefix, key, value) SELECT 'users.usr-pad-' || i || '.memories', 'm', "
        f"jsonb_build_object('text', repeat(md5(i::text), 30)) FROM generate_series(1, {PADDING_ROWS}) i; CHECKPOINT",
        database,
    )


def relation_files(c: Cluster, database: str, table: str) -> list[Path]:
    """The files of `table`, its TOAST table and every index of both (every segment and fork)."""
    rels = c.psql(
        f"SELECT pg_relation_filepath(oid) FROM pg_class WHERE oid = '{table}'::regclass "
        f"OR oid = (SELECT reltoastrelid FROM pg_class WHERE oid = '{table}'::regclass) "
        f"OR oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN ('{table}'::regclass, "
        f"(SELECT reltoastrelid FROM pg_class WHERE oid = '{table}'::regclass)))",
        database,
    ).split()
    out = []
    for rel in rels:
        path = c.data / rel
        out += [p for p in path.parent.glob(path.name + "*") if p.is_file()]
    return out


def holding(files: list[Path]) -> list[str]:
    return [p.name for p in files if any(n in p.read_bytes().lower() for n in NEEDLES)]


def database_dir(c: Cluster, database: str) -> Path:
    return c.data / "base" / c.psql(f"SELECT oid FROM pg_database WHERE datname = '{database}'").strip()


def erase(c: Cluster, database: str, user: str) -> tuple[dict[str, int], Writer]:
    target = make_target(c, database, url=c.url(database, user), wal_cycles=40, lock_timeout_ms=500)
    with writing(c, database, user) as w:
        time.sleep(0.5)
        outcome = ERASER.erase(target, SUBJECT)
    assert outcome[Tier.semantic].after == 0 and outcome[Tier.working].after == 0
    return outcome[Tier.semantic].detail, w


@pytest.mark.slow
def test_lockout_an_agent_writing_every_50ms_is_not_frozen_when_pg_repack_rewrites(tmp_path: Path) -> None:
    with cluster(_pg15(), *SETTINGS, wal_segsize_mb=1) as c:
        with agent(c, "agent", indexed=False) as a:
            build_memory(a, "agent")
        pad(c, "agent")
        store_files = relation_files(c, "agent", "store")
        assert holding(store_files), "the subject's items are in the store's files before the erasure"

        detail, w = erase(c, "agent", "agent")

        assert detail.get("rewrite_by_pg_repack", 0) >= 2, detail  # store and the checkpoint tables
        assert "rewrite_by_vacuum_full" not in detail and "vacuum_full_ms" not in detail, detail
        assert detail.get("pg_repack_extension_created") == 1 and "pg_repack_exit" not in detail, detail
        assert w.errors == [] and w.ok > 10, (w.errors, w.ok)
        assert w.longest < 2.0, f"the agent stalled {w.longest:.2f} s"
        # The subject's bytes: none in the store's new files, nor anywhere in the database's folder
        # (the old files were unlinked at the checkpoint), nor in any WAL segment.
        assert holding(relation_files(c, "agent", "store")) == []
        assert not [p.name for p in store_files if p.exists() and holding([p])]
        assert holding([p for p in database_dir(c, "agent").rglob("*") if p.is_file()]) == []
        assert detail["wal_segments_with_subject_after"] == 0, detail
        # Nothing of anyone else was lost: the padding and every write the agent made during the rewrite.
        rows = c.psql(
            "SELECT count(*) FILTER (WHERE prefix LIKE 'users.usr-pad-%'), count(*) FILTER (WHERE prefix = "
            f"'{'.'.join(LIVE)}') FROM store"
        )
        assert rows.strip() == f"{PADDING_ROWS}|{w.ok}"


@pytest.mark.slow
def test_lockout_without_pg_repack_vacuum_full_runs_and_records_what_it_locked(tmp_path: Path) -> None:
    """The target's role is not a superuser and the extension is not in its database: it may not be
    created, so VACUUM FULL runs and the step record says how long it held each table."""
    with cluster(_pg15(), *SETTINGS, wal_segsize_mb=1) as c:
        # The role docs/targets.md asks for: owner of the tables, CHECKPOINT and pg_switch_wal, no superuser.
        c.psql("CREATE ROLE app LOGIN IN ROLE pg_checkpoint")
        c.psql("GRANT EXECUTE ON FUNCTION pg_switch_wal() TO app")
        c.psql("CREATE DATABASE appdb OWNER app")
        with agent(c, "appdb", indexed=False, user="app") as a:
            build_memory(a, "appdb")
        pad(c, "appdb")

        detail, w = erase(c, "appdb", "app")

        assert detail.get("pg_repack_not_permitted") == 1 and detail.get("online_rewrite_unavailable") == 1, detail
        assert "rewrite_by_pg_repack" not in detail and detail.get("rewrite_by_vacuum_full", 0) >= 2, detail
        lockout = detail["vacuum_full_lockout_longest_ms"]
        assert lockout == max(detail[f"vacuum_full_{t}_ms"] for t in ("store", "checkpoints", "checkpoint_blobs"))
        assert w.errors == [], w.errors
        # What was recorded is what the agent lived: it waited about as long as the store was locked.
        assert w.longest * 1000 <= detail["vacuum_full_ms"] + 1500, (w.longest, detail)
        assert detail["vacuum_full_store_ms"] >= 0.5 * w.longest * 1000 - 200, (w.longest, detail)
        assert holding(relation_files(c, "appdb", "store")) == []


PASSWORD = "s3cret:with\\colon and space"


@pytest.mark.slow
def test_pg_repack_password_never_on_its_command_line_nor_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/proc/PID/cmdline is readable by every local user: the pg_repack client gets the password in a
    0600 file, and an environment without the run's own variables (PGPASSWORD, Prefect's credential)."""
    with cluster(_pg15(), *SETTINGS, wal_segsize_mb=1) as c:
        c.psql(f"CREATE ROLE pw SUPERUSER LOGIN PASSWORD '{PASSWORD}'")
        hba = c.data / "pg_hba.conf"
        hba.write_text("local all pw scram-sha-256\n" + hba.read_text())
        c.psql("SELECT pg_reload_conf()")
        with agent(c, "agent", indexed=False) as a:
            build_memory(a, "agent")
        pad(c, "agent")
        monkeypatch.setenv("AGENT_PG_PASSWORD", PASSWORD)
        monkeypatch.setenv("PGPASSWORD", PASSWORD)
        monkeypatch.setenv("PREFECT_API_AUTH_STRING", "admin:prefect-credential")
        target = make_target(c, "agent", url=c.url("agent", "pw"), password_env="AGENT_PG_PASSWORD", wal_cycles=40)
        seen: list[tuple[bytes, bytes]] = []
        stop = threading.Event()

        def ours(proc: Path) -> bool:
            """A child of this test's process: another test's pg_repack (a worker beside it, without a
            password) is not this eraser's."""
            pid = proc.name
            while pid not in ("0", "1"):
                if int(pid) == os.getpid():
                    return True
                pid = (Path("/proc") / pid / "stat").read_text().rpartition(")")[2].split()[1]
            return False

        def watch() -> None:
            while not stop.is_set():
                for proc in Path("/proc").iterdir():
                    try:
                        cmd = (proc / "cmdline").read_bytes()
                        if b"pg_repack" in cmd.split(b"\0")[0] and ours(proc):
                            seen.append((cmd, (proc / "environ").read_bytes()))
                    except OSError:
                        continue
                time.sleep(0.005)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            outcome = ERASER.erase(target, SUBJECT)
        finally:
            stop.set()
            watcher.join()
        detail = outcome[Tier.semantic].detail
        assert detail.get("rewrite_by_pg_repack", 0) >= 2 and "pg_repack_exit" not in detail, detail
        assert [cmd for cmd, _env in seen if b"--table" in cmd], "the pg_repack client was never seen rewriting"
        for cmd, env in seen:
            assert b"s3cret" not in cmd
            assert b"s3cret" not in env and b"prefect-credential" not in env
            assert b"PGPASSFILE=" in env or b"--table" not in cmd
        assert holding(relation_files(c, "agent", "store")) == []
