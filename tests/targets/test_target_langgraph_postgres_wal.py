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
import subprocess
from pathlib import Path

import psycopg
import pytest

from erasure.config import Home
from tests.langgraph_postgres_fixtures import SUBJECT, agent, build_memory, subject_gone
from tests.pg_cluster import Cluster, cluster
from tests.targets.test_target_langgraph_postgres import RAW, _bindir, cli, submit, targets_toml

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


@pytest.mark.slow
def test_a_cycle_reads_again_only_the_segments_that_changed() -> None:
    """At 100k items (548 MiB, Debian's PostgreSQL 15) the WAL step took 59 cycles and 121-162 s, most
    of a request, and the server was busy in under 5% of it: every cycle read every segment again (up to
    66 x 16 MB). A cycle writes over one recycled segment and into the current one, and renames the
    others (same file, same bytes): only files that changed are read again, so the whole step reads the
    segments there at its start and a few a cycle."""
    from tasks.targets.langgraph_postgres import ERASER
    from tests.langgraph_postgres_fixtures import make_target

    with cluster(_bindir("pg18"), *ROOMY, wal_segsize_mb=1) as c, agent(c, "agent", indexed=False) as a:
        mem = build_memory(a, "agent", copies=1, turns=1, threads_per_person=1)
        spread_subject_over_segments(c, "agent")
        out = ERASER.erase(make_target(c, "agent"), SUBJECT)
        detail = {k: v for o in out.values() for k, v in o.detail.items()}
        assert wal_holding(c) == 0
        subject_gone(a, mem)
    assert detail["wal_cycles"] > OLD_LIMIT and detail["wal_segments_with_subject_after"] == 0, detail
    assert detail["wal_segments_read"] <= detail["wal_cycles_limit"] + 3 * detail["wal_cycles"], detail


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


def cycle_out_plain_wal(c: Cluster) -> None:
    """Switch + CHECKPOINT until no segment holds the subject in plain bytes (the test's own loop)."""
    for _ in range(60):
        if not wal_holding(c):
            return
        c.psql("SELECT pg_switch_wal(); CHECKPOINT")
    raise AssertionError("the WAL still holds the subject in plain bytes")


def compressed_images_only(c: Cluster, a: object) -> None:
    """The subject is in pg_wal/ only inside compressed full-page images: their rows were written long
    ago (those segments cycled out), then a bystander's change after a checkpoint wrote the pages that
    hold them into the WAL again, compressed."""
    cycle_out_plain_wal(c)
    # Other people's items updated: the pages they share with the subject's go into the WAL, compressed.
    c.psql(f"UPDATE store SET updated_at = updated_at WHERE prefix NOT LIKE '%{SUBJECT.id}%'", "agent")
    assert wal_holding(c) == 0


def fullpage_hits(c: Cluster, tmp: Path) -> int:
    """The test's own reading: `pg_waldump --save-fullpage` over the WAL from its oldest segment, and a
    plain byte search of the pages it writes out."""
    segs = sorted(p.name for p in (c.data / "pg_wal").iterdir() if len(p.name) == 24)
    out = tmp / f"pages-{len(list(tmp.iterdir()))}"
    subprocess.run(
        [str(c.bindir / "pg_waldump"), "-p", str(c.data / "pg_wal"), f"--save-fullpage={out}", segs[0]],
        capture_output=True,
        check=False,
    )
    return sum(1 for p in out.iterdir() if any(n in p.read_bytes().lower() for n in RAW))


@pytest.mark.slow
def test_compressed_full_page_images_are_read_decompressed_by_the_probe(home: Home, tmp_path: Path) -> None:
    """PostgreSQL 18, `wal_compression = pglz`: a byte scan of pg_wal/ sees nothing, the pages pg_waldump
    writes out hold the subject. An erasure that leaves them (wal_cycles = 0) is residue named in
    `pg_wal_fullpages/`, never all clear; the default erasure cycles them out and ends all clear."""
    from probes.targets import run as probe_run
    from tasks.targets.langgraph_postgres import ERASER
    from tests.langgraph_postgres_fixtures import make_target

    with (
        cluster(_bindir("pg18"), *ROOMY, "wal_compression=pglz", wal_segsize_mb=1) as c,
        agent(c, "agent", indexed=False) as a,
    ):
        mem = build_memory(a, "agent", copies=1, turns=1, threads_per_person=1)
        compressed_images_only(c, a)
        assert fullpage_hits(c, tmp_path) > 0  # the attack is real: only the decompressed pages show it
        leave = make_target(c, "agent", wal_cycles=0, log_dir=str(c.log_dir))
        fp = probe_run.take(leave, SUBJECT)
        ERASER.erase(leave, SUBJECT)
        got = probe_run.verify(leave, SUBJECT, fp)
        assert any(p.residue for p in got.probes if p.tier == "bytes"), got.probes
        assert any(f.folder == "pg_wal_fullpages" for f in got.residue_files), got.residue_files
        assert not any("WAL" in u.reason for u in got.unscanned)

        # The request with the eraser's own limit: every segment cycled out, read back decompressed.
        c.psql(f"INSERT INTO store (prefix, key, value) VALUES ('users.{SUBJECT.id}.memories', 'again', '{{}}')")
        compressed_images_only(c, a)
        targets_toml(home, c, wal_cycles=None)
        submit(home, tmp_path, "req-pgwal-2")
        run = cli(home, "request", "run", "req-pgwal-2", "--json")
        ver = json.loads((home.evidence_dir("req-pgwal-2") / "verification.json").read_text())
        assert run.returncode == 0, (ver.get("residue_files"), run.stderr[-3000:])
        assert ver["all_clear"] is True and not ver.get("unscanned_content"), ver.get("unscanned_content")
        assert fullpage_hits(c, tmp_path) == 0
        subject_gone(a, mem)
    steps = [json.loads(line) for line in (home.evidence_dir("req-pgwal-2") / "steps.jsonl").read_text().splitlines()]
    detail = next(s for s in steps if s.get("target") == "prod-agent" and s["step"] == "semantic")["detail"]
    assert detail["wal_compression_on"] == 1 and detail["wal_cycles"] > 1, detail


@pytest.mark.slow
def test_compressed_wal_without_a_pg_waldump_that_reads_it_is_declared(home: Home, tmp_path: Path) -> None:
    """Debian's PostgreSQL 15 (`wal_compression = on`): its pg_waldump cannot save page images, so the
    pack declares the WAL unread, naming the setting and what to do: exit 0, `erasedWithExceptions`."""
    with (
        cluster(_bindir("pg15"), *ROOMY, "wal_compression=on", wal_segsize_mb=1) as c,
        agent(c, "agent", indexed=False) as a,
    ):
        mem = build_memory(a, "agent", copies=1, turns=1, threads_per_person=1)
        compressed_images_only(c, a)
        targets_toml(home, c, wal_cycles=None)
        submit(home, tmp_path, "req-pgwal-3")
        run = cli(home, "request", "run", "req-pgwal-3", "--json")
        assert run.returncode == 0, run.stderr[-3000:]
        subject_gone(a, mem)
    ver = json.loads((home.evidence_dir("req-pgwal-3") / "verification.json").read_text())
    reasons = [u["reason"] for u in ver["unscanned_content"]]
    assert any(r.startswith("WAL not read: wal_compression = ") and "turn wal_compression off" in r for r in reasons)
    shown = cli(home, "pack", "show", str(home.evidence_dir("req-pgwal-3") / "proof.tar.gz"), "--json")
    assert json.loads(shown.stdout)["status"] == "erasedWithExceptions"
