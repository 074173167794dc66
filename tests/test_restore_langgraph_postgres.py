"""Issue 26 for kind `langgraph-postgres`: the erasure epoch lives in a table of the agent's own database,
advanced in the eraser's delete transaction. A `pg_dump` (custom format) taken before an erasure and
restored after it (database dropped, created, `pg_restore`) brings the subject and the old epoch back:
the target is then refused (exit 6) until `erasure restore replay` re-applies the erasure (the subject
found in the restored rows by the ledger's keyed hashes), after which requests run again.
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
from tests.langgraph_postgres_fixtures import BYSTANDERS, SUBJECT, agent, build_memory, bystander_view, subject_gone
from tests.pg_cluster import DATABASE, RUN_AS, SUPERUSER, Cluster, cluster, debian_bindir, embedded_bindir
from tests.test_target_langgraph_postgres import SETTINGS, cli, targets_toml


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


def _subject_rows(c: Cluster) -> int:
    """The subject's items and checkpoints, by SQL."""
    return int(
        c.psql(
            f"SELECT (SELECT count(*) FROM store WHERE prefix LIKE 'users.{SUBJECT.id}%') + "
            f"(SELECT count(*) FROM checkpoints WHERE metadata->>'user_id' = '{SUBJECT.id}')"
        ).strip()
    )


def _epoch(c: Cluster) -> int:
    return int(c.psql("SELECT coalesce(max(epoch), 0) FROM erasure_epoch").strip())


@pytest.mark.slow
def test_a_pg_dump_restored_after_an_erasure_is_refused_then_replayed(home: Home, tmp_path: Path) -> None:
    bindir = embedded_bindir() or debian_bindir()
    assert bindir is not None, "PostgreSQL binaries missing (make bootstrap / make postgres)"
    with cluster(bindir, *SETTINGS, wal_segsize_mb=1) as c:
        indexed = c.has_vector()
        with agent(c, DATABASE, indexed=indexed) as a:
            mem = build_memory(a, DATABASE)
            before = bystander_view(a, mem)
        dump = c.root / "agent.dump"  # in the cluster's folder: the `postgres` user writes it
        _tool(c, "pg_dump", "-Fc", "-f", str(dump), DATABASE)
        assert _subject_rows(c) > 0

        targets_toml(home, c)
        assert cli(home, "keys", "generate", "--role", "engine").returncode == 0
        _submit(home, tmp_path, "req-pg-r1", SUBJECT)
        run = cli(home, "request", "run", "req-pg-r1", "--json")
        assert run.returncode == 0, run.stderr[-3000:]
        assert _subject_rows(c) == 0 and _epoch(c) == 1  # advanced with the deletes, in the agent's database

        # The team restores yesterday's dump: the subject is back, and the epoch table is gone with it.
        _tool(c, "dropdb", DATABASE)
        _tool(c, "createdb", DATABASE)
        _tool(c, "pg_restore", "-d", DATABASE, str(dump))
        assert _subject_rows(c) > 0
        status = json.loads(cli(home, "restore", "status", "--json").stdout)["targets"]
        assert [(t["store_epoch"], t["ledger_epoch"], t["restored"], t["pending"]) for t in status] == [
            (0, 1, True, ["req-pg-r1"])
        ]

        _submit(home, tmp_path, "req-pg-r2", BYSTANDERS[0])
        refused = cli(home, "request", "run", "req-pg-r2")
        assert refused.returncode == 6, refused.stderr
        assert refused.stderr.strip().count("\n") == 0 and "restored from a backup" in refused.stderr

        replay = cli(home, "restore", "replay", "--target", "prod-agent", "--json")
        assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
        out = json.loads(replay.stdout)
        assert [(r["original"], r["outcome"], r["found_by"]) for r in out["replayed"]] == [
            ("req-pg-r1", "all_clear", "store")
        ]  # found in the restored rows by the ledger's hashes
        assert out["restored"] is False and out["store_epoch"] == out["ledger_epoch"] == 1
        assert _subject_rows(c) == 0
        with agent(c, DATABASE, indexed=indexed) as a:
            subject_gone(a, mem)
            assert bystander_view(a, mem) == before

        again = cli(home, "request", "run", "req-pg-r2", "--json")
        assert again.returncode == 0, again.stderr[-3000:]
        assert _epoch(c) == 2
