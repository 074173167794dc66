"""The server log is part of a `langgraph-postgres` target (issue 37, item 1).

The attack: an audited cluster (`log_statement = mod`) logs every INSERT with its parameters, and one
failing insert (a duplicate key) logs the key itself (`Key (prefix, key)=(users.<id>.contacts, <email>)
already exists`, with the default `log_min_error_statement = error`). After the erasure the log still
names the subject. The request must then end with the log file named as residue, or with the log
declared `beyond_reach` naming the setting: never plain `erased`, never exit 7 naming no file.

One cluster for the module (PostgreSQL 18 from the embedded wheel), restarted with each case's log
settings; each case builds its memory in a database of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from erasure.config import Home
from tests.langgraph_postgres_fixtures import SUBJECT, agent, build_memory, subject_gone
from tests.pg_cluster import Cluster, cluster
from tests.targets.test_target_langgraph_postgres import SETTINGS, _bindir, cli, submit, targets_toml

AUDITED = (*SETTINGS, "log_statement=mod")


@pytest.fixture(scope="module")
def pg() -> Iterator[Cluster]:
    with cluster(_bindir("pg18"), *AUDITED, wal_segsize_mb=1) as c:
        yield c


def _owned_folder(c: Cluster, name: str) -> Path:
    folder = c.root / name
    subprocess.run(["runuser", "-u", "postgres", "--"] * (os.geteuid() == 0) + ["mkdir", "-p", str(folder)], check=True)
    return folder


def _attack(c: Cluster, database: str, home: Home, tmp_path: Path, rid: str, extra_toml: str = "") -> dict:  # type: ignore[type-arg]
    """Build the memory in `database`, make one insert fail on the subject's key, run the request:
    the run, its verification.json and the pack's status."""
    c.psql(f"CREATE DATABASE {database}", "postgres")
    with agent(c, database, indexed=False) as a:
        mem = build_memory(a, database, copies=1, turns=1, threads_per_person=1)
        assert SUBJECT.email is not None
        contact = ("users", SUBJECT.id, "contacts")
        a.store.put(contact, SUBJECT.email, {"text": "primary address"})
        with psycopg.connect(c.url(database), autocommit=True) as conn, pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s)",
                (".".join(contact), SUBJECT.email, json.dumps({"text": "primary address"})),
            )
        targets_toml(home, c, log_dir=False, database=database, extra=extra_toml)
        submit(home, tmp_path, rid)
        run = cli(home, "request", "run", rid, "--json")
        subject_gone(a, mem)
    ver = json.loads((home.evidence_dir(rid) / "verification.json").read_text())
    shown = cli(home, "pack", "show", str(home.evidence_dir(rid) / "proof.tar.gz"), "--json")
    status = json.loads(shown.stdout)["status"] if shown.returncode == 0 else None
    return {"rc": run.returncode, "stderr": run.stderr, "ver": ver, "status": status}


def _names_subject(path: Path) -> bool:
    assert SUBJECT.email is not None
    return SUBJECT.email.lower().encode() in path.read_bytes().lower()


def _raw_subject(path: Path) -> bool:
    """Any identifier of the subject, in any case (a plain byte search, apart from the probes' matcher)."""
    data = path.read_bytes().lower()
    return any(s.lower().encode() in data for s in (SUBJECT.id, SUBJECT.email or "", SUBJECT.name or "") if s)


def _declared_log(ver: dict) -> list[dict]:  # type: ignore[type-arg]
    return [
        e for e in ver["exceptions"] if (e["kind"], e["item_key"]) == ("beyond_reach", "target:prod-agent:server_log")
    ]


@pytest.mark.slow
def test_a_duplicate_key_logged_outside_the_data_directory_is_declared_beyond_reach(
    pg: Cluster, home: Home, tmp_path: Path
) -> None:
    """(b) Debian's layout: the log outside the data directory, no `log_dir`: declared, naming the
    settings that put the subject there; exit 0, `erasedWithExceptions`, never plain `erased`."""
    logfile = _owned_folder(pg, "logs-b") / "postgresql-15-main.log"
    pg.restart(*AUDITED, "logging_collector=off", log=logfile)
    got = _attack(pg, "agent_b", home, tmp_path, "req-pglog-b")
    assert _names_subject(logfile)  # the attack is real: the log names the subject after the erasure
    assert got["rc"] == 0, got["stderr"][-3000:]
    declared = _declared_log(got["ver"])
    assert declared, got["ver"]["exceptions"]
    assert "log_statement = mod" in declared[0]["ground"] and "log_min_error_statement = error" in declared[0]["ground"]
    assert any(u["reason"].startswith("server log not readable") for u in got["ver"]["unscanned_content"])
    assert got["status"] == "erasedWithExceptions"
    assert SUBJECT.email is not None and SUBJECT.email not in json.dumps(got["ver"])


@pytest.mark.slow
def test_a_duplicate_key_logged_in_log_dir_is_residue_named_by_its_file(
    pg: Cluster, home: Home, tmp_path: Path
) -> None:
    """(c) The same layout with `log_dir` pointing at it: the log is scanned and the file named."""
    folder = _owned_folder(pg, "logs-c")
    pg.restart(*AUDITED, "logging_collector=off", log=folder / "postgresql-15-main.log")
    got = _attack(pg, "agent_c", home, tmp_path, "req-pglog-c", f'log_dir = "{folder}"\n')
    assert got["rc"] == 7, got["stderr"][-3000:]
    named = {(f.get("target"), f["file"]) for f in got["ver"]["residue_files"]}
    assert ("prod-agent", "log_dir/postgresql-15-main.log") in named, named
    assert not _declared_log(got["ver"])


@pytest.mark.slow
def test_a_duplicate_key_logged_by_the_collector_in_the_data_directory_is_residue_named_by_its_file(
    pg: Cluster, home: Home, tmp_path: Path
) -> None:
    """(a) `logging_collector` writing into the data directory: residue named by the log file (before,
    every run ended in exit 7 "residue in: bytes" naming no file)."""
    pg.restart(*AUDITED, "logging_collector=on", "log_directory=log")
    got = _attack(pg, "agent_a", home, tmp_path, "req-pglog-a")
    logs = sorted((pg.data / "log").iterdir())
    assert any(_names_subject(p) for p in logs)
    assert got["rc"] == 7, got["stderr"][-3000:]
    named = {f["file"] for f in got["ver"]["residue_files"] if f.get("target") == "prod-agent"}
    assert {f"data_dir/log/{p.name}" for p in logs if _names_subject(p)} <= named, named
    assert not _declared_log(got["ver"])

    # The same request again with `rewrite_logs`: the log rotated, the closed files rewritten without the
    # subject's lines: no byte of the subject in any log file, and the run ends clean.
    toml = home.root / "targets.toml"
    toml.write_text(toml.read_text() + "rewrite_logs = true\n")
    again = cli(home, "request", "run", "req-pglog-a", "--json")
    assert again.returncode == 0, again.stderr[-3000:]
    assert [p.name for p in sorted((pg.data / "log").iterdir()) if _raw_subject(p)] == []
    ver = json.loads((home.evidence_dir("req-pglog-a") / "verification.json").read_text())
    assert ver["all_clear"] is True and not ver.get("residue_files")
