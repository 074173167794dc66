"""Sticky erasure: ingest consults `erased_subjects` first and skips erased keys, fail-closed when
the list cannot be read; re-consent is explicit and audited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import apsw
import pytest
from typer.testing import CliRunner

from cli.suppression import app as suppression_app
from erasure.config import Home
from erasure.errors import NotFound
from erasure.sqlite import transaction
from memory import keyed, suppression
from memory.ingest import ingest
from memory.items import MemoryItem, read_jsonl
from memory.schema import create
from memory.store_census import COUNTED_TABLES

ONE = Path(__file__).parents[1] / "fixtures" / "ingest" / "one_item.jsonl"
OTHER = MemoryItem.model_validate(
    {
        "source": "chat",
        "source_ref": "conv-0002",
        "subject": {"id": "user-0002"},
        "content": "A question about parking. Thanks.",
    }
)


def _store(home: Home) -> apsw.Connection:
    return create(home.store_dir)


def _suppress(conn: apsw.Connection, source: str, ref: str) -> bool:
    with transaction(conn):
        return suppression.record(conn, source, ref, "req-test-1")


def _data_files(store: Path) -> list[Path]:
    return [
        p
        for p in store.rglob("*")
        if p.is_file() and not p.name.startswith("memory.db") and p.name != "audit-checkpoint.key"
    ]


def test_suppressed_item_is_skipped_and_counted(home: Home) -> None:
    conn = _store(home)
    assert _suppress(conn, "chat", "conv-0001") is True
    report = ingest(conn, home.store_dir, [*read_jsonl(ONE), OTHER])
    assert (report.ingested, report.skipped_suppressed, report.suppression_unreadable) == (1, 1, 0)
    assert conn.execute("SELECT source_ref FROM raw_archive").fetchall() == [("conv-0002",)]
    assert (
        cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM frames WHERE turn_key='chat/conv-0001'").fetchone())[0]
        == 0
    )
    assert (
        cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM blobs").fetchone())[0] == 0
    )  # only the suppressed item had one


def test_guard_runs_before_the_duplicate_check(home: Home) -> None:
    conn = _store(home)
    ingest(conn, home.store_dir, read_jsonl(ONE))
    _suppress(conn, "chat", "conv-0001")
    report = ingest(conn, home.store_dir, read_jsonl(ONE))
    assert (report.skipped_suppressed, report.skipped_duplicate) == (1, 0)


def test_record_is_idempotent(home: Home) -> None:
    conn = _store(home)
    assert _suppress(conn, "chat", "conv-0001") is True
    assert _suppress(conn, "chat", "conv-0001") is False
    assert len(suppression.list_suppressed(conn)) == 1


@pytest.mark.parametrize(
    "damage",
    [
        "DROP TABLE erased_subjects",
        "ALTER TABLE erased_subjects RENAME TO erased_subjects_old",
        "ALTER TABLE erased_subjects RENAME COLUMN source_ref TO ref",
    ],
)
def test_unreadable_list_fails_closed(home: Home, damage: str) -> None:
    conn = _store(home)
    conn.execute(damage)
    assert suppression.check(conn, "chat", "conv-0001") is suppression.Guard.unreadable
    assert suppression.is_suppressed(conn, "chat", "conv-0001") is True
    report = ingest(conn, home.store_dir, [*read_jsonl(ONE), OTHER])
    assert (report.ingested, report.skipped_suppressed, report.suppression_unreadable) == (0, 2, 2)
    for table in COUNTED_TABLES:
        if table != "erased_subjects":
            assert cast(tuple[Any, ...], conn.execute(f"SELECT count(*) FROM {table}").fetchone())[0] == 0, table
    assert _data_files(home.store_dir) == []


def test_allow_reopens_ingest_and_is_audited(home: Home) -> None:
    conn = _store(home)
    _suppress(conn, "chat", "conv-0001")
    assert suppression.allow(conn, "chat", "conv-0001", "subject re-consented in writing", "dpo") is True
    assert suppression.allow(conn, "chat", "conv-0001", "again", "dpo") is False
    event, fields = cast(tuple[Any, ...], conn.execute("SELECT event, fields FROM audit_log").fetchone())
    assert event == "suppression.allow"
    assert "conv-0001" not in fields and json.loads(fields)["source_ref"].keys() == {"commit"}
    report = ingest(conn, home.store_dir, read_jsonl(ONE))
    assert (report.ingested, report.skipped_suppressed) == (1, 0)


def test_cli_lists_and_allows(home: Home) -> None:
    conn = _store(home)
    _suppress(conn, "chat", "conv-0001")
    runner = CliRunner()
    listed = runner.invoke(suppression_app, ["list", "--json", "--home", str(home.root)])
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.output)
    # listed as keyed hashes: a source key can spell its person in any form
    assert (row["source"], row["source_ref"], row["request_ref"]) == (
        *keyed.hashed_key(conn, "chat", "conv-0001"),
        "req-test-1",
    )

    missing = runner.invoke(suppression_app, ["allow", "chat", "conv-9999", "--reason", "r", "--home", str(home.root)])
    assert isinstance(missing.exception, NotFound)
    ok = runner.invoke(
        suppression_app,
        ["allow", "chat", "conv-0001", "--reason", "re-consent", "--actor", "dpo", "--home", str(home.root)],
    )
    assert ok.exit_code == 0, ok.output
    assert suppression.list_suppressed(conn) == []


def test_reconsented_item_is_imported_again_over_its_redacted_skeleton(home: Home) -> None:
    conn = _store(home)
    ingest(conn, home.store_dir, read_jsonl(ONE))
    with transaction(conn):  # what the episodic erase leaves: a skeleton row, and the sticky key
        conn.execute("UPDATE raw_archive SET content=NULL, subject_id=NULL, erased_at='2025-01-01T00:00:00Z'")
        suppression.record(conn, "chat", "conv-0001", "req-test-1")
    assert ingest(conn, home.store_dir, read_jsonl(ONE)).skipped_suppressed == 1
    suppression.allow(conn, "chat", "conv-0001", "re-consent", "dpo")
    report = ingest(conn, home.store_dir, read_jsonl(ONE))
    assert (report.ingested, report.skipped_duplicate) == (1, 0)
    assert (
        cast(
            tuple[Any, ...],
            conn.execute(
                "SELECT count(*) FROM raw_archive WHERE source_ref='conv-0001' AND erased_at IS NULL"
            ).fetchone(),
        )[0]
        == 1
    )
    assert ingest(conn, home.store_dir, read_jsonl(ONE)).skipped_duplicate == 1
