"""The verifier is one list of numbered steps over one `Trust`: the list is numbered without a gap, names
every check once, each attack fails at its own step, and one trust verifies many packs.

Baseline: the attested pack every tamper test attacks (`tests.tamper_fixtures`). The expected step of
each attack is written here, by hand, from docs/regulator.md's list of checks (not read from `STEPS`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proof import verify
from proof.dsse import sign_envelope
from proof.keys import keyid, load_private_key, load_public_key
from proof.pack import write_pack
from proof.verify.backups import FollowupError
from proof.verify.errors import KeyArgumentError, PackError
from proof.verify.verifier import CONTENTS_ONLY, STEPS, Trust, Verifier
from tests.keyring_fixtures import entry, keyring_file
from tests.proof_fixtures import json_edit, jsonl_edit, make_evidence, repack, resign_statement, sums_of
from tests.tamper_fixtures import DPO_ENV, ENGINE_ENV, Pack, bump_first_digit, pack_fixture  # noqa: F401  (the fixture)
from tests.tsa_fixtures import make_tsa_certs
from wire.format import canonical_json, envelope_bytes

NAMES = {
    1: "archive",
    2: "signature",
    3: "statement",
    4: "subjects",
    5: "checksums",
    6: "distinct-keys",
    7: "audit-log",
    8: "consistency",
    9: "timestamp",
    10: "key-validity",
    11: "reverify",
    12: "backups-followup",
}
"""The steps as the regulator's guide numbers them (the oracle)."""


def _subclasses(cls: type[PackError]) -> set[type[PackError]]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub, *_subclasses(sub)}
    return out


def test_the_steps_are_numbered_one_to_n_without_a_gap_in_the_guides_order() -> None:
    assert [s.number for s in STEPS] == list(range(1, len(STEPS) + 1))
    assert {s.number: s.name for s in STEPS} == NAMES


def test_every_pack_error_names_exactly_one_step_and_keys_is_the_trusts_check_zero(pack: Pack) -> None:
    names = [s.name for s in STEPS]
    checks = {cls.check for cls in _subclasses(PackError)}
    assert FollowupError in _subclasses(PackError)  # the backups follow-up is one of the checks too
    for check in checks - {KeyArgumentError.check}:
        assert names.count(check) == 1, check
    # check 0 is the trust's own, raised while it is built, before any step runs
    assert KeyArgumentError.check not in names
    with pytest.raises(KeyArgumentError, match="no engine key and no keyring was given"):
        Trust.from_pem(None, None)
    with pytest.raises(KeyArgumentError, match="the engine key is not a PEM public key"):
        Trust.from_pem(b"-----BEGIN PUBLIC KEY-----\n", None)
    with pytest.raises(KeyArgumentError, match="no DPO key was given"):
        Trust.from_pem(pack.keys.engine_pem, None)  # the DPO's attestation is required by default
    # each step's safety net is the class whose check it names (key-validity fails as `signature`)
    for s in STEPS:
        assert s.error.check == (s.name if s.name != "key-validity" else "signature")


# --- each attack fails at its own step ----------------------------------------------------------


def _engine_statement(pack: Pack, name: str = ENGINE_ENV) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(json.loads(pack.files[name])["payload"])))


def _resigned(pack: Pack, name: str, statement: dict[str, Any]) -> dict[str, bytes]:
    forged = sign_envelope(canonical_json(statement), load_private_key(pack.keys.engine))
    return {**pack.files, name: envelope_bytes(forged)}


def _unattested(pack: Pack) -> dict[str, bytes]:
    return {k: v for k, v in pack.files.items() if k != DPO_ENV}


def _archive(pack: Pack) -> tuple[Trust, bytes]:
    return _trust(pack), repack(pack.top, {**pack.files, "notes.txt": b"added\n"})


def _signature(pack: Pack) -> tuple[Trust, bytes]:
    return _trust(pack), repack(pack.top, {**pack.files, ENGINE_ENV: bump_first_digit(pack.files[ENGINE_ENV])})


def _statement(pack: Pack) -> tuple[Trust, bytes]:
    statement = {**_engine_statement(pack), "predicateType": "https://slsa.dev/provenance/v1"}
    return _trust(pack, dpo=False), repack(pack.top, _resigned(pack, ENGINE_ENV, statement))


def _subjects(pack: Pack) -> tuple[Trust, bytes]:
    return _trust(pack), repack(pack.top, {**pack.files, "request.json": bump_first_digit(pack.files["request.json"])})


def _checksums(pack: Pack) -> tuple[Trust, bytes]:
    files = _unattested(pack)
    files["manifest.json"] = json_edit(files["manifest.json"], lambda m: m["files"][0].update(size=1))
    files["SHA256SUMS"] = sums_of(files)
    resign_statement(files, pack.keys.engine)
    return _trust(pack, dpo=False), repack(pack.top, files)


def _distinct_keys(pack: Pack) -> tuple[Trust, bytes]:
    """The DPO's statement re-signed by the engine's key and naming it, under a trust built by hand with
    one key in both roles (`from_pem` refuses that at check 0): only step 6 is left to refuse it."""
    engine = load_public_key(pack.keys.engine_pub)
    statement = _engine_statement(pack, DPO_ENV)
    statement["predicate"] = {**statement["predicate"], "dpo_keyid": keyid(engine)}
    return Trust(engine_key=engine, dpo_key=engine), repack(pack.top, _resigned(pack, DPO_ENV, statement))


def _audit_log(pack: Pack) -> tuple[Trust, bytes]:
    audit = json_edit(pack.files["audit-log-redaction.json"], lambda d: d.update(vault_remaining_for_subject=2))
    return _trust(pack, dpo=False), pack.resealed({**pack.files, "audit-log-redaction.json": audit})


def _consistency(pack: Pack) -> tuple[Trust, bytes]:
    steps = jsonl_edit(pack.files["steps.jsonl"], lambda rows: rows[3].update(after_count=3))
    return _trust(pack, dpo=False), pack.resealed({**pack.files, "steps.jsonl": steps})


def _timestamp(pack: Pack) -> tuple[Trust, bytes]:
    """A pinned TSA root and a pack with no token: refused, never passed on the engine's clock."""
    (folder := pack.tmp / "steps-tsa").mkdir(exist_ok=True)
    root, *_ = make_tsa_certs(folder, "steps")
    return _trust(pack, tsa_root_pem=root.read_bytes()), repack(pack.top, pack.files)


def _key_validity(pack: Pack) -> tuple[Trust, bytes]:
    """The engine key's validity begins long after it signed."""
    ring = keyring_file(
        [
            entry("engine", pack.keys.engine_pub, "2099-01-01T00:00:00Z", None),
            entry("dpo", pack.keys.dpo_pub, "2000-01-01T00:00:00Z", None),
        ]
    )
    return Trust.from_pem(None, None, keyring=ring), repack(pack.top, pack.files)


def _trust(pack: Pack, *, dpo: bool = True, tsa_root_pem: bytes | None = None) -> Trust:
    return Trust.from_pem(
        pack.keys.engine_pem, pack.keys.dpo_pem if dpo else None, require_dpo=dpo, tsa_root_pem=tsa_root_pem
    )


ATTACKS: dict[str, Callable[[Pack], tuple[Trust, bytes]]] = {
    "archive": _archive,
    "signature": _signature,
    "statement": _statement,
    "subjects": _subjects,
    "checksums": _checksums,
    "distinct-keys": _distinct_keys,
    "audit-log": _audit_log,
    "consistency": _consistency,
    "timestamp": _timestamp,
    "key-validity": _key_validity,
}


@pytest.mark.parametrize("step", sorted(ATTACKS, key=lambda n: next(k for k, v in NAMES.items() if v == n)))
def test_each_attack_on_the_pack_fails_at_its_own_numbered_step(pack: Pack, step: str) -> None:
    trust, data = ATTACKS[step](pack)
    with pytest.raises(PackError) as err:
        Verifier(trust).verify_bytes(data)
    number = next(k for k, v in NAMES.items() if v == step)
    assert err.value.step == number, (err.value.check, str(err.value))
    assert err.value.check == (step if step != "key-validity" else "signature")


def test_a_forged_reverification_statement_fails_at_step_11(pack: Pack, tmp_path: Path) -> None:
    statement = tmp_path / "reverify-1.intoto.json"
    statement.write_bytes(pack.files[ENGINE_ENV])  # a genuine envelope, but not a re-verification
    with pytest.raises(PackError) as err:
        Verifier(_trust(pack)).verify(pack.path, statements=[statement])
    assert (err.value.step, err.value.check) == (11, "reverify")


def test_a_broken_backups_followup_fails_at_step_12(pack: Pack, tmp_path: Path) -> None:
    followup = tmp_path / "backups-followup.intoto.json"
    followup.write_bytes(b"{not json")
    with pytest.raises(FollowupError) as err:
        Verifier(_trust(pack)).verify(pack.path, followup=followup)
    assert (err.value.step, err.value.check) == (12, "backups-followup")


# --- one trust, many packs ------------------------------------------------------------------------


def test_one_trust_built_once_verifies_several_packs_and_keeps_no_state_between_them(pack: Pack) -> None:
    trust = _trust(pack, dpo=False)
    verifier = Verifier(trust)
    others = [
        write_pack(
            make_evidence(pack.tmp / f"many-{n}", request_id=f"req-many-{n}", scenario=scenario), pack.keys.engine
        )
        for n, scenario in enumerate(("erased", "exceptions"))
    ]
    first = verifier.verify(pack.path)
    results = [verifier.verify(p) for p in others]
    assert [r.request_id for r in results] == ["req-many-0", "req-many-1"]
    assert len({first.pack_name, *(r.pack_name for r in results)}) == 3
    assert verifier.verify(pack.path) == first  # nothing of one verification leaks into the next
    assert first.dpo_attestation == "not checked" and results[0].dpo_attestation == "absent"
    # a failure in between leaves the trust as it was
    with pytest.raises(PackError):
        verifier.verify_bytes(b"not a pack")
    assert verifier.verify(others[1]) == results[1]


def test_the_checks_of_a_result_follow_the_steps_order(pack: Pack) -> None:
    result = Verifier(_trust(pack)).verify(pack.path)
    order = [s.name for s in STEPS]
    assert list(result.checks) == sorted(result.checks, key=order.index)
    assert result.checks == verify.verify_pack(pack.path, pack.keys.engine_pem, pack.keys.dpo_pem).checks
    shown = Verifier(CONTENTS_ONLY).verify(pack.path)
    assert not shown.signatures_verified and "signature" not in shown.checks
