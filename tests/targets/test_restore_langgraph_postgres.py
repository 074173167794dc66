"""Issue 26 for kind `langgraph-postgres`: the erasure epoch lives in a table of the agent's own database,
advanced in the eraser's delete transaction. A `pg_dump` (custom format) taken before three erasures and
restored after them (database dropped, created, `pg_restore`) brings the three subjects and the old
epoch back: the target is then refused (exit 6) until `erasure restore replay` re-applies the erasures
(each subject found in the restored rows by the ledger's keyed hashes). Then nothing of the three is in
any decoded view of any file of the cluster (the oracle), bystanders read back through LangGraph are
unchanged, every replay pack verifies offline, and requests run again.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from erasure.config import Home
from erasure.subject import Subject
from tests import oracle
from tests.backup_fixtures import verify_offline
from tests.langgraph_postgres_fixtures import (
    BYSTANDERS,
    MORE_SUBJECTS,
    SUBJECT,
    agent,
    build_memory,
    bystander_view,
    subject_gone,
)
from tests.pg_cluster import DATABASE, RUN_AS, SUPERUSER, Cluster, cluster, debian_bindir, embedded_bindir
from tests.targets.test_target_langgraph_postgres import SETTINGS, cli, raw_hits, targets_toml, template_dirs


def _tool(c: Cluster, name: str, *args: str) -> None:
    cmd = [str(c.bindir / name), "-h", str(c.socket_dir), "-U", SUPERUSER, *args]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", RUN_AS, "--", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr


def _submit(home: Home, tmp_path: Path, request_id: str, subject: Subject) -> None:
    envelope = {
        "request_id": request_id,
        "tenant_id": "default",
        "subject": subject.model_dump(exclude_none=True),
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/pg",
        "reason": "Art.17 request",
    }
    req = tmp_path / f"{request_id}.json"
    req.write_text(json.dumps(envelope))
    done = cli(home, "request", "submit", str(req))
    assert done.returncode == 0, done.stderr


ERASED = (SUBJECT, *MORE_SUBJECTS)
REQUESTS = ("req-pg-r1", "req-pg-r2", "req-pg-r3")


def _subject_rows(c: Cluster, who: Subject) -> int:
    """`who`'s items and checkpoints, by SQL."""
    return int(
        c.psql(
            f"SELECT (SELECT count(*) FROM store WHERE prefix LIKE 'users.{who.id}%') + "
            f"(SELECT count(*) FROM checkpoints WHERE metadata->>'user_id' = '{who.id}')"
        ).strip()
    )


def _epoch(c: Cluster) -> int:
    return int(c.psql("SELECT coalesce(max(epoch), 0) FROM erasure_epoch").strip())


@pytest.mark.slow
def test_a_pg_dump_restored_after_three_erasures_is_refused_then_replayed(home: Home, tmp_path: Path) -> None:
    bindir = embedded_bindir() or debian_bindir()
    assert bindir is not None, "PostgreSQL binaries missing (make bootstrap / make postgres)"
    with cluster(bindir, *SETTINGS, wal_segsize_mb=1) as c:
        indexed = c.has_vector()
        with agent(c, DATABASE, indexed=indexed) as a:
            mem = build_memory(a, DATABASE, people=(*ERASED, *BYSTANDERS))
            before = bystander_view(a, mem, erased=ERASED)
        dump = c.root / "agent.dump"  # in the cluster's folder: the `postgres` user writes it
        _tool(c, "pg_dump", "-Fc", "-f", str(dump), DATABASE)
        assert all(_subject_rows(c, who) > 0 for who in ERASED)

        targets_toml(home, c)
        assert cli(home, "keys", "generate", "--role", "engine").returncode == 0
        for rid, who in zip(REQUESTS, ERASED, strict=True):
            _submit(home, tmp_path, rid, who)
            run = cli(home, "request", "run", rid, "--json")
            assert run.returncode == 0, run.stderr[-3000:]
            assert json.loads(run.stdout)["probes_all_clear"] is True  # the pack may declare compressed values
        assert [_subject_rows(c, who) for who in ERASED] == [0, 0, 0]
        assert _epoch(c) == 3  # advanced with each erasure's deletes, in the agent's database

        # The team restores the dump taken before them: the three are back, the epoch table with them gone.
        _tool(c, "dropdb", DATABASE)
        _tool(c, "createdb", DATABASE)
        _tool(c, "pg_restore", "-d", DATABASE, str(dump))
        assert all(_subject_rows(c, who) > 0 for who in ERASED)
        status = json.loads(cli(home, "restore", "status", "--json").stdout)["targets"]
        assert [(t["store_epoch"], t["ledger_epoch"], t["restored"], t["pending"]) for t in status] == [
            (0, 3, True, list(REQUESTS))
        ]

        _submit(home, tmp_path, "req-pg-new", BYSTANDERS[0])
        refused = cli(home, "request", "run", "req-pg-new")
        assert refused.returncode == 6, refused.stderr
        assert refused.stderr.strip().count("\n") == 0 and "restored from a backup" in refused.stderr

        replay = cli(home, "restore", "replay", "--target", "prod-agent", "--json")
        assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
        out = json.loads(replay.stdout)
        assert [(r["original"], r["outcome"], r["found_by"]) for r in out["replayed"]] == [
            (rid, "all_clear", "store") for rid in REQUESTS
        ]  # found in the restored rows by the ledger's hashes
        assert out["restored"] is False and out["store_epoch"] == out["ledger_epoch"] == 3
        for r in out["replayed"]:
            verified = verify_offline(r["pack"], home)
            assert verified.returncode == 0, verified.stdout + verified.stderr
        assert [_subject_rows(c, who) for who in ERASED] == [0, 0, 0]

        # Every file of the cluster, through every decoded view (templates by bytes), and the home.
        scan = oracle.scan_tree(c.data, *ERASED, exclude=template_dirs(c))
        assert not scan, scan.summary()
        assert not scan.unread
        assert raw_hits(c.data) == []
        left = oracle.scan_home(home.root, home.evidence_root, *ERASED)
        assert left.hits == [], left.hits[:5]
        with agent(c, DATABASE, indexed=indexed) as a:
            for who in ERASED:
                subject_gone(a, mem, who)
            assert bystander_view(a, mem, erased=ERASED) == before

        again = cli(home, "request", "run", "req-pg-new", "--json")
        assert again.returncode == 0, again.stderr[-3000:]
        assert _epoch(c) == 4


@pytest.mark.slow
def test_a_pg_restore_clean_of_a_dump_older_than_the_epoch_table_is_noticed(home: Home, tmp_path: Path) -> None:
    """`pg_restore --clean` into the live database drops and recreates only what the dump holds: a dump
    taken before the first erasure has no `erasure_epoch`, so the table (and its epoch) would survive
    the restore while the subject came back. The epoch vouches for the tables it was written with."""
    bindir = embedded_bindir() or debian_bindir()
    assert bindir is not None, "PostgreSQL binaries missing (make bootstrap / make postgres)"
    with cluster(bindir, *SETTINGS, wal_segsize_mb=1) as c:
        with agent(c, DATABASE, indexed=c.has_vector()) as a:
            build_memory(a, DATABASE)
        dump = c.root / "agent.dump"
        _tool(c, "pg_dump", "-Fc", "-f", str(dump), DATABASE)  # before we ever touched the database
        targets_toml(home, c)
        assert cli(home, "keys", "generate", "--role", "engine").returncode == 0
        _submit(home, tmp_path, "req-pg-c1", SUBJECT)
        assert cli(home, "request", "run", "req-pg-c1", "--json").returncode == 0
        assert _subject_rows(c, SUBJECT) == 0 and _epoch(c) == 1

        _tool(c, "pg_restore", "--clean", "--if-exists", "-d", DATABASE, str(dump))
        assert _subject_rows(c, SUBJECT) > 0 and _epoch(c) == 1  # the subject is back; the epoch table stayed
        status = json.loads(cli(home, "restore", "status", "--json").stdout)["targets"]
        assert [(t["restored"], t["pending"]) for t in status] == [(True, ["req-pg-c1"])]
        _submit(home, tmp_path, "req-pg-c2", BYSTANDERS[0])
        refused = cli(home, "request", "run", "req-pg-c2")
        assert refused.returncode == 6, refused.stderr

        replay = cli(home, "restore", "replay", "--target", "prod-agent", "--json")
        assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
        assert [r["outcome"] for r in json.loads(replay.stdout)["replayed"]] == ["all_clear"]
        assert _subject_rows(c, SUBJECT) == 0
        status = json.loads(cli(home, "restore", "status", "--json").stdout)["targets"]
        assert [t["restored"] for t in status] == [False]
        assert cli(home, "request", "run", "req-pg-c2", "--json").returncode == 0
