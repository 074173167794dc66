"""The pack writer and DPO attestation: reproducible bytes, no identifiers, status per tier, refusals."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from erasure.errors import ConfigError, InputError, NotFound
from erasure.tiers import CASCADE_ORDER
from proof import verify
from proof.errors import AlreadyAttested, EvidenceInvalid, IdentifierInPack, SameKeyRefused
from proof.pack import attest, write_pack
from proof.review import summary
from tests.proof_fixtures import (
    IDENTIFIERS,
    Keys,
    json_edit,
    jsonl_edit,
    make_evidence,
    make_keys,
    read_members,
)
from wire.format import TIERS

WRITTEN = ("attestation.txt", "manifest.json", "SHA256SUMS", "signatures/engine.intoto.json", "proof.tar.gz")


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return make_keys(tmp_path / "keys")


def test_same_evidence_gives_byte_identical_pack(tmp_path: Path, keys: Keys) -> None:
    a = make_evidence(tmp_path / "a")
    b = make_evidence(tmp_path / "b")
    first = write_pack(a, keys.engine).read_bytes()
    assert write_pack(a, keys.engine).read_bytes() == first  # rerun in place
    assert write_pack(b, keys.engine).read_bytes() == first  # another directory, same inputs


def test_tar_and_gzip_headers_are_normalised(tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_pack(make_evidence(tmp_path), keys.engine).read_bytes()
    assert data[4:8] == b"\0\0\0\0" and not data[3] & 0x08  # gzip mtime 0, no FNAME field
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)), mode="r:") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names) and names[0] == "req-0001"
    assert all(n == "req-0001" or n.startswith("req-0001/") for n in names)
    for m in members:
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", 0)
        assert m.mode == (0o755 if m.isdir() else 0o644) and (m.isdir() or m.isreg())
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1706745600")  # no longer read: the verifier accepts mtime 0 only
    later = write_pack(make_evidence(tmp_path / "sde"), keys.engine).read_bytes()
    with tarfile.open(fileobj=io.BytesIO(later), mode="r:gz") as tar:
        assert {m.mtime for m in tar.getmembers()} == {0}


def test_pack_contains_no_identifier_passed_as_forbidden(tmp_path: Path, keys: Keys) -> None:
    pack = write_pack(make_evidence(tmp_path), keys.engine, forbidden=IDENTIFIERS)
    _, files = read_members(pack)
    raw_tar = gzip.decompress(pack.read_bytes()).decode("utf-8", "replace").casefold()
    for ident in IDENTIFIERS:
        assert ident.casefold() not in raw_tar
        for name, data in files.items():
            assert ident.casefold() not in data.decode("utf-8", "replace").casefold(), name
    statement = json.loads(verify.unverified_payload(files["signatures/engine.intoto.json"], "e")[1])
    assert all(ident.casefold() not in json.dumps(statement).casefold() for ident in IDENTIFIERS)


@pytest.mark.parametrize(
    ("file", "where"), [("steps.jsonl", "detail"), ("verification.json", "exceptions"), ("request.json", "tenant_id")]
)
def test_identifier_in_evidence_refuses_the_pack_and_writes_nothing(
    tmp_path: Path, keys: Keys, file: str, where: str
) -> None:
    ev = make_evidence(tmp_path)
    if file == "steps.jsonl":
        (ev / file).write_bytes(
            jsonl_edit(
                (ev / file).read_bytes(), lambda rows: rows[2]["detail"].update(note="ALICE.Liddell@example.org")
            )
        )
    elif file == "verification.json":
        (ev / file).write_bytes(
            json_edit(
                (ev / file).read_bytes(),
                lambda d: d["exceptions"].append(
                    {"tier": "uploads", "kind": "residue", "item_key": "Alice Pleasance Liddell/cv.pdf"}
                ),
            )
        )
    else:
        (ev / file).write_bytes(json_edit((ev / file).read_bytes(), lambda d: d.update(tenant_id="subj-alice-7731")))
    with pytest.raises(IdentifierInPack) as err:
        write_pack(ev, keys.engine, forbidden=IDENTIFIERS)
    assert file in str(err.value)
    assert all(ident.casefold() not in str(err.value).casefold() for ident in IDENTIFIERS)
    assert not any((ev / name).exists() for name in WRITTEN)


def test_identifier_in_out_of_scope_text_is_caught_in_the_statement(tmp_path: Path, keys: Keys) -> None:
    ev = make_evidence(tmp_path)
    with pytest.raises(IdentifierInPack):
        write_pack(ev, keys.engine, forbidden=IDENTIFIERS, out_of_scope=["backups of +44 7700 900123"])
    assert not (ev / "proof.tar.gz").exists()


@pytest.mark.parametrize(
    ("scenario", "overall", "all_clear", "special"),
    [
        ("erased", "erased", True, {}),
        ("exceptions", "erasedWithExceptions", True, {"fine_tune": "erasedWithExceptions"}),
        ("residue", "notErased", False, {"vectors": "notErased"}),
        ("skipped", "erased", True, {"uploads": "skipped"}),
    ],
)
def test_status_per_tier(
    tmp_path: Path, keys: Keys, scenario: str, overall: str, all_clear: bool, special: dict[str, str]
) -> None:
    pack = write_pack(make_evidence(tmp_path, scenario=scenario), keys.engine)
    s = summary(pack, engine_pub=keys.engine_pem)
    assert (s["status"], s["all_clear"], s["signatures_verified"]) == (overall, all_clear, True)
    assert [r["tier"] for r in s["tiers"]] == list(TIERS)
    assert {r["tier"]: r["status"] for r in s["tiers"]} == {t: special.get(t, "erased") for t in TIERS}
    vectors = next(r for r in s["tiers"] if r["tier"] == "vectors")
    assert vectors["residue"] == (2 if scenario == "residue" else 0) and vectors["before"] == 6
    text = (pack.parent / "attestation.txt").read_text()
    assert f"Overall status:    {overall}" in text and "req-0001" in text and "gdpr-art17" in text
    for tier in TIERS:
        assert f"  {tier.ljust(14)}{special.get(tier, 'erased')}" in text
    manifest = json.loads((pack.parent / "manifest.json").read_text())
    assert (manifest["status"], manifest["all_clear"]) == (overall, all_clear)
    assert verify.verify_pack(pack, keys.engine_pem, None, require_dpo=False).status == overall


def test_missing_step_record_makes_the_tier_not_erased(tmp_path: Path, keys: Keys) -> None:
    ev = make_evidence(tmp_path, scenario="residue")
    (ev / "steps.jsonl").write_bytes(jsonl_edit((ev / "steps.jsonl").read_bytes(), lambda rows: rows.pop(5)))  # uploads
    s = summary(write_pack(ev, keys.engine))
    uploads = next(r for r in s["tiers"] if r["tier"] == "uploads")
    assert uploads == {"tier": "uploads", "status": "notErased", "before": None, "after": None, "residue": 0}


def test_all_clear_with_residue_is_refused(tmp_path: Path, keys: Keys) -> None:
    ev = make_evidence(tmp_path)
    (ev / "verification.json").write_bytes(
        json_edit((ev / "verification.json").read_bytes(), lambda d: d["probes"][3].update(residue=1))
    )
    with pytest.raises(EvidenceInvalid, match="all clear"):
        write_pack(ev, keys.engine)
    assert not any((ev / name).exists() for name in WRITTEN)


def test_missing_key_and_missing_evidence_are_refused(tmp_path: Path, keys: Keys) -> None:
    ev = make_evidence(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        write_pack(ev, tmp_path / "no-such-engine.pem")
    (ev / "subprocessor-receipts.jsonl").unlink()
    with pytest.raises(EvidenceInvalid, match=re.escape("subprocessor-receipts.jsonl")):
        write_pack(ev, keys.engine)
    assert not any((ev / name).exists() for name in WRITTEN)


def test_attest_and_summary_of_a_missing_pack_are_not_found(tmp_path: Path, keys: Keys) -> None:
    with pytest.raises(NotFound):
        attest(tmp_path / "none.tar.gz", keys.dpo)
    with pytest.raises(NotFound):
        summary(tmp_path)


def test_attest_refuses_the_engine_key(tmp_path: Path, keys: Keys) -> None:
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    before = pack.read_bytes()
    with pytest.raises(SameKeyRefused):
        attest(pack, keys.engine, engine_pub=keys.engine_pub)
    with pytest.raises(SameKeyRefused):
        attest(pack, keys.engine)  # without the trusted key too: the pack names its engine key
    assert pack.read_bytes() == before and not (pack.parent / "signatures/dpo.intoto.json").exists()


def test_attest_adds_the_dpo_envelope_and_the_pack_verifies(tmp_path: Path, keys: Keys) -> None:
    ev = make_evidence(tmp_path)
    pack = write_pack(ev, keys.engine)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub, attested_at="2024-02-02T10:00:00Z")
    result = verify.verify_pack(pack, keys.engine_pem, keys.dpo_pem)
    assert result.dpo_keyid is not None and "distinct-keys" in result.checks
    _, files = read_members(pack)
    assert files["signatures/dpo.intoto.json"] == (ev / "signatures/dpo.intoto.json").read_bytes()
    statement = json.loads(verify.unverified_payload(files["signatures/dpo.intoto.json"], "d")[1])
    assert {s["name"] for s in statement["subject"]} == {n for n in files if n != "signatures/dpo.intoto.json"}
    assert statement["predicate"]["attested_at"] == "2024-02-02T10:00:00Z"
    assert statement["predicate"]["statement"].startswith("I have reviewed")
    unchecked = summary(pack)  # no trusted key: the envelope proves nothing, so it is not called attested
    assert (unchecked["attested"], unchecked["dpo_attestation"], unchecked["dpo_keyid"]) == (False, "not checked", None)
    s = summary(pack, engine_pub=keys.engine_pem, dpo_pub=keys.dpo_pem)
    assert s["attested"] and s["dpo_keyid"] == result.dpo_keyid and s["attested_at"] == "2024-02-02T10:00:00Z"
    with pytest.raises(AlreadyAttested):
        attest(pack, keys.dpo, engine_pub=keys.engine_pub)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub, attested_at="2024-02-02T10:00:00Z", force=True)
    assert read_members(pack)[1] == files  # same inputs, same attestation bytes


def test_attest_is_reproducible(tmp_path: Path, keys: Keys) -> None:
    a, b = make_evidence(tmp_path / "a"), make_evidence(tmp_path / "b")
    packs = [write_pack(d, keys.engine) for d in (a, b)]
    for p in packs:
        attest(p, keys.dpo, engine_pub=keys.engine_pub, attested_at="2024-02-02T10:00:00Z")
    assert packs[0].read_bytes() == packs[1].read_bytes()


def test_attest_refuses_a_pack_that_does_not_verify(tmp_path: Path, keys: Keys) -> None:
    other = make_keys(tmp_path / "other")
    pack = write_pack(make_evidence(tmp_path), other.engine)
    with pytest.raises(Exception, match="signature") as err:
        attest(pack, keys.dpo, engine_pub=keys.engine_pub)
    assert getattr(err.value, "check", None) == "signature"


def test_rewrite_keeps_a_still_valid_attestation_and_drops_a_stale_one(tmp_path: Path, keys: Keys) -> None:
    ev = make_evidence(tmp_path)
    pack = write_pack(ev, keys.engine)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub)
    attested = pack.read_bytes()
    assert write_pack(ev, keys.engine).read_bytes() == attested  # idempotent rerun keeps the DPO's signature
    late = {"request_id": "req-0001", "processor": "proc-late", "ticket_id": "T-9", "status": "done"}
    (ev / "subprocessor-receipts.jsonl").write_bytes(
        (ev / "subprocessor-receipts.jsonl").read_bytes() + json.dumps(late).encode() + b"\n"
    )
    kept = {p: p.read_bytes() for p in ev.rglob("*") if p.is_file()}
    newer = write_pack(ev, keys.engine)
    assert {p: p.read_bytes() for p in kept} == kept  # the sealed run's loose files stay, its DPO envelope too
    assert (ev / "run-2/manifest.json").is_file() and not (ev / "run-2/signatures/dpo.intoto.json").exists()
    # the sealed pack is never rewritten (issue 34): the new evidence goes into the next pack, beside it
    assert newer == ev / "proof-2.tar.gz" and pack.read_bytes() == attested
    assert "signatures/dpo.intoto.json" not in read_members(newer)[1]
    result = verify.verify_pack(newer, keys.engine_pem, None, require_dpo=False)
    assert result.previous_pack == verify.verify_pack(pack, keys.engine_pem, keys.dpo_pem).pack_name
    assert write_pack(ev, keys.engine) == newer  # a draft awaiting attestation is replaced by its own rerun
    assert sorted(p.name for p in ev.glob("proof*.tar.gz")) == ["proof-2.tar.gz", "proof.tar.gz"]


def test_out_path_and_evidence_dir_are_independent(tmp_path: Path, keys: Keys) -> None:
    ev = make_evidence(tmp_path)
    target = write_pack(ev, keys.engine, out=tmp_path / "export" / "pack.tar.gz")
    assert target == tmp_path / "export" / "pack.tar.gz" and not (ev / "proof.tar.gz").exists()
    shutil.copy(target, tmp_path / "copy.tar.gz")
    attest(tmp_path / "copy.tar.gz", keys.dpo, engine_pub=keys.engine_pub)  # no evidence dir beside it
    verify.verify_pack(tmp_path / "copy.tar.gz", keys.engine_pem, keys.dpo_pem)
    assert not (ev / "signatures/dpo.intoto.json").exists()


def test_tier_lists_agree_with_the_domain() -> None:
    assert TIERS == tuple(t.value for t in CASCADE_ORDER) == verify.TIERS


@pytest.mark.parametrize(("lost_bystander", "overall"), [(False, "erased"), (True, "notErased")])
def test_records_in_the_shape_the_flows_write(tmp_path: Path, keys: Keys, lost_bystander: bool, overall: str) -> None:
    """steps.jsonl from `StepRecord`, verification.json from `probes.run.to_json` (no `exceptions`
    key, extra `failing_tiers`, a `bytes` probe): the writer and the verifier accept them."""
    from datetime import UTC, datetime, timedelta

    from erasure.models import StepRecord, StepStatus
    from probes.model import ProbeResult
    from probes.run import Verification, to_json

    ev = make_evidence(tmp_path)
    at = datetime(2024, 2, 1, 9, 0, tzinfo=UTC)
    steps = [
        StepRecord(
            request_id="req-0001",
            step=t,
            status=StepStatus.skipped,
            started_at=at,
            ended_at=at,
            detail={"reason": "not in the request's data classes"},
        )
        if t == "uploads"
        else StepRecord(
            request_id="req-0001",
            step=t,
            status=StepStatus.erased,
            before_count=4,
            after_count=0,
            started_at=at,
            ended_at=at,
            removed_digest="ab" * 32,
        )
        for t in TIERS
    ]
    (ev / "steps.jsonl").write_text(
        "".join(json.dumps(s.model_dump(mode="json"), sort_keys=True) + "\n" for s in steps)
    )
    probes = [
        ProbeResult(
            tier=t,
            method="rows",
            residue=0,
            bystanders_before=10,
            bystanders_after=9 if lost_bystander and t == "semantic" else 10,
        )
        for t in TIERS
    ]
    probes.append(ProbeResult(tier="bytes", method="scan", residue=0, bystanders_before=3, bystanders_after=3))
    doc = to_json(Verification(probes=probes), "req-0001", at + timedelta(minutes=30))  # after the audit step
    assert "exceptions" not in doc and doc["all_clear"] is not lost_bystander
    (ev / "verification.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    pack = write_pack(ev, keys.engine, forbidden=IDENTIFIERS)
    s = summary(pack, engine_pub=keys.engine_pem)
    assert s["status"] == overall and s["exceptions"] == []
    assert {r["tier"]: r["status"] for r in s["tiers"]}["uploads"] == "skipped"
    assert verify.verify_pack(pack, keys.engine_pem, None, require_dpo=False).status == overall


@pytest.mark.parametrize(
    ("attested_at", "why"),
    [
        ("yesterday", "not a UTC time"),
        ("2024-02-02T10:00:00+01:00", "not a UTC time"),
        ("2024-01-01T00:00:00Z", "earlier than the verification"),
    ],
)
def test_attest_refuses_an_attested_at_the_verifier_would_refuse(
    tmp_path: Path, keys: Keys, attested_at: str, why: str
) -> None:
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    before = pack.read_bytes()
    with pytest.raises(InputError, match=why):
        attest(pack, keys.dpo, attested_at=attested_at)  # without the engine key: no self-check to catch it
    assert pack.read_bytes() == before


@pytest.mark.parametrize(
    ("file", "change", "why"),
    [
        ("steps.jsonl", lambda rows: rows.append(dict(rows[3])), "repeats step vectors"),
        ("steps.jsonl", lambda rows: rows.reverse(), "out of order"),
        ("steps.jsonl", lambda rows: rows.append({**rows[0], "target": ""}), "target is not a name"),
        ("subprocessor-receipts.jsonl", lambda rows: rows[0].pop("request_id"), "another request"),
        ("subprocessor-receipts.jsonl", lambda rows: rows.append(dict(rows[0])), "two of one"),
        ("subprocessor-receipts.jsonl", lambda rows: rows[0].update(status="gone"), "status"),
    ],
)
def test_the_writer_refuses_evidence_the_verifier_would_refuse(
    tmp_path: Path, keys: Keys, file: str, change: Any, why: str
) -> None:
    ev = make_evidence(tmp_path)
    (ev / file).write_bytes(jsonl_edit((ev / file).read_bytes(), change))
    with pytest.raises(EvidenceInvalid, match=why):
        write_pack(ev, keys.engine)
    assert not (ev / "proof.tar.gz").exists()
