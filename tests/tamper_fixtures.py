"""The attested pack every tamper test attacks (tests/proof/test_proof_tamper*.py), and what they share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from proof import verify
from proof.pack import attest, write_pack
from tests.proof_fixtures import (
    Keys,
    make_evidence,
    make_keys,
    read_members,
    repack,
    reseal,
)

ENGINE_ENV, DPO_ENV = "signatures/engine.intoto.json", "signatures/dpo.intoto.json"


@dataclass
class Pack:
    keys: Keys
    path: Path
    top: str
    files: dict[str, bytes]
    tmp: Path

    def check_of(self, data: bytes, *, dpo: bool = True, why: str = "", **kw: Any) -> str:
        """The name of the check that rejects `data` (fails the test if it verifies); `why` must
        appear in the message, so the rejection is for the reason the attack is about."""
        with pytest.raises(verify.PackError) as err:
            verify.verify_bytes(data, self.keys.engine_pem, self.keys.dpo_pem if dpo else None, require_dpo=dpo, **kw)
        assert why in str(err.value)
        return err.value.check

    def resealed(self, files: dict[str, bytes], **kw: Any) -> bytes:
        """Evidence files re-derived and re-signed with the real engine key (no DPO envelope)."""
        return repack(self.top, reseal(files, self.keys.engine, **kw))


@pytest.fixture(scope="module", name="pack")
def pack_fixture(tmp_path_factory: pytest.TempPathFactory) -> Pack:
    """Built once per module: every attack works on copies of `files`, never on the pack itself."""
    tmp_path = tmp_path_factory.mktemp("tamper")
    keys = make_keys(tmp_path / "keys", "ecdsa-p256", dpo_algorithm="ed25519")
    path = write_pack(make_evidence(tmp_path), keys.engine)
    attest(path, keys.dpo, engine_pub=keys.engine_pub, attested_at="2024-02-02T10:00:00Z")
    top, files = read_members(path)
    verify.verify_pack(path, keys.engine_pem, keys.dpo_pem)  # the baseline verifies
    return Pack(keys, path, top, files, tmp_path)


def bump_first_digit(data: bytes) -> bytes:
    """Change one byte: the first ASCII digit goes up by one (9 down to 8); JSON stays valid."""
    i = next(i for i, b in enumerate(data) if 0x30 <= b <= 0x39)
    return data[:i] + bytes([data[i] + 1 if data[i] != 0x39 else 0x38]) + data[i + 1 :]
