"""Issue 9, case 8: sticky erasure by identity, not only by `(source, source_ref)`.

The erasure keeps keyed hashes (HMAC under the store's secret) of the erased subject's normalised id,
email and phone in `erased_identities`, in the same transaction as its `erased_subjects` rows. At
ingest an item whose subject matches one of them (id, email or phone, in any spelling) is held: not
stored in any tier, counted as `held_erased_identity`, shown by `erasure ingest`, and let in only after
an explicit, audited `erasure suppression allow --identity-of FILE:LINE`. A namesake (same name, no
shared id, email or phone) is not held."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from cli.main import app
from erasure.config import Home
from erasure.errors import InputError
from erasure.subject import Subject
from memory import suppression
from memory.ingest import ingest
from memory.items import MemoryItem
from memory.schema import create
from memory.store_census import COUNTED_TABLES
from service.consent import allow_reingest
from tasks import runner
from tasks.runner import run_cascade
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store, owned_counts, store_bytes, submit

REQUEST = "req-ann-1"
PHRASE = "marmalade-coloured kayak"


def item(source: str, ref: str, subject: dict[str, str], n: int) -> dict[str, Any]:
    return {
        "source": source,
        "source_ref": ref,
        "subject": subject,
        "content": f"Item {n}: the {PHRASE} number {n} needs a new invoice.",
        "training": True,
    }


ANN = SUBJECT.model_dump(exclude_none=True)
# lines 1-5 are the erased subject again; 6 is a namesake; 7 is the bystander
LINES = [
    item("chat", "conv-9001", ANN, 1),  # same subject, new ref
    item("whatsapp", "conv-1001", ANN, 2),  # erased ref, other source
    item("chat", "conv-9003", {"id": "acct-55", "email": "Annabel.Quist@Example.ORG"}, 3),  # new id, same email
    item("sms", "sms-9004", {"id": "acct-56", "phone": "020 7946 0001"}, 4),  # phone, national spelling
    item("chat", "conv-9005", {"id": "SUBJ-ANN-7731"}, 5),  # the id in another case
    item("chat", "conv-9006", {"id": "acct-57", "name": "Annabel Quist", "email": "aq@elsewhere.example"}, 6),
    item("chat", "conv-9007", BYSTANDER.model_dump(exclude_none=True), 7),
]
HELD_LINES = [1, 2, 3, 4, 5]


@pytest.fixture
def erased(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    build_store(home, tmp_path)
    submit(home, REQUEST)
    run_cascade(REQUEST, home)
    return home


def jsonl(tmp_path: Path, lines: list[dict[str, Any]], name: str = "again.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


def cli(h: Home, *args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--home", str(h.root)])


def counts(h: Home) -> dict[str, int]:
    conn = create(h.store_dir)
    try:
        return {
            t: int(cast(tuple[Any, ...], conn.execute(f"SELECT count(*) FROM {t}").fetchone())[0])
            for t in COUNTED_TABLES
        }
    finally:
        conn.close()


def test_erasure_records_keyed_hashes_of_id_email_and_phone(erased: Home) -> None:
    conn = create(erased.store_dir)
    try:
        rows = cast(
            list[tuple[str, str, str]],
            conn.execute("SELECT kind, digest, erasure_ref FROM erased_identities ORDER BY kind").fetchall(),
        )
    finally:
        conn.close()
    kinds = sorted({r[0] for r in rows})
    assert kinds == ["email", "id", "phone"]  # no name: a namesake must not be held
    assert {r[2] for r in rows} == {REQUEST}
    assert all(len(r[1]) == 64 for r in rows)
    data = store_bytes(erased).lower()
    for v in SUBJECT.identifiers():
        assert v.lower().encode() not in data


def test_items_of_an_erased_identity_are_held_in_no_tier(erased: Home, tmp_path: Path) -> None:
    before = counts(erased)
    result = cli(erased, "ingest", str(jsonl(tmp_path, LINES)), "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    report = json.loads(result.stdout)
    assert (report["held_erased_identity"], report["ingested"], report["skipped_suppressed"]) == (5, 2, 0)
    after = counts(erased)
    assert after["raw_archive"] == before["raw_archive"] + 2
    owned = owned_counts(erased, SUBJECT)
    assert owned["entities"] == 1  # the namesake's person entity (line 6), nothing else of the subject's
    assert {k: v for k, v in owned.items() if k != "entities"} == dict.fromkeys(set(owned) - {"entities"}, 0)
    conn = create(erased.store_dir)
    try:
        held = {(LINES[i - 1]["source"], LINES[i - 1]["source_ref"]) for i in HELD_LINES}
        stored = set(conn.execute("SELECT source, source_ref FROM raw_archive WHERE erased_at IS NULL").fetchall())
        assert not stored & held
        assert {("chat", "conv-9006"), ("chat", "conv-9007")} <= stored
    finally:
        conn.close()
    data = store_bytes(erased).lower()
    for n in HELD_LINES:
        assert f"item {n}: the {PHRASE}".encode() not in data
    for v in ["acct-55", "acct-56", "subj-ann-7731", "annabel.quist@example.org", "7946 0001"]:
        assert v.encode() not in data


def test_erasure_ingest_says_how_many_were_held(erased: Home, tmp_path: Path) -> None:
    result = cli(erased, "ingest", str(jsonl(tmp_path, LINES)))
    assert result.exit_code == 0, (result.output, result.exception)
    assert "held_erased_identity" in result.output and "--identity-of" in result.output
    assert "Annabel" not in result.output and "acct-55" not in result.output


def test_suppression_check_names_the_held_lines_by_number(erased: Home, tmp_path: Path) -> None:
    path = jsonl(tmp_path, LINES)
    result = cli(erased, "suppression", "check", str(path), "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    assert json.loads(result.stdout) == [{"line": n, "verdict": "held_erased_identity"} for n in HELD_LINES]
    assert counts(erased)["raw_archive"] == 4  # nothing written


def test_allow_identity_of_one_line_lets_only_that_identity_in(erased: Home, tmp_path: Path) -> None:
    path = jsonl(tmp_path, LINES)
    ok = cli(
        erased,
        "suppression",
        "allow",
        "--identity-of",
        f"{path}:3",
        "--reason",
        "re-consent in writing, ticket 88",
        "--actor",
        "dpo",
    )
    assert ok.exit_code == 0, (ok.output, ok.exception)
    assert "email" in ok.output
    for v in SUBJECT.identifiers():
        assert v.casefold() not in ok.output.casefold()
    # line 3 shares only the email: it comes in; the others stay held (the id and phone are still erased)
    report = json.loads(cli(erased, "ingest", str(path), "--json").stdout)
    assert (report["held_erased_identity"], report["ingested"]) == (4, 3)
    conn = create(erased.store_dir)
    try:
        assert (
            cast(
                tuple[Any, ...],
                conn.execute("SELECT count(*) FROM audit_log WHERE event='suppression.allow_identity'").fetchone(),
            )[0]
            == 1
        )
        assert {r[0] for r in conn.execute("SELECT kind FROM erased_identities")} == {"id", "phone"}
    finally:
        conn.close()


def test_allow_identity_reason_is_checked_at_the_door(erased: Home, tmp_path: Path) -> None:
    path = jsonl(tmp_path, LINES)
    refused = cli(erased, "suppression", "allow", "--identity-of", f"{path}:1", "--reason", "Annabel Quist asked again")
    assert isinstance(refused.exception, InputError) and "name" in str(refused.exception)
    assert "annabel" not in str(refused.exception).casefold()
    missing = cli(erased, "suppression", "allow", "--identity-of", f"{path}:7", "--reason", "re-consent")
    assert missing.exception is not None and missing.exception.exit_code == 4  # the bystander is not erased
    bad = cli(erased, "suppression", "allow", "--identity-of", f"{path}:99", "--reason", "re-consent")
    assert isinstance(bad.exception, InputError)
    conn = create(erased.store_dir)
    try:
        assert cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM erased_identities").fetchone())[0] == 4
    finally:
        conn.close()


def test_reconsent_of_the_request_releases_its_identities(erased: Home, tmp_path: Path) -> None:
    out = allow_reingest(erased, REQUEST, "subject-reconsented (case-88)", "dpo")
    assert out["identities"] == 4
    report = json.loads(cli(erased, "ingest", str(jsonl(tmp_path, LINES)), "--json").stdout)
    assert (report["held_erased_identity"], report["ingested"]) == (0, 7)


def test_an_unreadable_identity_list_holds_everything(erased: Home, tmp_path: Path) -> None:
    before = counts(erased)
    conn = create(erased.store_dir)
    try:
        conn.execute("DROP TABLE erased_identities")
        items = [MemoryItem.model_validate(x) for x in LINES]
        report = ingest(conn, erased.store_dir, items)
    finally:
        conn.close()
    assert (report.ingested, report.held_erased_identity, report.suppression_unreadable) == (0, 7, 7)
    assert counts(erased) == before  # (opening the store again re-creates the empty table)


def test_identity_hashes_commit_with_the_erasure(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_store(home, tmp_path)
    submit(home, REQUEST)

    def fail(point: str) -> None:
        if point == "mid:working:0":  # inside the first batch's transaction, after its sticky rows
            raise RuntimeError("injected failure")

    monkeypatch.setattr(runner, "maybe_crash", fail)
    with pytest.raises(RuntimeError, match="injected"):
        run_cascade(REQUEST, home, batch_size=1)
    conn = create(home.store_dir)
    try:
        assert cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM erased_identities").fetchone())[0] == 0
        assert suppression.list_suppressed(conn) == []
    finally:
        conn.close()


MATCHES = [
    (Subject(id=" subj-ann-7731 "), True),
    (Subject(id="x", email="ANNABEL.QUIST@example.org"), True),
    (Subject(id="x", phone="+44 (0)20 7946-0001"), True),
    (Subject(id="x", phone="0044 20 7946 0001"), True),
    (Subject(id="x", phone="020 7946 0001"), True),
    (Subject(id="x", name="Annabel Quist"), False),  # a namesake
    (Subject(id="subj-ann-77310"), False),
    (Subject(id="x", phone="+44 20 7946 0002"), False),
]


def test_matching_is_by_identity_and_never_by_name(home: Home) -> None:
    from erasure.sqlite import transaction

    conn = create(home.store_dir)
    try:
        with transaction(conn):
            suppression.record_identity(conn, SUBJECT, REQUEST)
        for s, held in MATCHES:
            assert (suppression.check_identity(conn, s) is suppression.Guard.suppressed) is held, s
    finally:
        conn.close()


def test_confirmed_aliases_are_sticky_by_id_too(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from erasure import request_records
    from erasure.engine import open_engine

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    build_store(home, tmp_path)
    assert SUBJECT.email is not None
    alias = {"id": "acct-ann-2", "email": SUBJECT.email}
    conn = create(home.store_dir)
    ingest(conn, home.store_dir, [MemoryItem.model_validate(item("chat", "conv-8001", alias, 8))])
    conn.close()
    submit(home, REQUEST)
    engine = open_engine(home.engine_db)
    request_records.confirm_aliases(engine, REQUEST, 1)
    engine.close()
    run_cascade(REQUEST, home)
    # the alias id alone (no email) comes back under a new ref: held
    report = json.loads(
        cli(home, "ingest", str(jsonl(tmp_path, [item("chat", "conv-8002", {"id": "ACCT-ANN-2"}, 9)])), "--json").stdout
    )
    assert (report["held_erased_identity"], report["ingested"]) == (1, 0)
