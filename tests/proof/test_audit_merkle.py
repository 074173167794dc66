"""The audit log's Merkle tree (RFC 6962 / RFC 9162 2.1): known answers, the store's stored-node tree
against the RFC's recursive definitions, every proof checked with the offline VERIFIER's code (and
refused with any one hash flipped), and the migration of a store made before the tree."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any, cast

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire.format
from erasure.config import Home
from erasure.sqlite import connect, transaction
from memory import audit, audit_tree, schema
from proof import verify
from tests import budget
from tests.proof_fixtures import audit_document, consistency_proof, inclusion_path, leaf_hash, mth, multiproof

# The Certificate Transparency reference tree (certificate-transparency-go / transparency-dev merkle
# test vectors): its leaf data, the root of each size 1..8, and proofs in the tree of 8.
CT_LEAVES = [
    bytes.fromhex(h)
    for h in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f")
]
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
EMPTY_ROOT = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
CT_INCLUSION = [
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
]
CT_CONSISTENCY = [
    (
        2,
        8,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]


def _flipped(proof: list[bytes]) -> Iterator[list[bytes]]:
    """`proof` with one bit of one hash flipped, for each hash in turn."""
    for i in range(len(proof)):
        bad = bytearray(proof[i])
        bad[i % 32] ^= 0x01
        yield [*proof[:i], bytes(bad), *proof[i + 1 :]]


# --- known answers --------------------------------------------------------------------------------


def test_reference_roots_of_the_ct_tree() -> None:
    leaves = [leaf_hash(d) for d in CT_LEAVES]
    assert mth([]).hex() == EMPTY_ROOT == verify.MERKLE_EMPTY_ROOT.hex()  # the store's too: one definition
    assert [mth(leaves[:n]).hex() for n in range(1, 9)] == CT_ROOTS
    assert verify.merkle_leaf(b"").hex() == CT_ROOTS[0]
    assert verify.merkle_node(leaves[0], leaves[1]).hex() == CT_ROOTS[1]


@pytest.mark.parametrize(("index", "size", "path"), CT_INCLUSION)
def test_ct_inclusion_vectors(index: int, size: int, path: list[str]) -> None:
    leaves = [leaf_hash(d) for d in CT_LEAVES]
    assert [h.hex() for h in inclusion_path(leaves[:size], index)] == path
    proof = [bytes.fromhex(h) for h in path]
    root = bytes.fromhex(CT_ROOTS[size - 1])
    assert verify.verify_inclusion(leaves[index], index, size, proof, root)
    assert not verify.verify_inclusion(leaves[index], index + 1, size, proof, root)
    assert not verify.verify_inclusion(leaves[index], index, size, proof[:-1], root)


@pytest.mark.parametrize(("first", "second", "path"), CT_CONSISTENCY)
def test_ct_consistency_vectors(first: int, second: int, path: list[str]) -> None:
    leaves = [leaf_hash(d) for d in CT_LEAVES]
    assert [h.hex() for h in consistency_proof(leaves[:second], first)] == path
    proof = [bytes.fromhex(h) for h in path]
    r1, r2 = bytes.fromhex(CT_ROOTS[first - 1]), bytes.fromhex(CT_ROOTS[second - 1])
    assert verify.verify_consistency(first, second, r1, r2, proof)
    assert not verify.verify_consistency(first, second, r2, r1, proof)
    assert not verify.verify_consistency(first, second, r1, r2, proof[:-1])


def test_degenerate_consistency_cases() -> None:
    leaves = [leaf_hash(d) for d in CT_LEAVES]
    r4, r8 = mth(leaves[:4]), mth(leaves)
    empty = verify.MERKLE_EMPTY_ROOT
    assert verify.verify_consistency(4, 4, r4, r4, [])
    assert not verify.verify_consistency(4, 4, r4, r8, [])
    assert not verify.verify_consistency(4, 4, r4, r4, [r4])
    assert verify.verify_consistency(0, 8, empty, r8, [])
    assert not verify.verify_consistency(0, 8, r4, r8, [])
    assert not verify.verify_consistency(0, 8, empty, r8, [r8])
    assert not verify.verify_consistency(8, 4, r8, r4, [])
    assert not verify.verify_consistency(6, 8, mth(leaves[:6]), r8, [])


# --- the store's tree ------------------------------------------------------------------------------


@pytest.fixture
def store(home: Home) -> Iterator[apsw.Connection]:
    conn = schema.create(home.store_dir)
    yield conn
    conn.close()


def _append(conn: apsw.Connection, n: int) -> None:
    with transaction(conn):
        for i in range(n):
            audit.append(conn, "ingest", "ingest-worker", {"i": i})


def _leaves(conn: apsw.Connection) -> list[bytes]:
    return [leaf_hash(bytes.fromhex(str(r[0]))) for r in conn.execute("SELECT entry_hash FROM audit_log ORDER BY seq")]


def test_stored_root_is_the_rfc_root_at_every_size(store: apsw.Connection) -> None:
    """Leaves added in uneven batches (the lazy extension resumes from every shape of the frontier)."""
    for batch in (1, 1, 1, 2, 3, 5, 8, 13, 21, 15):
        _append(store, batch)
        audit_tree.extend(store)
    leaves = _leaves(store)
    assert len(leaves) == audit_tree.stored_size(store) == 70
    for n in range(0, 71):
        assert audit_tree.root(store, n) == mth(leaves[:n]), n
    rows = int(cast(tuple[Any, ...], store.execute("SELECT count(*) FROM audit_merkle").fetchone())[0])
    assert rows == sum(70 >> level for level in range(7))  # every perfect subtree, once


def test_every_proof_verifies_with_the_verifier_and_no_flipped_one(store: apsw.Connection) -> None:
    _append(store, 40)
    audit_tree.extend(store)
    leaves = _leaves(store)
    roots = [mth(leaves[:n]) for n in range(41)]
    for n in range(1, 41):
        # one leaf, every pair of neighbours, every third leaf from each offset: the store's multiproof
        # is the fixture's, the verifier takes it, and refuses it with any hash flipped or one dropped
        sets = [{i} for i in range(n)] + [{i, i + 1} for i in range(n - 1)] + [set(range(o, n, 3)) for o in range(3)]
        for wanted in (w for w in sets if w):
            proof = audit_tree.multiproof(store, wanted, n)
            assert proof == multiproof(leaves[:n], wanted), (wanted, n)
            given_leaves = {i: leaves[i] for i in wanted}
            assert verify.verify_multiproof(given_leaves, n, proof, roots[n]), (wanted, n)
            for bad in _flipped(proof):
                assert not verify.verify_multiproof(given_leaves, n, bad, roots[n]), (wanted, n)
            if proof:
                assert not verify.verify_multiproof(given_leaves, n, proof[:-1], roots[n]), (wanted, n)
            assert not verify.verify_multiproof(given_leaves, n, [*proof, roots[n]], roots[n]), (wanted, n)
        for m in range(0, n + 1):
            proof = audit_tree.consistency(store, m, n)
            assert proof == consistency_proof(leaves[:n], m) if m < n else proof == []
            assert verify.verify_consistency(m, n, roots[m], roots[n], proof), (m, n)
            for bad in _flipped(proof):
                assert not verify.verify_consistency(m, n, roots[m], roots[n], bad), (m, n)
            if m < n:
                assert not verify.verify_consistency(m, n, roots[n], roots[n], proof), (m, n)


@settings(max_examples=budget.examples(60), deadline=None)
@given(n=st.integers(1, 300), data=st.data())
def test_random_proofs_verify_and_any_wrong_one_does_not(n: int, data: st.DataObject) -> None:
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(n)]
    i = data.draw(st.integers(0, n - 1))
    m = data.draw(st.integers(0, n))
    root = mth(leaves)
    path = inclusion_path(leaves, i)
    assert verify.verify_inclusion(leaves[i], i, n, path, root)
    other = data.draw(st.integers(0, n - 1))
    if other != i:
        assert not verify.verify_inclusion(leaves[i], other, n, path, root)
    wanted = set(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=12)))
    batch = multiproof(leaves, wanted)
    assert verify.verify_multiproof({w: leaves[w] for w in wanted}, n, batch, root)
    moved = data.draw(st.integers(0, n - 1))
    if moved not in wanted:  # the same hashes claimed for another index: refused
        shifted = {**{w: leaves[w] for w in wanted if w != min(wanted)}, moved: leaves[min(wanted)]}
        assert not verify.verify_multiproof(shifted, n, batch, root)
    proof = consistency_proof(leaves, m) if m < n else []
    assert verify.verify_consistency(m, n, mth(leaves[:m]), root, proof)
    if 0 < m < n:
        j = data.draw(st.integers(0, len(proof) - 1))
        bad = [*proof[:j], bytes(32), *proof[j + 1 :]]
        assert not verify.verify_consistency(m, n, mth(leaves[:m]), root, bad)
        assert not verify.verify_consistency(m, n, mth(leaves[:m]), root, [*proof, bytes(32)])


def test_checkpoints_sign_the_tree(home: Home, store: apsw.Connection) -> None:
    cp0 = audit.checkpoint(store, home.store_dir)
    assert (cp0.seq, cp0.tree_size, cp0.root_hash) == (0, 0, EMPTY_ROOT)
    _append(store, 11)
    cp = audit.checkpoint(store, home.store_dir)
    assert (cp.seq, cp.tree_size, cp.root_hash) == (11, 11, mth(_leaves(store)).hex())
    statement = json.loads(cp.statement())
    assert statement == {
        "type": "audit-checkpoint/v2",
        "seq": 11,
        "head_hash": cp.head_hash,
        "tree_size": 11,
        "root_hash": cp.root_hash,
        "at": cp.at,
    }
    audit.checkpoint_key(home.store_dir).public_key().verify(base64.b64decode(cp.signature), cp.statement())
    assert audit.checkpoints(store) == [cp0, cp]
    assert audit.verify_checkpoint(store, home.store_dir, cp)


def test_verify_chain_checks_the_stored_nodes(home: Home, store: apsw.Connection) -> None:
    _append(store, 9)
    audit.checkpoint(store, home.store_dir)
    assert audit.verify_chain(store).ok
    store.execute("UPDATE audit_merkle SET hash = zeroblob(32) WHERE level = 1 AND idx = 2")
    assert audit.verify_chain(store).first_bad_seq == 5  # the node covers seqs 5 and 6
    store.execute("DELETE FROM audit_merkle WHERE level = 1 AND idx = 2")
    assert audit.verify_chain(store).first_bad_seq == 5  # missing
    store.execute("DELETE FROM audit_merkle")  # derived data: no tree yet is a state a migrated store is in
    assert audit.verify_chain(store).ok  # the checkpoint's root is recomputed from the entries
    audit_tree.extend(store)
    cp = audit.checkpoints(store)[-1]
    assert audit.verify_chain(store).ok and audit.verify_checkpoint(store, home.store_dir, cp)  # the same tree


# --- a store made before the tree ------------------------------------------------------------------


def _make_old_store(home: Home, entries: int) -> None:
    """A store as the previous version left it: no audit_merkle, v1 checkpoint rows without tree columns."""
    conn = schema.create(home.store_dir)
    _append(conn, entries)
    key = audit.checkpoint_key(home.store_dir)
    seq, head = cast(
        tuple[Any, ...], conn.execute("SELECT seq, entry_hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    )
    at = audit.iso_utc()
    v1 = wire.format.canonical_json({"type": "audit-checkpoint/v1", "seq": seq, "head_hash": head, "at": at})
    conn.execute("DROP TABLE audit_merkle")
    conn.execute("ALTER TABLE audit_checkpoints DROP COLUMN tree_size")
    conn.execute("ALTER TABLE audit_checkpoints DROP COLUMN root_hash")
    conn.execute(
        "INSERT INTO audit_checkpoints(seq, head_hash, at, key_id, signature) VALUES (?, ?, ?, ?, ?)",
        (seq, head, at, wire.format.keyid_of(key.public_key()), base64.b64encode(key.sign(v1)).decode()),
    )
    conn.close()


def test_an_old_store_gains_the_tree_on_open_and_fills_it_once(home: Home) -> None:
    _make_old_store(home, 300)
    raw = connect(schema.db_path(home.store_dir))
    assert not raw.execute("SELECT name FROM sqlite_master WHERE name = 'audit_merkle'").fetchall()
    raw.close()
    conn = schema.open_store(home.store_dir)
    try:
        (old,) = audit.checkpoints(conn)
        assert old.tree_size is None and audit.verify_checkpoint(conn, home.store_dir, old)  # v1 still verifies
        assert audit_tree.stored_size(conn) == 0 and audit.verify_chain(conn).ok
        cp = audit.checkpoint(conn, home.store_dir)  # the first checkpoint fills the tree
        assert audit_tree.stored_size(conn) == 300 and cp.root_hash == mth(_leaves(conn)).hex()
        rows = int(cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM audit_merkle").fetchone())[0])
        _append(conn, 3)
        audit.checkpoint(conn, home.store_dir)  # later ones only add the new leaves and their parents
        added = sum(303 >> level for level in range(9)) - sum(300 >> level for level in range(9))
        assert (
            int(cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM audit_merkle").fetchone())[0])
            == rows + added
            == rows + 4
        )
        assert audit.verify_chain(conn) == audit.ChainStatus(True, 303, audit.verify_chain(conn).head_hash, None, 3)
    finally:
        conn.close()


# --- the evidence: any one hash changed is refused ----------------------------------------------


def _hash_slots(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    slots: list[tuple[Any, ...]] = [("consistency", i) for i in range(len(doc["consistency"]))]
    slots += [(w, k) for w in ("before", "after") for k in ("head_hash", "root_hash")]
    for j, e in enumerate(doc["entries"]):
        slots += [("entries", j, k) for k in ("prev_hash", "entry_hash") if k in e]
        slots += [("entries", j, "inclusion", i) for i in range(len(e.get("inclusion", [])))]
        slots += [("entries", j, "fields", f, "commit") for f, v in e["fields"].items() if isinstance(v, dict)]
    slots += [("multiproof", i) for i in range(len(doc.get("multiproof", [])))]
    slots += [("redacted", j, "commitment") for j, r in enumerate(doc["redacted"]) if "commitment" in r]
    return slots


@settings(max_examples=budget.examples(80), deadline=None)
@given(n=st.integers(8, 60), v2=st.booleans(), data=st.data())
def test_any_one_hash_of_the_evidence_changed_is_refused(n: int, v2: bool, data: st.DataObject) -> None:
    doc = audit_document(n, v2=v2)
    verify.check_audit_log(json.dumps(doc).encode())
    *where, last = data.draw(st.sampled_from(_hash_slots(doc)))
    target: Any = doc
    for k in where:
        target = target[k]
    pos = data.draw(st.integers(0, 63))
    old = target[last]
    target[last] = old[:pos] + ("0" if old[pos] != "0" else "1") + old[pos + 1 :]
    with pytest.raises(verify.AuditLogError):
        verify.check_audit_log(json.dumps(doc).encode())
