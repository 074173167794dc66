"""Intake: envelope validation (every bad input refused, nothing written), idempotent submission,
conflicts, the vault keeping identifiers to itself; and the rest of the vault API on a real engine db."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import apsw
import pytest
from pydantic import ValidationError

from erasure import request_records
from erasure.clocks import ClockPolicy
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import Conflict, InputError, NotFound
from erasure.models import (
    ErasureRequestEnvelope,
    StepRecord,
    StepStatus,
    load_envelope_file,
    removed_digest,
)
from erasure.sqlite import transaction
from erasure.states import RequestState
from erasure.tiers import CASCADE_ORDER, Tier
from wire.format import canonical_json, sha256_hex

FIXTURES = Path(__file__).parents[1] / "fixtures" / "requests"
POLICY = ClockPolicy()
NOW = datetime(2024, 2, 1, 12, 0, tzinfo=UTC)
TABLES = ("requests", "vault", "clock_events", "footprint", "step_records", "exceptions", "receipts", "engine_events")


def good() -> dict[str, Any]:
    return cast(dict[str, Any], json.loads((FIXTURES / "gdpr.json").read_text()))


IDENTIFIERS = ["subj-0001", "ada.example@example.org", "Ada Example", "+44 20 7946 0001"]


def write(tmp_path: Path, body: dict[str, Any] | str | bytes, name: str = "req.json") -> Path:
    p = tmp_path / name
    if isinstance(body, bytes):
        p.write_bytes(body)
    else:
        p.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
    return p


def intake(conn: apsw.Connection, path: Path, now: datetime = NOW) -> request_records.SubmitResult:
    """What `erasure request submit` does: parse the file, then vault it."""
    return request_records.submit(conn, load_envelope_file(path, now=now), now=now, policy=POLICY)


def snapshot(home: Home) -> tuple[dict[str, str], list[list[tuple[Any, ...]]]]:
    """Digests of the engine's files and the contents of every table."""
    files = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.engine_dir.iterdir())
        if not p.name.endswith("-shm")
    }
    conn = open_engine(home.engine_db)
    try:
        tables = [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in TABLES]
    finally:
        conn.close()
    return files, tables


@pytest.fixture
def engine(home: Home, tmp_path: Path) -> apsw.Connection:
    """An engine db that already holds one request (so 'unchanged' means something)."""
    conn = open_engine(home.engine_db)
    body = good()
    body["request_id"] = "req-existing"
    intake(conn, write(tmp_path, body, "existing.json"))
    return conn


# --- every bad input ---------------------------------------------------------------------------


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def f(d: dict[str, Any]) -> dict[str, Any]:
        d[key] = value
        return d

    return f


def _drop(key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def f(d: dict[str, Any]) -> dict[str, Any]:
        del d[key]
        return d

    return f


BAD: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], str]] = {
    "unknown legal basis": (_set("legal_basis", "LGPD"), "legal_basis: Input should be"),
    "legal basis lowercase": (_set("legal_basis", "gdpr"), "legal_basis:"),
    "data class outside the nine": (_set("data_classes", ["working", "backups"]), "data_classes.1:"),
    "data classes empty": (_set("data_classes", []), "data_classes: must name at least one tier"),
    "data classes a string": (_set("data_classes", "working"), "data_classes:"),
    "naive datetime": (_set("received_at", "2024-01-31T10:00:00"), "received_at: must include a timezone"),
    "date without time": (_set("received_at", "2024-01-31"), "received_at: must include a timezone"),
    "epoch number": (_set("received_at", 1706695200), "received_at: must be an ISO 8601"),
    "not a date": (_set("received_at", "yesterday"), "received_at:"),
    "received in the future": (_set("received_at", "2024-02-01T12:06:00Z"), "received_at: is in the future"),
    "empty subject": (_set("subject", {}), "subject: must name the subject"),
    "subject of nulls": (_set("subject", {"id": None, "email": None}), "subject: must name the subject"),
    "subject null": (_set("subject", None), "subject: must name the subject"),
    "subject without id": (_set("subject", {"email": "x@example.org"}), "subject.id: required"),
    "subject bad email": (_set("subject", {"id": "s1", "email": "not-an-email"}), "subject.email:"),
    "no subject": (_drop("subject"), "subject: required"),
    "no reason": (_drop("reason"), "reason: required"),
    "empty reason": (_set("reason", ""), "reason:"),
    "empty proof ref": (_set("requester_identity_proof_ref", ""), "requester_identity_proof_ref:"),
    "extra field": (_set("priority", "high"), "priority: unknown field"),
    "request_id ../x": (_set("request_id", "../x"), "request_id: must be 1-128 characters"),
    "request_id a/b": (_set("request_id", "a/b"), "request_id:"),
    "request_id NUL": (_set("request_id", "a\x00b"), "request_id:"),
    "request_id space": (_set("request_id", "a b"), "request_id:"),
    "request_id trailing newline": (_set("request_id", "ab\n"), "request_id:"),
    "request_id dotfile": (_set("request_id", ".hidden"), "request_id:"),
    "request_id backslash": (_set("request_id", "a\\b"), "request_id:"),
    "request_id 129 chars": (_set("request_id", "r" * 129), "request_id:"),
    "request_id empty": (_set("request_id", ""), "request_id:"),
    "request_id a number": (_set("request_id", 7), "request_id:"),
    "tenant_id ../t": (_set("tenant_id", "../t"), "tenant_id:"),
    "reason has subject id": (_set("reason", "erase SUBJ-0001 please"), "reason: must not contain"),
    "reason has email": (_set("reason", "from ada.example@example.org"), "subject's email"),
    "reason has email local part": (_set("reason", "user Ada.Example asked"), "reason: must not contain"),
    "reason has full name": (_set("reason", "ada example asked"), "subject's name"),
    "reason has a name token": (_set("reason", "per EXAMPLE's letter"), "subject's name"),
    "reason has phone": (_set("reason", "called from +44 20 7946 0001"), "subject's phone"),
    "reason has phone digits": (_set("reason", "called 020-7946-0001 (442079460001)"), "subject's phone"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_envelope_refused_and_nothing_written(
    case: str, engine: apsw.Connection, home: Home, tmp_path: Path
) -> None:
    mutate, message = BAD[case]
    body = mutate(good())
    path = write(tmp_path, body)
    before = snapshot(home)
    with pytest.raises(InputError) as info:
        intake(engine, path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ")
    assert message in msg
    assert "\n" not in msg
    for ident in [*IDENTIFIERS, "Ada", "7946"]:
        assert ident.lower() not in msg.lower()
    assert snapshot(home) == before


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"request_id": "r1",', "line 1 column 21"),
        ('{\n  "request_id": "r1"\n  "tenant_id": "t"\n}', "line 3 column 3"),
        ("", "line 1 column 1"),
        ("[1, 2]", "envelope: must be a JSON object"),
        ('{"request_id": "a", "request_id": "b"}', "duplicate key 'request_id'"),
        ('{"reason": NaN}', "NaN is not allowed in JSON"),
    ],
)
def test_malformed_json_refused_with_line_and_column(
    text: str, where: str, engine: apsw.Connection, home: Home, tmp_path: Path
) -> None:
    path = write(tmp_path, text)
    before = snapshot(home)
    with pytest.raises(InputError, match=f"^{re.escape(str(path))}: {re.escape(where)}"):
        intake(engine, path)
    assert snapshot(home) == before


def test_unreadable_files_refused(engine: apsw.Connection, home: Home, tmp_path: Path) -> None:
    before = snapshot(home)
    with pytest.raises(InputError, match="cannot read"):
        intake(engine, tmp_path / "missing.json")
    with pytest.raises(InputError, match="not UTF-8"):
        intake(engine, write(tmp_path, b'{"reason": "\xff"}'))
    with pytest.raises(InputError, match="larger than"):
        intake(engine, write(tmp_path, " " * 1_000_001))
    assert snapshot(home) == before


def test_clock_skew_of_a_few_minutes_is_accepted(engine: apsw.Connection, tmp_path: Path) -> None:
    body = good()
    body["received_at"] = "2024-02-01T12:04:00Z"
    assert intake(engine, write(tmp_path, body)).created


def test_submit_refuses_an_envelope_from_the_future_of_its_now(engine: apsw.Connection, home: Home) -> None:
    env = load_envelope_file(FIXTURES / "gdpr.json")
    before = snapshot(home)
    with pytest.raises(InputError, match="future"):
        request_records.submit(engine, env, now=env.received_at - timedelta(hours=1), policy=POLICY)
    assert snapshot(home) == before


# --- idempotence and conflicts -----------------------------------------------------------------


def test_same_id_different_body_is_a_conflict(engine: apsw.Connection, home: Home, tmp_path: Path) -> None:
    intake(engine, write(tmp_path, good()))
    before = snapshot(home)
    for key, value in [
        ("reason", "another lawful reason"),
        ("tenant_id", "other"),
        ("legal_basis", "CCPA"),
        ("data_classes", ["working"]),
    ]:
        body = good()
        body[key] = value
        with pytest.raises(Conflict, match="req-gdpr-0001 already exists with a different body"):
            intake(engine, write(tmp_path, body))
    assert snapshot(home) == before


def test_identical_envelope_twice_is_idempotent(engine: apsw.Connection, home: Home, tmp_path: Path) -> None:
    first = intake(engine, write(tmp_path, good()))
    assert first.created
    before = snapshot(home)
    # Same envelope, written differently: other key order, data classes listed out of order with a
    # duplicate, the same instant in another offset.
    body = good()
    body["data_classes"] = [*reversed([t.value for t in CASCADE_ORDER]), "working"]
    body["received_at"] = "2024-01-31T08:30:00Z"
    again = intake(engine, write(tmp_path, dict(reversed(list(body.items())))))
    assert not again.created
    assert (again.deadline, again.target) == (first.deadline, first.target)
    assert snapshot(home) == before
    for table in ("requests", "vault"):
        assert engine.execute(f"SELECT COUNT(*) FROM {table} WHERE request_id = ?", ("req-gdpr-0001",)).fetchone() == (
            1,
        )
    assert engine.execute(
        "SELECT COUNT(*) FROM engine_events WHERE request_id = ? AND event = ?", ("req-gdpr-0001", "request.submitted")
    ).fetchone() == (1,)


def test_submit_stores_row_vault_and_event(engine: apsw.Connection, tmp_path: Path) -> None:
    res = intake(engine, write(tmp_path, good()))
    row = request_records.get(engine, "req-gdpr-0001")
    assert row.state is RequestState.submitted
    assert row.received_at == datetime(2024, 1, 31, 8, 30, tzinfo=UTC)  # +01:00 stored as UTC
    assert row.data_classes == CASCADE_ORDER
    assert row.deadline == res.deadline == datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    assert row.target == res.target == res.deadline - timedelta(days=7)
    raw = engine.execute(
        "SELECT received_at, deadline FROM requests WHERE request_id = ?", ("req-gdpr-0001",)
    ).fetchone()
    assert raw == ("2024-01-31T08:30:00.000000Z", "2024-02-29T23:59:59.999999Z")
    (detail,) = cast(
        tuple[Any, ...],
        engine.execute(
            "SELECT detail FROM engine_events WHERE request_id = ? AND event = ?",
            ("req-gdpr-0001", "request.submitted"),
        ).fetchone(),
    )
    assert json.loads(detail) == {"legal_basis": "GDPR", "deadline": "2024-02-29T23:59:59.999999Z"}
    env = request_records.load_envelope(engine, "req-gdpr-0001")
    assert env == load_envelope_file(FIXTURES / "gdpr.json")
    assert row.envelope_sha256 == sha256_hex(canonical_json(env.canonical_dict()))


def test_identifiers_stay_in_the_vault(engine: apsw.Connection, tmp_path: Path) -> None:
    intake(engine, write(tmp_path, good()))
    request_records.set_state(engine, "req-gdpr-0001", RequestState.running, "cascade started")
    request_records.pause(engine, "req-existing", "identity verification", now=NOW, policy=POLICY)

    def dump(table: str) -> str:
        return json.dumps(engine.execute(f"SELECT * FROM {table}").fetchall(), default=str).lower()

    everywhere_else = "".join(dump(t) for t in TABLES if t != "vault")
    vault = dump("vault")
    for ident in [*IDENTIFIERS, "ada.example"]:
        assert ident.lower() in vault
        assert ident.lower() not in everywhere_else
    assert "privacy portal" not in everywhere_else  # the reason stays in the vault too


def test_each_request_gets_its_own_salt(engine: apsw.Connection, tmp_path: Path) -> None:
    intake(engine, write(tmp_path, good()))
    a, b = request_records.subject_salt(engine, "req-gdpr-0001"), request_records.subject_salt(engine, "req-existing")
    assert len(a) == len(b) == 32
    assert a != b
    assert request_records.commit_identifier(a, "subj-0001") == hashlib.sha256(a + b"subj-0001").hexdigest()
    assert request_records.commit_identifier(a, "subj-0001") != request_records.commit_identifier(b, "subj-0001")
    with pytest.raises(NotFound):
        request_records.subject_salt(engine, "nope")


def test_all_fixture_envelopes_submit(home: Home) -> None:
    conn = open_engine(home.engine_db)
    for path in sorted(FIXTURES.glob("*.json")):
        assert intake(conn, path, now=datetime(2024, 8, 1, tzinfo=UTC)).created
    ccpa = request_records.get(conn, "req-ccpa-0001")
    assert ccpa.data_classes == (Tier.working, Tier.episodic, Tier.uploads)
    assert ccpa.deadline == datetime(2024, 4, 16, 23, 59, 59, 999999, tzinfo=UTC)
    assert [r.request_id for r in request_records.list_requests(conn)] == [
        "req-gdpr-0001",
        "req-ccpa-0001",
        "req-popia-0001",
        "req-ke-0001",
    ]


# --- the rest of the vault API -----------------------------------------------------------------


def test_get_state_list_and_events(engine: apsw.Connection, tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        request_records.get(engine, "missing")
    with pytest.raises(NotFound):
        request_records.load_envelope(engine, "missing")
    with pytest.raises(NotFound):
        request_records.set_state(engine, "missing", RequestState.running)
    intake(engine, write(tmp_path, good()))
    request_records.set_state(engine, "req-gdpr-0001", RequestState.blocked, "held: 12 items")
    row = request_records.get(engine, "req-gdpr-0001")
    assert (row.state, row.state_detail) == (RequestState.blocked, "held: 12 items")
    assert [r.request_id for r in request_records.list_requests(engine, [RequestState.blocked])] == ["req-gdpr-0001"]
    assert [r.request_id for r in request_records.list_requests(engine, ["submitted"])] == ["req-existing"]
    assert request_records.list_requests(engine, []) == []
    with pytest.raises(ValueError):
        request_records.set_state(engine, "req-gdpr-0001", "done")
    seq = request_records.log_event(engine, "req-gdpr-0001", "attestation.signed", {"keyid": "ab12"})
    assert engine.execute("SELECT event, detail FROM engine_events WHERE seq = ?", (seq,)).fetchone() == (
        "attestation.signed",
        '{"keyid":"ab12"}',
    )


def _record(step: str, status: StepStatus, before: int | None, after: int | None, started: datetime) -> StepRecord:
    return StepRecord(
        request_id="req-existing",
        step=step,
        status=status,
        before_count=before,
        after_count=after,
        started_at=started,
        ended_at=started + timedelta(seconds=1),
        removed_digest=removed_digest(["1", "2"]),
        detail={"batches": 1},
    )


def test_step_records_one_row_per_step(engine: apsw.Connection) -> None:
    t0 = datetime(2024, 2, 2, tzinfo=UTC)
    request_records.upsert_step(engine, _record("vectors", StepStatus.running, 5, None, t0))
    request_records.upsert_step(engine, _record("working", StepStatus.erased, 2, 0, t0 + timedelta(minutes=1)))
    request_records.upsert_step(engine, _record("vectors", StepStatus.erased, 5, 0, t0 + timedelta(minutes=2)))
    request_records.upsert_step(engine, _record("preflight", StepStatus.skipped, None, None, t0))
    assert engine.execute("SELECT COUNT(*) FROM step_records").fetchone() == (3,)
    got = request_records.steps(engine, "req-existing")
    assert [s.step for s in got] == ["working", "vectors", "preflight"]
    vec = got[1]
    assert (vec.status, vec.before_count, vec.after_count) == (StepStatus.erased, 5, 0)
    assert vec.started_at == t0 + timedelta(minutes=2)
    assert vec == _record("vectors", StepStatus.erased, 5, 0, t0 + timedelta(minutes=2))


@pytest.mark.parametrize(
    "bad",
    [
        {"started_at": datetime(2024, 1, 1)},
        {"before_count": -1},
        {"removed_digest": "XYZ"},
        {"step": "../vectors"},
        {"status": "done"},
        {"extra": 1},
    ],
)
def test_step_record_validation(bad: dict[str, Any]) -> None:
    base: dict[str, Any] = {
        "request_id": "r1",
        "step": "vectors",
        "status": "erased",
        "started_at": datetime(2024, 1, 1, tzinfo=UTC),
    }
    with pytest.raises(ValidationError):
        StepRecord.model_validate({**base, **bad})


def test_removed_digest_is_sorted_length_prefixed_sha256() -> None:
    ids = ["b", "a", "ab"]
    h = hashlib.sha256()
    for s in ["a", "ab", "b"]:
        h.update(len(s.encode()).to_bytes(8, "big") + s.encode())
    assert removed_digest(ids) == h.hexdigest()
    assert removed_digest(reversed(ids)) == h.hexdigest()
    # Length prefixes keep ["ab", "c"] and ["a", "bc"] apart.
    assert removed_digest(["ab", "c"]) != removed_digest(["a", "bc"])
    # Ints are hashed as their decimal strings and sorted as strings ("10" < "9").
    assert removed_digest([9, 10]) == removed_digest(["10", "9"])
    assert removed_digest([]) == hashlib.sha256().hexdigest()
    assert removed_digest(["é"]) == hashlib.sha256((2).to_bytes(8, "big") + "é".encode()).hexdigest()


def test_footprint_only_grows_and_counts_new_keys(engine: apsw.Connection) -> None:
    assert request_records.add_footprint(engine, "req-existing", Tier.episodic, "frame", [1, 2, 3]) == 3
    assert request_records.add_footprint(engine, "req-existing", "episodic", "frame", ["3", "4"]) == 1
    assert request_records.add_footprint(engine, "req-existing", Tier.vectors, "chunk", ["c1"]) == 1
    assert request_records.footprint(engine, "req-existing", Tier.episodic, "frame") == {"1", "2", "3", "4"}
    assert request_records.footprint(engine, "req-existing", Tier.episodic, "chunk") == set()
    with pytest.raises(ValueError):
        request_records.add_footprint(engine, "req-existing", "backups", "frame", ["1"])


def test_writes_inside_a_callers_transaction_roll_back_with_it(engine: apsw.Connection) -> None:
    with pytest.raises(RuntimeError), transaction(engine):
        request_records.add_footprint(engine, "req-existing", Tier.uploads, "blob", ["k1"])
        request_records.log_event(engine, "req-existing", "x")
        raise RuntimeError("crash between the writes and the commit")
    assert request_records.footprint(engine, "req-existing", Tier.uploads, "blob") == set()
    with transaction(engine):
        request_records.add_footprint(engine, "req-existing", Tier.uploads, "blob", ["k1"])
    assert request_records.footprint(engine, "req-existing", Tier.uploads, "blob") == {"k1"}


def test_exceptions_idempotent_by_key(engine: apsw.Connection) -> None:
    a = request_records.open_exception(
        engine, "req-existing", Tier.fine_tune, "model_trained_on_subject", "model-7", {"corpus_version": 3}
    )
    b = request_records.open_exception(
        engine, "req-existing", "fine_tune", "model_trained_on_subject", "model-7", {"corpus_version": 4}
    )
    c = request_records.open_exception(
        engine, "req-existing", Tier.subprocessors, "subprocessor_not_confirmed", "crm", ground="Art.17(3)(b)"
    )
    assert a == b != c
    rows = request_records.exceptions(engine, "req-existing")
    assert [(r.tier, r.item_key, r.detail) for r in rows] == [
        ("fine_tune", "model-7", {"corpus_version": 3}),
        ("subprocessors", "crm", {}),
    ]
    assert rows[1].ground == "Art.17(3)(b)"
    request_records.close_exception(engine, c)
    assert [r.exception_id for r in request_records.exceptions(engine, "req-existing", open_only=True)] == [a]
    with pytest.raises(NotFound):
        request_records.close_exception(engine, 999)


def test_receipts_upsert_keeps_first_request_time(engine: apsw.Connection) -> None:
    t0 = datetime(2024, 2, 2, tzinfo=UTC)
    request_records.upsert_receipt(engine, "req-existing", "crm", "pending", ticket_id="T-1", attempts=1, now=t0)
    request_records.upsert_receipt(
        engine,
        "req-existing",
        "crm",
        "done",
        attempts=2,
        completed_at=t0 + timedelta(hours=1),
        detail={"http": 200},
        now=t0 + timedelta(hours=1),
    )
    request_records.upsert_receipt(engine, "req-existing", "analytics", "failed", now=t0)
    got = request_records.receipts(engine, "req-existing")
    assert [r.processor for r in got] == ["analytics", "crm"]
    crm = got[1]
    assert (crm.status, crm.ticket_id, crm.attempts, crm.detail) == ("done", "T-1", 2, {"http": 200})
    assert (crm.requested_at, crm.completed_at) == (t0, t0 + timedelta(hours=1))
    assert got[0].attempts == 0
    with pytest.raises(ValueError):
        request_records.upsert_receipt(engine, "req-existing", "crm", "deleted")


def test_canonical_json() -> None:
    assert canonical_json({"b": 1, "a": [1, {"d": None, "c": "é"}]}) == '{"a":[1,{"c":"é","d":null}],"b":1}'.encode()
    assert sha256_hex(b"") == hashlib.sha256(b"").hexdigest()
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
    with pytest.raises(TypeError):
        canonical_json({"x": datetime(2024, 1, 1)})


def test_envelope_model_directly() -> None:
    env = ErasureRequestEnvelope.model_validate(good())
    assert env.received_at.tzinfo is UTC
    with pytest.raises(ValidationError):
        env.reason = "x"  # frozen: the vaulted envelope is not edited in place


def test_an_exception_can_name_the_byte_scope_but_no_made_up_tier(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from erasure.engine import open_engine

    conn = open_engine(tmp_path / "engine.db")
    request_records.open_exception(conn, "req-1", "bytes", "residue", "verification")
    assert [e.tier for e in request_records.exceptions(conn, "req-1")] == ["bytes"]
    with pytest.raises(ValueError):
        request_records.open_exception(conn, "req-1", "bytez", "residue", "verification")


def test_an_exception_that_recurs_after_it_was_closed_is_open_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from erasure.engine import open_engine

    conn = open_engine(tmp_path / "engine.db")
    eid = request_records.open_exception(conn, "req-1", "bytes", "residue", "verification")
    request_records.close_exception(conn, eid)
    assert request_records.exceptions(conn, "req-1", open_only=True) == []
    again = request_records.open_exception(conn, "req-1", "bytes", "residue", "verification")
    assert again == eid
    assert [e.exception_id for e in request_records.exceptions(conn, "req-1", open_only=True)] == [eid]
