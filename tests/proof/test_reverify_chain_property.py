"""Re-verification chains as a class (issue 34, finding 10): any selection of a pack's statements, in
any order, is accepted exactly when it is the whole chain from statement 1 to some statement k. The
oracle below is written apart from the verifier: it knows only the statements' numbers."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proof.keys import generate_keypair, load_public_key
from proof.reverification import write_reverification
from proof.verify.envelopes import PublicKey
from proof.verify.errors import ReverifyError
from proof.verify.reverify import check_reverifications
from tests import budget

REQ, PACK = "req-chain-1", "ab" * 32
STATEMENTS = 5


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> tuple[PublicKey, list[tuple[str, bytes]]]:
    tmp = tmp_path_factory.mktemp("chain")
    key = generate_keypair("engine", tmp / "keys")
    made = []
    for i in range(STATEMENTS):
        predicate = {
            "request_id": REQ,
            "pack_name": PACK,
            "reverified_at": f"2026-0{i + 1}-01T00:00:00Z",
            "all_clear": True,
            "residue": {},
            "residue_tiers": [],
            "changed_files": {"compared": False},
        }
        path = write_reverification(tmp, key.private, predicate, [])
        made.append((path.name, path.read_bytes()))
    return load_public_key(key.public), made


def accepted_by_the_oracle(numbers: list[int]) -> bool:
    """A whole chain: statements 1..k, each once (k >= 1)."""
    return sorted(numbers) == list(range(1, len(numbers) + 1)) and len(numbers) >= 1


@settings(max_examples=budget.examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picked=st.lists(st.integers(min_value=1, max_value=STATEMENTS), min_size=1, max_size=STATEMENTS + 2))
def test_a_selection_of_statements_verifies_only_when_it_is_a_whole_chain(
    chain: tuple[PublicKey, list[tuple[str, bytes]]], picked: list[int]
) -> None:
    key, made = chain
    given_ = [made[n - 1] for n in picked]
    try:
        out = check_reverifications(given_, key, REQ, PACK)
    except ReverifyError:
        assert not accepted_by_the_oracle(picked), picked
    else:
        assert accepted_by_the_oracle(picked), picked
        assert [r.sequence for r in out] == list(range(1, len(picked) + 1))
