"""Attacks on what a proof pack signs, one test per attack, each rejected by the named check of
proof.verify: envelopes and keys, the manifest and SHA256SUMS, the audit-log evidence, the claims.

Baseline: a real, attested pack (`tests.tamper_fixtures`). "Re-signed" attacks are those of an insider who
holds the engine key: only the later checks can catch them.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from proof import verify
from proof.dsse import sign_envelope
from proof.keys import keyid, load_private_key
from proof.pack import write_pack
from proof.statement import dpo_statement
from tests.proof_fixtures import (
    Keys,
    audit_document,
    audit_key,
    audit_log,
    evidence_of,
    json_edit,
    jsonl_edit,
    leaf_hash,
    make_evidence,
    make_keys,
    multiproof,
    read_members,
    rehash_log,
    repack,
    reseal,
    resign_statement,
    sign_checkpoint,
    sums_of,
)
from tests.tamper_fixtures import DPO_ENV, ENGINE_ENV, Pack, bump_first_digit, pack_fixture  # noqa: F401  (the fixture)
from wire.format import canonical_json, envelope_bytes

# --- envelopes and keys --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def other_pack(pack: Pack) -> dict[str, bytes]:
    """Another request's pack, signed by the same engine key."""
    root = pack.tmp / "other"
    path = write_pack(make_evidence(root, request_id=pack.top, scenario="exceptions"), pack.keys.engine)
    return read_members(path)[1]


def test_envelope_payload_swapped_from_another_pack(pack: Pack, other_pack: dict[str, bytes]) -> None:
    env = json.loads(pack.files[ENGINE_ENV])
    env["payload"] = json.loads(other_pack[ENGINE_ENV])["payload"]
    files = {**pack.files, ENGINE_ENV: envelope_bytes(env)}
    assert pack.check_of(repack(pack.top, files)) == "signature"


def test_envelope_replaced_by_another_packs_valid_envelope(pack: Pack, other_pack: dict[str, bytes]) -> None:
    files = {**pack.files, ENGINE_ENV: other_pack[ENGINE_ENV]}
    assert pack.check_of(repack(pack.top, files), dpo=False) == "subjects"


@pytest.fixture(scope="module")
def mallory(pack: Pack) -> Keys:
    """Keys of someone who is neither the engine nor the DPO."""
    return make_keys(pack.tmp / "mallory")


def test_signature_by_the_wrong_key(pack: Pack, mallory: Keys) -> None:
    forged = reseal(dict(pack.files), mallory.engine)
    assert pack.check_of(repack(pack.top, forged), dpo=False) == "signature"


def test_signature_with_the_right_keyid_but_a_forged_sig(pack: Pack, mallory: Keys) -> None:
    env = json.loads(pack.files[ENGINE_ENV])
    forged_sig = sign_envelope(base64.b64decode(env["payload"]), load_private_key(mallory.engine))
    env["signatures"][0]["sig"] = forged_sig["signatures"][0]["sig"]
    files = {**pack.files, ENGINE_ENV: envelope_bytes(env)}
    assert pack.check_of(repack(pack.top, files)) == "signature"


def test_dpo_envelope_signed_with_the_engine_key(pack: Pack) -> None:
    env = json.loads(pack.files[DPO_ENV])
    forged = sign_envelope(base64.b64decode(env["payload"]), load_private_key(pack.keys.engine))
    files = {**pack.files, DPO_ENV: envelope_bytes(forged)}
    assert pack.check_of(repack(pack.top, files)) == "signature"


@pytest.mark.parametrize("name", [DPO_ENV, ENGINE_ENV])
def test_envelope_reformatted_around_its_signature(pack: Pack, name: str) -> None:
    """No signature covers the DPO's envelope (nor, without it, the engine's): its bytes must still be
    the writer's, or the pack's digest changes while every check passes. Found by the property tests."""
    env = json.loads(pack.files[name])
    for reformatted in (pack.files[name] + b" ", json.dumps(env).encode(), pack.files[name].replace(b"  ", b"\t")):
        files = {**pack.files, name: reformatted}
        assert pack.check_of(repack(pack.top, files), dpo=name == DPO_ENV, why="canonical form") == "signature"


@pytest.mark.parametrize(
    "change",
    [
        lambda env: env["signatures"].append(dict(env["signatures"][0])),  # the same signature twice
        lambda env: env.update(note="signed on a Tuesday"),  # a field the writer never writes
        lambda env: env["signatures"][0].update(cert="x"),
    ],
    ids=["repeated-signature", "extra-field", "extra-signature-field"],
)
def test_dpo_envelope_padded_with_what_no_signature_covers(pack: Pack, change: Any) -> None:
    """Found by the property tests: the DPO's envelope with its one signature repeated verified."""
    env = json.loads(pack.files[DPO_ENV])
    change(env)
    files = {**pack.files, DPO_ENV: envelope_bytes(env)}
    assert pack.check_of(repack(pack.top, files)) == "signature"


def test_engine_key_given_as_the_dpo_key(pack: Pack) -> None:
    with pytest.raises(verify.SameKeyError) as err:
        verify.verify_pack(pack.path, pack.keys.engine_pem, pack.keys.engine_pem)
    assert err.value.check == "distinct-keys"


def test_payload_type_changed_and_resigned(pack: Pack) -> None:
    env = json.loads(pack.files[ENGINE_ENV])
    forged = sign_envelope(
        base64.b64decode(env["payload"]), load_private_key(pack.keys.engine), payload_type="application/json"
    )
    files = {**pack.files, ENGINE_ENV: envelope_bytes(forged)}
    assert pack.check_of(repack(pack.top, files), dpo=False) == "statement"


def test_predicate_type_changed_and_resigned(pack: Pack) -> None:
    env = json.loads(pack.files[ENGINE_ENV])
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicateType"] = "https://slsa.dev/provenance/v1"
    forged = sign_envelope(canonical_json(statement), load_private_key(pack.keys.engine))
    files = {**pack.files, ENGINE_ENV: envelope_bytes(forged)}
    assert pack.check_of(repack(pack.top, files), dpo=False) == "statement"


def test_file_left_out_of_the_statement_and_resigned(pack: Pack) -> None:
    env = json.loads(pack.files[ENGINE_ENV])
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["subject"] = [s for s in statement["subject"] if s["name"] != "subprocessor-receipts.jsonl"]
    forged = sign_envelope(canonical_json(statement), load_private_key(pack.keys.engine))
    files = {**pack.files, ENGINE_ENV: envelope_bytes(forged)}
    assert pack.check_of(repack(pack.top, files), dpo=False) == "subjects"


# --- manifest and SHA256SUMS (re-signed) ---------------------------------------------------------


def test_manifest_lies_about_a_size_and_is_resigned(pack: Pack) -> None:
    files = {k: v for k, v in pack.files.items() if k != DPO_ENV}
    files["manifest.json"] = json_edit(files["manifest.json"], lambda m: m["files"][0].update(size=1))
    files["SHA256SUMS"] = sums_of(files)
    resign_statement(files, pack.keys.engine)
    assert pack.check_of(repack(pack.top, files), dpo=False) == "checksums"


def test_sha256sums_disagrees_and_is_resigned(pack: Pack) -> None:
    files = {k: v for k, v in pack.files.items() if k != DPO_ENV}
    files["SHA256SUMS"] = files["SHA256SUMS"].replace(
        b"  steps.jsonl\n", b"  steps.jsonl\n" + b"0" * 64 + b"  notes.txt\n"
    )
    resign_statement(files, pack.keys.engine)
    assert pack.check_of(repack(pack.top, files), dpo=False) == "checksums"


# --- audit-log redaction evidence (re-signed) ----------------------------------------------------
# The pack's audit document is tests.proof_fixtures.audit_document(20): entries 5, 10 and 15 hold the
# subject's redacted email, entry 20 is the request's erasure.audit_redaction; before at 18, after at 20.


def _audit_attack(pack: Pack, change: Any, **kw: Any) -> str:
    files = {**pack.files, "audit-log-redaction.json": json_edit(pack.files["audit-log-redaction.json"], change)}
    return pack.check_of(pack.resealed(files), dpo=False, **kw)


def _forged(pack: Pack, doc: dict[str, Any], **kw: Any) -> str:
    files = {**pack.files, "audit-log-redaction.json": (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()}
    return pack.check_of(pack.resealed(files), dpo=False, **kw)


def _flip(h: str) -> str:
    return ("0" if h[0] != "0" else "1") + h[1:]


def _reproved(doc: dict[str, Any], log: list[dict[str, Any]] | None = None) -> None:
    """Make `doc`'s multiproof anew for the entries it now holds (a forger with the whole log)."""
    leaves = [leaf_hash(bytes.fromhex(e["entry_hash"])) for e in (log or audit_log(20))]
    doc["multiproof"] = [h.hex() for h in multiproof(leaves, {e["seq"] - 1 for e in doc["entries"]})]


def test_audit_entry_rewritten(pack: Pack) -> None:
    """Entry 10 is not the entry the after tree holds: its recomputed hash is another leaf."""
    assert (
        _audit_attack(
            pack, lambda d: d["entries"][1]["fields"].update(items=99), why="the entries' multiproof does not verify"
        )
        == "audit-log"
    )


def _dropping(index: int) -> Any:
    """A forgery: entry `index` left out of the evidence, the multiproof made for the rest."""

    def forge(d: dict[str, Any]) -> None:
        d["entries"].pop(index)
        _reproved(d)

    return forge


def test_audit_redacted_entry_dropped_from_the_evidence(pack: Pack) -> None:
    assert _audit_attack(pack, _dropping(1), why="redacted entry 10 is not among the entries") == "audit-log"


def test_audit_redaction_entry_dropped_from_the_evidence(pack: Pack) -> None:
    """Without the request's erasure.audit_redaction entry nothing binds the redaction to the request."""
    assert _audit_attack(pack, _dropping(-1), why="records no redaction for this request") == "consistency"


def test_audit_multiproof_tampered(pack: Pack) -> None:
    def forge(d: dict[str, Any]) -> None:
        d["multiproof"][1] = _flip(d["multiproof"][1])

    assert _audit_attack(pack, forge, why="the entries' multiproof does not verify") == "audit-log"


def test_audit_multiproof_of_other_entries(pack: Pack) -> None:
    """A genuine multiproof, but of another set of entries (5, 10 and 20, not 15): it proves those."""
    leaves = [leaf_hash(bytes.fromhex(e["entry_hash"])) for e in audit_log(20)]

    def forge(d: dict[str, Any]) -> None:
        d["multiproof"] = [h.hex() for h in multiproof(leaves, {4, 9, 19})]

    assert _audit_attack(pack, forge, why="the entries' multiproof does not verify") == "audit-log"


def test_audit_multiproof_with_a_hash_to_spare(pack: Pack) -> None:
    assert (
        _audit_attack(
            pack,
            lambda d: d["multiproof"].append(d["after"]["root_hash"]),
            why="the entries' multiproof does not verify",
        )
        == "audit-log"
    )


def test_audit_v2_inclusion_proof_tampered(pack: Pack) -> None:
    """Packs of the earlier format are still verified, their proofs with them."""
    doc = audit_document(20, v2=True)
    files = {**pack.files, "audit-log-redaction.json": (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()}
    verify.verify_bytes(pack.resealed(files), pack.keys.engine_pem, None, require_dpo=False)  # as written
    doc["entries"][0]["inclusion"][2] = _flip(doc["entries"][0]["inclusion"][2])
    assert _forged(pack, doc, why="entry 5's inclusion proof does not verify") == "audit-log"


def test_audit_v2_inclusion_proof_of_another_leaf(pack: Pack) -> None:
    """A genuine path, moved to another entry: it proves the leaf it was made for, not this one."""
    doc = audit_document(20, v2=True)
    doc["entries"][0]["inclusion"] = doc["entries"][1]["inclusion"]
    assert _forged(pack, doc, why="inclusion proof does not verify") == "audit-log"


def test_audit_consistency_proof_tampered(pack: Pack) -> None:
    def forge(d: dict[str, Any]) -> None:
        d["consistency"][0] = _flip(d["consistency"][0])

    assert _audit_attack(pack, forge, why="the consistency proof does not verify") == "audit-log"


def test_audit_consistency_proof_dropped(pack: Pack) -> None:
    assert (
        _audit_attack(pack, lambda d: d.update(consistency=[]), why="the consistency proof does not verify")
        == "audit-log"
    )


def test_audit_log_forked_and_resigned_with_a_foreign_key(pack: Pack) -> None:
    """History rewritten and both checkpoints re-signed by a key that is not the store's, while the
    document still names the store's key: the signatures fail."""
    log = audit_log(20)
    log[4]["fields"]["items"] = 99
    rehash_log(log)
    doc = evidence_of(log, key=audit_key(seed=666), named_key=audit_key())
    assert _forged(pack, doc, why="checkpoint signature does not verify") == "audit-log"


def test_audit_checkpoint_signature_forged(pack: Pack) -> None:
    def forge(d: dict[str, Any]) -> None:
        d["after"]["at"] = "2030-01-01T00:00:00.000000Z"

    assert _audit_attack(pack, forge, why="after checkpoint signature") == "audit-log"


def test_audit_checkpoint_head_moved(pack: Pack) -> None:
    def forge(d: dict[str, Any]) -> None:
        d["after"]["head_hash"] = audit_log(20)[4]["entry_hash"]  # entry 5's
        sign_checkpoint(d, "after", audit_key())  # validly signed, but not the hash of its entry

    assert _audit_attack(pack, forge, why="head is not the hash of entry 20") == "audit-log"


def test_audit_checkpoint_resigns_a_forked_root(pack: Pack) -> None:
    """A forked log (entry 5 rewritten, every hash after it recomputed) under checkpoints that sign the
    forked roots with the forger's own key, named in the document: self-consistent, so only the
    verifier's pinned audit key catches it."""
    forger = audit_key(seed=666)
    store_key = (
        audit_key()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    log = audit_log(20)
    log[4]["fields"]["items"] = 99
    rehash_log(log)
    doc = evidence_of(log, key=forger)
    verify.check_audit_log(json.dumps(doc).encode())  # consistent in itself
    assert _forged(pack, doc, audit_pub_pem=store_key, why="another key than the audit key given") == "audit-log"


def test_audit_forked_root_under_the_genuine_before_checkpoint(pack: Pack) -> None:
    """The store's key signs a forked after root, but the before checkpoint is the genuine one: the
    forked tree does not extend it, and the consistency proof cannot be made to verify."""
    genuine = audit_document(20)
    log = audit_log(20)
    log[4]["fields"]["items"] = 99
    rehash_log(log)
    doc = evidence_of(log)
    doc["before"] = genuine["before"]
    assert _forged(pack, doc, why="the consistency proof does not verify") == "audit-log"


def test_audit_redacted_field_holds_plaintext(pack: Pack) -> None:
    """Even with the store's real checkpoint key, a log whose redacted field is plain text fails."""
    log = audit_log(20)
    log[9]["fields"]["email"] = "someone@example.org"
    rehash_log(log)
    doc = evidence_of(log)
    doc["redacted"].insert(1, {"seq": 10, "field": "email"})
    assert _forged(pack, doc, why="entry 10: a redacted field does not hold its commitment") == "audit-log"


def test_audit_bystander_entry_added(pack: Pack) -> None:
    """An entry that holds no redacted commitment (a bystander's) has no place in the evidence."""
    log = audit_log(20)
    doc = evidence_of(log)
    doc["entries"].insert(1, {k: v for k, v in log[6].items() if k != "entry_hash"})
    _reproved(doc, log)
    assert _forged(pack, doc, why="entry 7 holds no redacted commitment") == "audit-log"


def test_audit_v1_evidence_is_refused(pack: Pack) -> None:
    def old(d: dict[str, Any]) -> None:
        d["format"] = "audit-log-redaction/v1"

    assert _audit_attack(pack, old, why="audit-log-redaction/v1 is no longer accepted: ") == "audit-log"


def test_audit_vault_still_holds_the_subject(pack: Pack) -> None:
    assert _audit_attack(pack, lambda d: d.update(vault_remaining_for_subject=2)) == "audit-log"


# --- claims against the records (re-signed: only check 8 can catch them) --------------------------


def test_steps_with_residue_under_all_clear(pack: Pack) -> None:
    steps = jsonl_edit(pack.files["steps.jsonl"], lambda rows: rows[3].update(after_count=3))  # vectors
    files = {**pack.files, "steps.jsonl": steps}
    assert pack.check_of(pack.resealed(files), dpo=False) == "consistency"


def test_probe_residue_under_all_clear(pack: Pack) -> None:
    ver = json_edit(pack.files["verification.json"], lambda d: d["probes"][0].update(residue=2))
    files = {**pack.files, "verification.json": ver}
    assert pack.check_of(pack.resealed(files), dpo=False) == "consistency"


def test_all_clear_with_no_probe(pack: Pack) -> None:
    ver = json_edit(pack.files["verification.json"], lambda d: d.update(probes=[]))
    files = {**pack.files, "verification.json": ver}
    assert pack.check_of(pack.resealed(files), dpo=False) == "consistency"


def test_residue_pack_claims_erased(pack: Pack) -> None:
    ver = json_edit(
        pack.files["verification.json"], lambda d: (d["probes"][6].update(residue=4), d.update(all_clear=False))
    )
    files = {**pack.files, "verification.json": ver}
    honest = verify.verify_bytes(pack.resealed(files), pack.keys.engine_pem, None, require_dpo=False)
    assert honest.status == "notErased"

    def lie(p: dict[str, Any]) -> None:
        p["status"] = "erased"
        for row in p["tiers"].values():
            row["status"] = "erased"

    assert pack.check_of(pack.resealed(files, edit=lie), dpo=False) == "consistency"


def test_tier_status_upgraded(pack: Pack) -> None:
    steps = jsonl_edit(pack.files["steps.jsonl"], lambda rows: rows[1].update(status="failed"))  # episodic
    ver = json_edit(pack.files["verification.json"], lambda d: d.update(all_clear=False))
    files = {**pack.files, "steps.jsonl": steps, "verification.json": ver}
    assert (
        pack.check_of(pack.resealed(files, edit=lambda p: p["tiers"]["episodic"].update(status="erased")), dpo=False)
        == "consistency"
    )


def test_predicate_all_clear_differs_from_verification(pack: Pack) -> None:
    ver = json_edit(pack.files["verification.json"], lambda d: d.update(all_clear=False))
    files = {**pack.files, "verification.json": ver}
    assert pack.check_of(pack.resealed(files, edit=lambda p: p.update(all_clear=True)), dpo=False) == "consistency"


def test_records_of_another_request(pack: Pack) -> None:
    steps = jsonl_edit(pack.files["steps.jsonl"], lambda rows: rows[0].update(request_id="req-other"))
    files = {**pack.files, "steps.jsonl": steps}
    assert pack.check_of(pack.resealed(files), dpo=False) == "consistency"


# --- check 8 binds every evidence file to the request (re-signed: only check 8 can catch them) ----


def _receipts_attack(pack: Pack, change: Any) -> str:
    files = {**pack.files, "subprocessor-receipts.jsonl": jsonl_edit(pack.files["subprocessor-receipts.jsonl"], change)}
    return pack.check_of(pack.resealed(files), dpo=False, why="receipt")


def test_receipt_of_another_request(pack: Pack) -> None:
    assert _receipts_attack(pack, lambda rows: rows[0].update(request_id="req-other")) == "consistency"


def test_receipt_without_a_request_id(pack: Pack) -> None:
    assert _receipts_attack(pack, lambda rows: rows[1].pop("request_id")) == "consistency"


def test_receipt_failed_under_an_erased_subprocessors_tier(pack: Pack) -> None:
    assert _receipts_attack(pack, lambda rows: rows[2].update(status="failed")) == "consistency"


def test_receipt_with_an_unknown_status(pack: Pack) -> None:
    assert _receipts_attack(pack, lambda rows: rows[0].update(status="probably-deleted")) == "consistency"


def test_two_receipts_of_one_processor(pack: Pack) -> None:
    assert _receipts_attack(pack, lambda rows: rows.append({**rows[0], "status": "failed"})) == "consistency"


def test_audit_evidence_of_another_request(pack: Pack) -> None:
    """Another request's genuine audit evidence (signed by the store's checkpoint key) swapped in."""
    other = (json.dumps(audit_document(20, request_id="req-other"), indent=2, sort_keys=True) + "\n").encode()
    files = {**pack.files, "audit-log-redaction.json": other}
    assert pack.check_of(pack.resealed(files), dpo=False, why="records no redaction for this request") == "consistency"


def test_step_record_repeated_so_the_last_one_wins(pack: Pack) -> None:
    """A failed vectors step hidden behind a later record of the same step that says erased."""

    def hide(rows: list[dict[str, Any]]) -> None:
        rows.insert(3, {**rows[3], "status": "failed", "after_count": 3})

    files = {**pack.files, "steps.jsonl": jsonl_edit(pack.files["steps.jsonl"], hide)}
    assert pack.check_of(pack.resealed(files), dpo=False, why="repeats step vectors") == "consistency"


def test_step_records_out_of_cascade_order(pack: Pack) -> None:
    files = {**pack.files, "steps.jsonl": jsonl_edit(pack.files["steps.jsonl"], lambda rows: rows.reverse())}
    assert pack.check_of(pack.resealed(files), dpo=False, why="cascade order") == "consistency"


def _dpo_signed(pack: Pack, *, status: str = "erased", attested_at: str = "2024-02-02T10:00:00Z") -> bytes:
    """The pack with a DPO envelope the real DPO key signed over the given status and time."""
    files = {k: v for k, v in pack.files.items() if k != DPO_ENV}
    statement = dpo_statement(
        files,
        request_id=pack.top,
        attested_at=attested_at,
        dpo_keyid=keyid(load_private_key(pack.keys.dpo)),
        engine_keyid=keyid(load_private_key(pack.keys.engine)),
        status=status,
    )
    files[DPO_ENV] = envelope_bytes(sign_envelope(statement, load_private_key(pack.keys.dpo)))
    return repack(pack.top, files)


def test_dpo_signed_a_pack_with_our_own_statement_builder(pack: Pack) -> None:
    verify.verify_bytes(_dpo_signed(pack), pack.keys.engine_pem, pack.keys.dpo_pem)  # the baseline of the next


def test_dpo_statement_attests_another_status(pack: Pack) -> None:
    assert pack.check_of(_dpo_signed(pack, status="erasedWithExceptions"), why="DPO's statement") == "consistency"


def test_dpo_attested_before_the_verification(pack: Pack) -> None:
    assert pack.check_of(_dpo_signed(pack, attested_at="2024-01-01T00:00:00Z"), why="before") == "consistency"


def test_dpo_attested_in_the_future(pack: Pack) -> None:
    assert pack.check_of(_dpo_signed(pack, attested_at="2999-01-01T00:00:00Z"), why="future") == "consistency"


def test_dpo_attested_at_is_not_a_utc_time(pack: Pack) -> None:
    assert pack.check_of(_dpo_signed(pack, attested_at="yesterday"), why="attested_at") == "statement"


def test_no_dpo_key_with_a_dpo_envelope_present_says_it_was_not_checked(pack: Pack, mallory: Keys) -> None:
    files = {**pack.files, DPO_ENV: envelope_bytes(sign_envelope(b"{}", load_private_key(mallory.dpo)))}
    forged = repack(pack.top, files)
    result = verify.verify_bytes(forged, pack.keys.engine_pem, None, require_dpo=False)
    assert result.dpo_attestation == "not checked" and result.dpo_keyid is None
    assert "NOT checked" in result.line()
    with pytest.raises(verify.SignatureError):  # --no-dpo with --dpo-key: a present envelope is checked
        verify.verify_bytes(forged, pack.keys.engine_pem, pack.keys.dpo_pem, require_dpo=False)
    genuine = verify.verify_bytes(
        pack.path.read_bytes(),
        pack.keys.engine_pem,
        pack.keys.dpo_pem,
        require_dpo=False,
        audit_pub_pem=pack.keys.audit_pub.read_bytes(),
    )
    assert (genuine.dpo_attestation, genuine.line()) == ("verified", "OK")


# --- several targets: one record per (target, tier), none hides another ---------------------------


def _with_target(pack: Pack, change: Any = None, name: str = "agent-db") -> dict[str, bytes]:
    """The pack's evidence plus a second target's nine step records (as the flow writes them: the
    reference store's first, then each target's, tiers in cascade order)."""

    def add(rows: list[dict[str, Any]]) -> None:
        extra = [{**r, "target": name} for r in rows]
        if change is not None:
            change(extra)
        rows.extend(extra)

    return {**pack.files, "steps.jsonl": jsonl_edit(pack.files["steps.jsonl"], add)}


def test_a_second_target_verifies(pack: Pack) -> None:
    result = verify.verify_bytes(pack.resealed(_with_target(pack)), pack.keys.engine_pem, None, require_dpo=False)
    assert result.status == "erased"


def test_a_failed_tier_of_the_last_target_decides_the_tier(pack: Pack) -> None:
    """Before: the last record of a tier won, so whichever target came last decided it."""
    files = _with_target(pack, lambda rows: rows[3].update(status="failed", after_count=2))  # vectors
    files["verification.json"] = json_edit(files["verification.json"], lambda d: d.update(all_clear=False))
    honest = verify.verify_bytes(pack.resealed(files), pack.keys.engine_pem, None, require_dpo=False)
    assert honest.status == "notErased"
    lie = pack.resealed(files, edit=lambda p: p["tiers"]["vectors"].update(status="erased"))
    assert pack.check_of(lie, dpo=False, why="tier vectors") == "consistency"


def test_a_failed_tier_of_the_reference_store_is_not_hidden_by_a_later_target(pack: Pack) -> None:
    def fail_reference(rows: list[dict[str, Any]]) -> None:
        rows[3].update(status="failed", after_count=2)

    files = {**pack.files, "steps.jsonl": jsonl_edit(pack.files["steps.jsonl"], fail_reference)}
    files = _with_target(Pack(pack.keys, pack.path, pack.top, files, pack.tmp))
    files["verification.json"] = json_edit(files["verification.json"], lambda d: d.update(all_clear=False))
    assert (
        verify.verify_bytes(pack.resealed(files), pack.keys.engine_pem, None, require_dpo=False).status == "notErased"
    )


def test_a_target_record_repeated(pack: Pack) -> None:
    files = _with_target(pack, lambda rows: rows.insert(4, dict(rows[3])))
    assert pack.check_of(pack.resealed(files), dpo=False, why="repeats step vectors") == "consistency"


def test_target_records_before_the_reference_stores(pack: Pack) -> None:
    files = _with_target(pack)
    rows = [json.loads(x) for x in files["steps.jsonl"].decode().splitlines()]
    files["steps.jsonl"] = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows[9:] + rows[:9]).encode()
    assert pack.check_of(pack.resealed(files), dpo=False, why="order") == "consistency"
