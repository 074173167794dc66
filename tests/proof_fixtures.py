"""Synthetic evidence, keys and archive surgery for the proof-pack tests (and bench/proof.py).

The evidence follows the formats the flows write (request.json, steps.jsonl, verification.json,
subprocessor-receipts.jsonl, audit-log-redaction.json). The audit-log document (audit-log-redaction/v3,
or v2 on request) is built here with its own hashing, its own RFC 6962 Merkle tree (the RFC's recursive definitions,
written out) and an Ed25519 checkpoint key, independently of memory/audit.py and proof/verify/.
"""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from proof.evidence import Evidence
from proof.keys import generate_keypair, load_private_key
from proof.pack import DEFAULT_OUT_OF_SCOPE, build_predicate, seal_files
from proof.tarball import tar_gz_bytes

TIERS = (
    "working",
    "episodic",
    "semantic",
    "vectors",
    "fine_tune",
    "uploads",
    "derivatives",
    "subprocessors",
    "audit_log",
)
"""The nine tiers in cascade order as DESIGN.md lists them: the tests' own copy (an oracle apart from
erasure.tiers and wire.format), the one every test that checks the order reads."""
SUBJECT = {
    "id": "subj-alice-7731",
    "email": "alice.liddell@example.org",
    "name": "Alice Pleasance Liddell",
    "phone": "+44 7700 900123",
}
IDENTIFIERS = list(SUBJECT.values())
SCENARIOS = ("erased", "exceptions", "residue", "skipped")
GENESIS = "0" * 64


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def commit(salt: bytes, value: str) -> str:
    return hashlib.sha256(salt + value.encode()).hexdigest()


# --- the audit-log redaction document -------------------------------------------------------------
# RFC 6962 / RFC 9162 2.1 written out from the RFC's recursive definitions, over a list of leaf hashes:
# the reference the store's tree (memory/audit_tree.py) and the verifier's proof checks are tested on.


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: list[bytes]) -> bytes:
    """MTH(D[n]) over leaf hashes."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def inclusion_path(leaves: list[bytes], m: int) -> list[bytes]:
    """PATH(m, D[n])."""
    if len(leaves) <= 1:
        return []
    k = _split(len(leaves))
    if m < k:
        return [*inclusion_path(leaves[:k], m), mth(leaves[k:])]
    return [*inclusion_path(leaves[k:], m - k), mth(leaves[:k])]


def multiproof(leaves: list[bytes], indices: set[int]) -> list[bytes]:
    """The MTH of every maximal subtree of D[n] holding none of `indices`, left to right (none at all
    when `indices` is empty)."""

    def walk(d: list[bytes], offset: int) -> list[bytes]:
        if not any(offset <= i < offset + len(d) for i in indices):
            return [mth(d)]
        if len(d) == 1:
            return []
        k = _split(len(d))
        return [*walk(d[:k], offset), *walk(d[k:], offset + k)]

    return walk(leaves, 0) if indices else []


def consistency_proof(leaves: list[bytes], m: int) -> list[bytes]:
    """PROOF(m, D[n]) (empty for m = 0 and m = n)."""

    def sub(d: list[bytes], m: int, whole: bool) -> list[bytes]:
        if m == len(d):
            return [] if whole else [mth(d)]
        k = _split(len(d))
        if m <= k:
            return [*sub(d[:k], m, whole), mth(d[k:])]
        return [*sub(d[k:], m - k, False), mth(d[:k])]

    return [] if m == 0 else sub(leaves, m, True)


def _checkpoint(key: Ed25519PrivateKey, seq: int, head: str, root: str, at: str) -> dict[str, Any]:
    statement = canonical(
        {"type": "audit-checkpoint/v2", "seq": seq, "head_hash": head, "tree_size": seq, "root_hash": root, "at": at}
    )
    return {
        "seq": seq,
        "head_hash": head,
        "tree_size": seq,
        "root_hash": root,
        "at": at,
        "signature": base64.b64encode(key.sign(statement)).decode(),
    }


def sign_checkpoint(doc: dict[str, Any], which: str, key: Ed25519PrivateKey) -> None:
    """Re-sign the `before` or `after` checkpoint of `doc` in place (for tamper tests)."""
    cp = doc[which]
    doc[which] = _checkpoint(key, cp["seq"], cp["head_hash"], cp["root_hash"], cp["at"])


def audit_key(seed: int = 0) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"audit-key-%d" % seed).digest())


def entry_hash(prev: str, body: dict[str, Any]) -> str:
    return hashlib.sha256(prev.encode("ascii") + b"\n" + canonical(body)).hexdigest()


def audit_log(n_entries: int = 20, *, request_id: str = "req-0001") -> list[dict[str, Any]]:
    """A chain of `n_entries` (>= 4): every 5th entry before the last two holds the subject's email as
    a commitment, every 7th a bystander's; entry n-1 is an erasure step's event, entry n the audit-log
    step's `erasure.audit_redaction` naming `request_id`."""
    entries: list[dict[str, Any]]
    entries, prev = [], GENESIS
    n_redacted = len([s for s in range(1, n_entries - 1) if s % 5 == 0])
    for seq in range(1, n_entries + 1):
        at = f"2024-01-{1 + seq % 28:02d}T10:{seq % 60:02d}:00.000000Z"
        fields: dict[str, Any] = {"items": seq % 7}
        if seq % 5 == 0 and seq <= n_entries - 2:
            fields["email"] = {"commit": commit(b"salt-%d" % seq, SUBJECT["email"])}
        if seq % 7 == 0:
            fields["operator"] = {"commit": commit(b"op-%d" % seq, "Dana Operator")}
        event = "erasure.step" if seq > n_entries - 2 else "ingest"
        if seq == n_entries:
            event, fields = "erasure.audit_redaction", {"request_id": request_id, "redacted": n_redacted}
        entries.append({"seq": seq, "at": at, "event": event, "actor": "ingest-worker", "fields": fields})
    for e in entries:
        e["prev_hash"], e["entry_hash"] = (
            prev,
            entry_hash(prev, {k: e[k] for k in ("seq", "at", "event", "actor", "fields")}),
        )
        prev = e["entry_hash"]
    return entries


def evidence_of(
    log: list[dict[str, Any]],
    *,
    key: Ed25519PrivateKey | None = None,
    named_key: Ed25519PrivateKey | None = None,
    before: int | None = None,
    after: int | None = None,
    v2: bool = False,
) -> dict[str, Any]:
    """The `audit-log-redaction/v3` document of `log` (whose hashes are taken as they stand): checkpoints
    signed by `key` at `before` (default n-2) and `after` (default n), the entries holding the subject's
    email and the last `erasure.audit_redaction` entry (without entry_hash, and without prev_hash where
    the entry before is there too) and one multiproof of them. `v2`: the earlier format, an inclusion
    proof in each whole entry and the commitment in each redacted item. `named_key` is the key the
    document names (default `key`)."""
    key = key or audit_key()
    n = len(log)
    before = n - 2 if before is None else before
    after = n if after is None else after
    leaves = [leaf_hash(bytes.fromhex(e["entry_hash"])) for e in log[:after]]
    redacted = [
        {"seq": e["seq"], "field": "email", **({"commitment": e["fields"]["email"]["commit"]} if v2 else {})}
        for e in log[:after]
        if isinstance(e["fields"].get("email"), dict)
    ]
    redaction = [e["seq"] for e in log[before:after] if e["event"] == "erasure.audit_redaction"]
    seqs = sorted({e["seq"] for e in log[:after] if "email" in e["fields"]} | set(redaction[-1:]))
    if v2:
        entries = [
            {**copy.deepcopy(log[s - 1]), "inclusion": [h.hex() for h in inclusion_path(leaves, s - 1)]} for s in seqs
        ]
    else:
        entries = [
            {
                k: copy.deepcopy(v)
                for k, v in log[s - 1].items()
                if k != "entry_hash" and not (k == "prev_hash" and s - 1 in seqs)
            }
            for s in seqs
        ]
    public = (named_key or key).public_key()
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    head = {0: GENESIS, **{e["seq"]: e["entry_hash"] for e in log}}
    return {
        "format": "audit-log-redaction/v2" if v2 else "audit-log-redaction/v3",
        "checkpoint_key": {
            "key_id": hashlib.sha256(der).hexdigest(),
            "public_key_pem": pem.decode(),
            "algorithm": "ed25519",
        },
        "before": _checkpoint(key, before, head[before], mth(leaves[:before]).hex(), "2024-02-01T09:00:00.000000Z"),
        "after": _checkpoint(key, after, head[after], mth(leaves).hex(), "2024-02-01T09:05:00.000000Z"),
        "consistency": [h.hex() for h in consistency_proof(leaves, before)] if before < after else [],
        "entries": entries,
        **({} if v2 else {"multiproof": [h.hex() for h in multiproof(leaves, {s - 1 for s in seqs})]}),
        "redacted": redacted,
        "vault_remaining_for_subject": 0,
    }


def audit_document(
    n_entries: int = 20, *, key: Ed25519PrivateKey | None = None, request_id: str = "req-0001", v2: bool = False
) -> dict[str, Any]:
    """The evidence of `audit_log(n_entries)`: before at n-2, after at n (the redaction entry)."""
    return evidence_of(audit_log(n_entries, request_id=request_id), key=key, v2=v2)


def rehash_log(log: list[dict[str, Any]]) -> None:
    """Recompute every entry hash and link of `log` in place (a forger rewriting history)."""
    prev = GENESIS
    for e in log:
        e["prev_hash"], e["entry_hash"] = (
            prev,
            entry_hash(prev, {k: e[k] for k in ("seq", "at", "event", "actor", "fields")}),
        )
        prev = e["entry_hash"]


# --- the evidence directory ----------------------------------------------------------------------


def _steps(request_id: str, scenario: str) -> list[dict[str, Any]]:
    rows = []
    for i, tier in enumerate(TIERS):
        before = 3 + i
        status, after = "erased", 0
        if scenario == "exceptions" and tier == "fine_tune":
            status = "exception"
        if scenario == "skipped" and tier == "uploads":
            status, before = "skipped", 0
        rows.append(
            {
                "request_id": request_id,
                "step": tier,
                "status": status,
                "before_count": before,
                "after_count": after,
                "started_at": f"2024-02-01T09:0{i}:00Z",
                "ended_at": f"2024-02-01T09:0{i}:30Z",
                "removed_digest": hashlib.sha256(f"{tier}-{before}".encode()).hexdigest(),
                "detail": {"batches": 1},
            }
        )
    return rows


def _verification(request_id: str, scenario: str) -> dict[str, Any]:
    probes = [
        {"tier": t, "method": m, "residue": 0, "bystanders_before": 40, "bystanders_after": 40}
        for t in TIERS
        for m in (("rows", "bytes") if t != "subprocessors" else ("status",))
    ]
    exceptions: list[dict[str, Any]] = []
    all_clear = True
    if scenario == "residue":
        probes[[p["tier"] for p in probes].index("vectors")]["residue"] = 2
        all_clear = False
    if scenario == "exceptions":
        exceptions.append(
            {"tier": "fine_tune", "kind": "model_trained_on_subject", "item_key": "model-3", "ground": None}
        )
    return {
        "request_id": request_id,
        "verified_at": "2024-02-01T09:30:00Z",
        "all_clear": all_clear,
        "probes": probes,
        "exceptions": exceptions,
    }


def evidence_files(
    request_id: str = "req-0001", scenario: str = "erased", *, n_receipts: int = 3, n_audit: int = 20
) -> dict[str, bytes]:
    """The five evidence files of a synthetic request, as bytes."""
    salt = b"vault-salt-" + request_id.encode()
    request = {
        "request_id": request_id,
        "tenant_id": "tenant-a",
        "legal_basis": "gdpr-art17",
        "received_at": "2024-01-31T09:00:00Z",
        "deadline": "2024-02-29T23:59:59Z",
        "data_classes": list(TIERS),
        "subject_commitments": {k: commit(salt, v) for k, v in SUBJECT.items()},
        "reason_digest": hashlib.sha256(b"withdrawn consent").hexdigest(),
    }
    receipts = [
        {
            "request_id": request_id,
            "processor": f"proc-{i:04d}",
            "ticket_id": f"T-{i:06d}",
            "status": "done",
            "requested_at": "2024-02-01T09:07:00Z",
            "completed_at": "2024-02-01T09:08:00Z",
        }
        for i in range(n_receipts)
    ]
    return {
        "request.json": (json.dumps(request, indent=2, sort_keys=True) + "\n").encode(),
        "steps.jsonl": "".join(json.dumps(r, sort_keys=True) + "\n" for r in _steps(request_id, scenario)).encode(),
        "verification.json": (
            json.dumps(_verification(request_id, scenario), indent=2, sort_keys=True) + "\n"
        ).encode(),
        "subprocessor-receipts.jsonl": "".join(json.dumps(r, sort_keys=True) + "\n" for r in receipts).encode(),
        "audit-log-redaction.json": (
            json.dumps(audit_document(n_audit, request_id=request_id), indent=2, sort_keys=True) + "\n"
        ).encode(),
    }


def make_evidence(
    root: Path, request_id: str = "req-0001", scenario: str = "erased", *, n_receipts: int = 3, n_audit: int = 20
) -> Path:
    """Write the evidence dir `root/evidence/erasure/<request_id>/` and return it."""
    out = root / "evidence" / "erasure" / request_id
    out.mkdir(parents=True, exist_ok=True)
    for name, data in evidence_files(request_id, scenario, n_receipts=n_receipts, n_audit=n_audit).items():
        (out / name).write_bytes(data)
    return out


# --- keys ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Keys:
    engine: Path
    engine_pub: Path
    dpo: Path
    dpo_pub: Path
    audit_pub: Path
    """The synthetic store's audit checkpoint public key (`audit_key()`), to pin with --audit-key."""

    @property
    def engine_pem(self) -> bytes:
        return self.engine_pub.read_bytes()

    @property
    def dpo_pem(self) -> bytes:
        return self.dpo_pub.read_bytes()


def make_keys(directory: Path, algorithm: str = "ecdsa-p256", dpo_algorithm: str | None = None) -> Keys:
    e = generate_keypair("engine", directory, algorithm=algorithm)
    d = generate_keypair("dpo", directory, algorithm=dpo_algorithm or algorithm)
    audit_pub = directory / "audit.pub.pem"
    audit_pub.write_bytes(
        audit_key()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return Keys(e.private, e.public, d.private, d.public, audit_pub)


# --- archive surgery -----------------------------------------------------------------------------


def read_members(pack: Path | bytes) -> tuple[str, dict[str, bytes]]:
    """(top dir, {relative path: bytes}) of a pack, read with tarfile directly (no checks)."""
    data = pack if isinstance(pack, bytes) else pack.read_bytes()
    files: dict[str, bytes] = {}
    top = ""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            top = m.name.split("/")[0]
            if m.isfile():
                fh = tar.extractfile(m)
                assert fh is not None
                files[m.name.split("/", 1)[1]] = fh.read()
    return top, files


def repack(top: str, files: dict[str, bytes]) -> bytes:
    """A well-formed tar.gz of `files` under `top/` (no re-signing)."""
    return tar_gz_bytes(top, files)


def raw_tar(entries: list[tarfile.TarInfo | tuple[str, bytes]], fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    """A tar.gz of arbitrary entries: TarInfo objects (links, devices...) or (name, bytes) files."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as tar:
        for e in entries:
            if isinstance(e, tarfile.TarInfo):
                tar.addfile(e)
            else:
                info = tarfile.TarInfo(e[0])
                info.size = len(e[1])
                tar.addfile(info, io.BytesIO(e[1]))
    return gz(raw.getvalue())


BLOCK = 512
END_OF_ARCHIVE = b"\0" * (2 * BLOCK)


def tar_member(
    name: str,
    data: bytes = b"",
    *,
    kind: bytes = tarfile.REGTYPE,
    fmt: Literal[0, 1, 2] = tarfile.USTAR_FORMAT,
    pax: dict[str, str] | None = None,
) -> bytes:
    """One tar member as raw blocks (header(s), data, zero padding), with no end-of-archive."""
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode = kind, len(data) if kind == tarfile.REGTYPE else 0, 0o644
    info.uname = info.gname = ""
    if pax:
        info.pax_headers = pax
    pad = (-len(data)) % BLOCK
    return info.tobuf(fmt, "utf-8", "surrogateescape") + data + b"\0" * pad


def tar_blocks(top: str, files: dict[str, bytes]) -> bytes:
    """The members of a pack (directories and files, sorted as the writer sorts them), no end-of-archive."""
    raw = gzip.decompress(tar_gz_bytes(top, files))
    pos = 0
    while raw[pos : pos + BLOCK].strip(b"\0"):
        size = int(raw[pos + 124 : pos + 136].strip(b"\0 ") or b"0", 8)
        pos += BLOCK + -(-size // BLOCK) * BLOCK
    return raw[:pos]


def finish_tar(blocks: bytes) -> bytes:
    """`blocks`, the end-of-archive marker and zero padding to a 10 KiB record, as the writer ends a tar."""
    out = blocks + END_OF_ARCHIVE
    return out + b"\0" * ((-len(out)) % tarfile.RECORDSIZE)


def gz(data: bytes) -> bytes:
    """One gzip member of `data`, with the writer's header (mtime 0, no name, XFL 0, OS 255)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="", compresslevel=6) as fh:
        fh.write(data)
    return out.getvalue()


def pack_entries(top: str, files: dict[str, bytes]) -> list[tarfile.TarInfo | tuple[str, bytes]]:
    """The entries of a pack, for `raw_tar` with extra hostile ones."""
    return [(f"{top}/{name}", data) for name, data in sorted(files.items())]


def reseal(
    files: dict[str, bytes], engine_key: Path, *, edit: Callable[[dict[str, Any]], object] | None = None
) -> dict[str, bytes]:
    """Re-derive and RE-SIGN an engine pack from (possibly tampered) evidence files with the real
    engine key, bypassing the writer's consistency checks: an insider with the key. `edit` may
    change the predicate before signing."""
    ev = Evidence(
        files={
            k: files[k]
            for k in (
                "request.json",
                "steps.jsonl",
                "verification.json",
                "subprocessor-receipts.jsonl",
                "audit-log-redaction.json",
            )
        },
        request=json.loads(files["request.json"]),
        steps=[json.loads(x) for x in files["steps.jsonl"].decode().splitlines() if x.strip()],
        verification=json.loads(files["verification.json"]),
    )
    key = load_private_key(engine_key)
    from proof.keys import keyid

    predicate = build_predicate(ev, keyid(key), DEFAULT_OUT_OF_SCOPE)
    if edit is not None:
        edit(predicate)
    return seal_files(ev.files, predicate, key)


def json_edit(data: bytes, change: Callable[[Any], object]) -> bytes:
    """Apply `change` to a JSON document's parsed form and re-serialise it."""
    doc = json.loads(data)
    change(doc)
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def jsonl_edit(data: bytes, change: Callable[[list[dict[str, Any]]], object]) -> bytes:
    rows = [json.loads(x) for x in data.decode().splitlines() if x.strip()]
    change(rows)
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()


def resign_statement(files: dict[str, bytes], engine_key: Path) -> None:
    """Re-sign the engine envelope over the current files, keeping its predicate (in place)."""
    from proof.dsse import sign_envelope
    from proof.statement import erasure_statement
    from wire.format import envelope_bytes

    env = json.loads(files["signatures/engine.intoto.json"])
    predicate = json.loads(base64.b64decode(env["payload"]))["predicate"]
    statement = erasure_statement(files, predicate)
    files["signatures/engine.intoto.json"] = envelope_bytes(sign_envelope(statement, load_private_key(engine_key)))


def sums_of(files: dict[str, bytes]) -> bytes:
    """A SHA256SUMS over manifest.json and the files it lists."""
    listed = [e["path"] for e in json.loads(files["manifest.json"])["files"]] + ["manifest.json"]
    return "".join(f"{hashlib.sha256(files[p]).hexdigest()}  {p}\n" for p in sorted(listed)).encode()
