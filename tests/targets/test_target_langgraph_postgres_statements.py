"""`pg_stat_statements` of a `langgraph-postgres` target (issue 37, "Logs are part of the target").

The attack: the extension keeps a utility statement as written, literals and all, so a `DO` block the
team ran with the subject's email stays in `pg_stat_statements` after the erasure. The probe reads the
view's texts (residue named `pg_stat_statements-query-texts`); the eraser resets the statements that
name the subject; a view the probe cannot read is declared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from erasure.config import Home
from tests.langgraph_postgres_fixtures import SUBJECT, agent, build_memory, make_target, subject_gone
from tests.pg_cluster import cluster
from tests.targets.test_target_langgraph_postgres import SETTINGS, _bindir, cli, submit, targets_toml

PRELOAD = (*SETTINGS, "shared_preload_libraries=pg_stat_statements")


@pytest.mark.slow
def test_a_statement_text_naming_the_subject_is_reset_and_an_unreadable_view_is_declared(
    home: Home, tmp_path: Path
) -> None:
    from probes.targets.langgraph_postgres import PROBE

    assert SUBJECT.email is not None
    with cluster(_bindir("pg18"), *PRELOAD, wal_segsize_mb=1) as c:
        c.psql("CREATE EXTENSION pg_stat_statements")
        with agent(c, "agent", indexed=False) as a:
            mem = build_memory(a, "agent", copies=1, turns=1, threads_per_person=1)
            c.psql(f"DO $$BEGIN PERFORM 'welcome mail sent to {SUBJECT.email}'::text; END$$")
            kept = c.psql(f"SELECT count(*) FROM pg_stat_statements WHERE query ILIKE '%{SUBJECT.email}%'")
            assert int(kept) >= 1  # the attack is real: the literal is kept
            targets_toml(home, c)
            submit(home, tmp_path, "req-pgss-1")
            run = cli(home, "request", "run", "req-pgss-1", "--json")
            ver = json.loads((home.evidence_dir("req-pgss-1") / "verification.json").read_text())
            failing = [p for p in ver["probes"] if p["residue"]]
            assert run.returncode == 0, (failing, ver.get("residue_files"), run.stderr[-3000:])
            subject_gone(a, mem)
        left = c.psql(f"SELECT count(*) FROM pg_stat_statements WHERE query ILIKE '%{SUBJECT.email}%'")
        assert int(left) == 0
        methods = {p["method"] for p in ver["probes"]}
        assert "pg_stat_statements-query-texts" in methods and ver["all_clear"] is True
        steps = [
            json.loads(line) for line in (home.evidence_dir("req-pgss-1") / "steps.jsonl").read_text().splitlines()
        ]
        detail = next(s for s in steps if s.get("target") == "prod-agent" and s["step"] == "semantic")["detail"]
        assert detail["pg_stat_statements_naming_subject"] >= 1 and detail["pg_stat_statements_reset"] >= 1
        assert SUBJECT.email not in json.dumps(detail)

        # The library no longer preloaded: the view cannot be read, and the probe says so.
        c.restart(*SETTINGS)
        reasons = [u.reason for u in PROBE.unscanned(make_target(c, "agent", log_dir=str(c.log_dir)))]
        assert any(r.startswith("pg_stat_statements not readable") for r in reasons), reasons
