"""Step records (one per request, [target,] step; the latest write wins) and the subject's footprint
in the store (ids only; it only grows), which later steps and reruns erase through."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

import apsw

from erasure.clocks import iso_utc
from erasure.request_records._common import json_text, writing
from erasure.tiers import CASCADE_ORDER, Tier

if TYPE_CHECKING:  # a pydantic model, imported where records are read (see `erasure.request_records.vault`)
    from erasure.models import StepRecord


def upsert_step(conn: apsw.Connection, record: StepRecord) -> None:
    """Write the step's record: exactly one row per (request, [target,] step), the latest write wins."""
    if record.target is not None:
        _upsert_target_step(conn, record)
        return
    with writing(conn):
        conn.execute(
            "INSERT INTO step_records(request_id, step, status, before_count, after_count, started_at, "
            "ended_at, removed_digest, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(request_id, step) DO UPDATE SET status = excluded.status, "
            "before_count = excluded.before_count, after_count = excluded.after_count, "
            "started_at = excluded.started_at, ended_at = excluded.ended_at, "
            "removed_digest = excluded.removed_digest, detail = excluded.detail",
            (
                record.request_id,
                record.step,
                record.status.value,
                record.before_count,
                record.after_count,
                iso_utc(record.started_at),
                None if record.ended_at is None else iso_utc(record.ended_at),
                record.removed_digest,
                json_text(record.detail),
            ),
        )


def _upsert_target_step(conn: apsw.Connection, record: StepRecord) -> None:
    with writing(conn):
        conn.execute(
            "INSERT INTO target_step_records(request_id, target, step, status, before_count, after_count, "
            "started_at, ended_at, removed_digest, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(request_id, target, step) DO UPDATE SET status = excluded.status, "
            "before_count = excluded.before_count, after_count = excluded.after_count, "
            "started_at = excluded.started_at, ended_at = excluded.ended_at, "
            "removed_digest = excluded.removed_digest, detail = excluded.detail",
            (
                record.request_id,
                record.target,
                record.step,
                record.status.value,
                record.before_count,
                record.after_count,
                iso_utc(record.started_at),
                None if record.ended_at is None else iso_utc(record.ended_at),
                record.removed_digest,
                json_text(record.detail),
            ),
        )


_STEP_COLUMNS = (
    "request_id",
    "step",
    "status",
    "before_count",
    "after_count",
    "started_at",
    "ended_at",
    "removed_digest",
    "detail",
)


def _records(conn: apsw.Connection, sql: str, cols: tuple[str, ...], request_id: str) -> list[StepRecord]:
    """The rows of `sql` (selecting `cols`, `detail` last) as step records."""
    from erasure.models import StepRecord

    cur = conn.execute(sql.format(cols=", ".join(cols)), (request_id,))
    return [StepRecord.model_validate({**dict(zip(cols, r, strict=True)), "detail": json.loads(r[-1])}) for r in cur]


def target_steps(conn: apsw.Connection, request_id: str) -> list[StepRecord]:
    """The step records of the request's other targets: by target name, tiers in cascade order."""
    cols = ("target", *_STEP_COLUMNS)
    records = _records(conn, "SELECT {cols} FROM target_step_records WHERE request_id = ?", cols, request_id)
    return sorted(records, key=lambda s: (s.target or "", _step_order(s.step)))


def _step_order(step: str) -> int:
    names = [t.value for t in CASCADE_ORDER]
    return names.index(step) if step in names else len(names)


def steps(conn: apsw.Connection, request_id: str) -> list[StepRecord]:
    """The request's step records: tiers in cascade order, then any other step by start time."""
    sql = "SELECT {cols} FROM step_records WHERE request_id = ? ORDER BY started_at, step"
    return sorted(_records(conn, sql, _STEP_COLUMNS, request_id), key=lambda s: _step_order(s.step))


def add_footprint(
    conn: apsw.Connection, request_id: str, tier: Tier | str, kind: str, keys: Iterable[str | int]
) -> int:
    """Record store keys of the subject's items (ids only; the footprint only grows). Returns how
    many were new."""
    t = Tier(tier).value
    with writing(conn):
        before = conn.total_changes()
        conn.executemany(
            "INSERT OR IGNORE INTO footprint(request_id, tier, kind, item_key) VALUES (?, ?, ?, ?)",
            ((request_id, t, kind, str(k)) for k in keys),
        )
        return int(conn.total_changes() - before)


def footprint(conn: apsw.Connection, request_id: str, tier: Tier | str, kind: str) -> set[str]:
    """The recorded keys of one kind in one tier."""
    return {
        r[0]
        for r in conn.execute(
            "SELECT item_key FROM footprint WHERE request_id = ? AND tier = ? AND kind = ?",
            (request_id, Tier(tier).value, kind),
        )
    }
