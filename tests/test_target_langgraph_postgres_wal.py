"""The WAL of a `langgraph-postgres` target (issue 37, items 3 and 4).

Cycles: the eraser's `pg_switch_wal()` + `CHECKPOINT` cycles stop when no segment holds the subject;
their limit is derived from the server's `max_wal_size`, `wal_keep_size` and `wal_segment_size` (how
many segments can exist), not a constant. The attack: a store whose WAL holds the subject in more
segments than the old constant 16 (1 MB segments, `min_wal_size` large enough that a checkpoint keeps
them all as recycled files, which keep their old records until WAL is written over them).

Compressed WAL: with `wal_compression` on, full-page images are compressed and a byte scan of
`pg_wal/` cannot see them. The probe reads them decompressed with `pg_waldump --save-fullpage`
(PostgreSQL 16+) or declares the WAL unread (Debian's 15).
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from erasure.config import Home
from tests.langgraph_postgres_fixtures import SUBJECT, agent, build_memory, subject_gone
from tests.pg_cluster import Cluster, cluster
from tests.test_target_langgraph_postgres import RAW, _bindir, cli, submit, targets_toml

OLD_LIMIT = 16
ROUNDS = 40
"""Segments (1 MB each) the subject is written into before the erasure: well over the old limit."""
ROOMY = ("min_wal_size=80MB", "max_wal_size=80MB")


def wal_holding(c: Cluster) -> int:
    """Segments of pg_wal/ holding an identifier of the subject (a plain byte search of the test's own)."""
    wal = c.data / "pg_wal"
    return sum(1 for p in wal.iterdir() if p.is_file() and any(n in p.read_bytes().lower() for n in RAW))


def spread_subject_over_segments(c: Cluster, database: str) -> None:
    """One of the subject's items per megabyte of WAL, `ROUNDS` times: the padding goes to a table of the
    team's that the erasure never rewrites, so the rewrite writes little WAL over the old segments."""
    assert SUBJECT.email is not None
    with psycopg.connect(c.url(database), autocommit=True) as conn:
        conn.execute("CREATE TABLE audit_padding (t text)")
        for i in range(ROUNDS):
            conn.execute(
                "INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s)",
                (f"users.{SUBJECT.id}.memories", f"note-{i}", json.dumps({"text": f"reach me at {SUBJECT.email}"})),
            )
            conn.execute(
                "INSERT INTO audit_padding SELECT md5(random()::text) || md5(random()::text) "
                "FROM generate_series(1, 12000)"
            )
            conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")


@pytest.mark.slow
def test_a_store_whose_wal_holds_the_subject_in_more_segments_than_16_ends_all_clear(
    home: Home, tmp_path: Path
) -> None:
    """No `wal_cycles` in targets.toml: the limit comes from the server (80 MB / 1 MB segments), and the
    cycles run until no segment holds the subject: all clear, not residue because 16 ran out."""
    with cluster(_bindir("pg18"), *ROOMY, wal_segsize_mb=1) as c, agent(c, "agent", indexed=False) as a:
        mem = build_memory(a, "agent", copies=1, turns=1, threads_per_person=1)
        spread_subject_over_segments(c, "agent")
        assert wal_holding(c) > OLD_LIMIT + 4  # the attack is real
        targets_toml(home, c, wal_cycles=None)
        submit(home, tmp_path, "req-pgwal-1")
        run = cli(home, "request", "run", "req-pgwal-1", "--json")
        ver = json.loads((home.evidence_dir("req-pgwal-1") / "verification.json").read_text())
        assert run.returncode == 0, (ver.get("residue_files"), run.stderr[-3000:])
        assert wal_holding(c) == 0
        subject_gone(a, mem)
    steps = [json.loads(line) for line in (home.evidence_dir("req-pgwal-1") / "steps.jsonl").read_text().splitlines()]
    detail = next(s for s in steps if s.get("target") == "prod-agent" and s["step"] == "semantic")["detail"]
    assert detail["wal_cycles"] > OLD_LIMIT, detail
    assert detail["wal_cycles_limit"] >= 80 and detail["wal_cycles_limit_explicit"] == 0, detail
    assert detail["wal_segments_with_subject_after"] == 0
    assert ver["all_clear"] is True


def test_wal_cycles_is_an_override_and_absent_means_derived(tmp_path: Path) -> None:
    """Without the key the limit is the server's (None here); with it, the number given."""
    from erasure.errors import ConfigError
    from erasure.target_kinds.langgraph_postgres import postgres_target
    from erasure.targets import Target

    base = {"name": "db", "kind": "langgraph-postgres", "base_dir": tmp_path, "url": "postgresql://a@h/d"}
    base["namespace"] = ["users", "{subject_id}"]
    assert postgres_target(Target.model_validate(base)).wal_cycles is None
    assert postgres_target(Target.model_validate({**base, "wal_cycles": 500})).wal_cycles == 500
    with pytest.raises(ConfigError, match="wal_cycles"):
        postgres_target(Target.model_validate({**base, "wal_cycles": -1}))
