"""A proof pack given by its file (`erasure pack ...`, `erasure attest`, the end of `erasure request
run`): build it, show it, attest it as the DPO, verify it offline with the keys given; and the words a
person reads about it (`printable`, `exception_line`), which the standalone verifier prints too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from erasure.config import Home
from erasure.errors import ConfigError, ErasureError
from erasure.exception_kinds import explain
from proof import verify as verifier
from proof.history import current_pack
from proof.keyring import read_beside
from proof.keys import load_private_key, public_key_pem
from proof.pack import PACK_NAME, attest, write_pack
from proof.review import summary
from proof.verify import PackError, VerifyResult, printable
from proof.verify.keyring import read_keyring
from wire.explain import exception_line
from wire.format import ERASED

__all__ = [
    "PACK_NAME",
    "PackError",
    "attest_pack",
    "build_pack",
    "exception_line",
    "newest_pack",
    "pack_file",
    "pack_verdict",
    "printable",
    "review_pack",
    "verify_pack",
]


def newest_pack(h: Home, request_id: str) -> Path:
    """The request's newest pack (`proof.history.current_pack`; the first pack's path when none yet)."""
    return current_pack(h.evidence_dir(request_id))


def pack_file(path: Path) -> Path:
    """A pack given as its file, or as its evidence directory (then its newest pack)."""
    return current_pack(path) if path.is_dir() else path


def read_key(path: Path, role: str) -> bytes:
    """A key file, read up to the verifier's cap (the zero device is refused, not read for ever)."""
    try:
        return verifier.read_key(path, role)
    except PackError as exc:
        raise ConfigError(str(exc)) from exc


def _read_keyring(path: Path) -> bytes:
    """A keyring file, read up to the verifier's cap."""
    try:
        return read_keyring(str(path))
    except PackError as exc:
        raise ConfigError(str(exc)) from exc


def build_pack(
    h: Home, target: str, *, key: Path | None = None, passphrase: str | None = None, out: Path | None = None
) -> tuple[Path, dict[str, Any]]:
    """Sign the evidence of one request (`target`: its evidence directory, or a request id) with the
    engine key (default: the home's keys/engine.pem) and write the pack; with the home's keyring, a key
    it retired signs nothing. Returns the pack and its summary."""
    path = Path(target)
    if not path.is_dir():
        path = h.evidence_dir(target)
    ring = read_beside(h.keys_dir)
    pack = write_pack(path, key or h.keys_dir / "engine.pem", passphrase=passphrase, out=out, keyring=ring)
    return pack, summary(pack)


def review_pack(
    pack: Path, *, engine_key: Path | None = None, dpo_key: Path | None = None, keyring: Path | None = None
) -> dict[str, Any]:
    """What the DPO reviews (status per tier, exceptions, scope, probes, receipts, keys), the signatures
    checked with the trusted keys or keyring given."""
    return summary(
        pack_file(pack),
        engine_pub=read_key(engine_key, "engine") if engine_key else None,
        dpo_pub=read_key(dpo_key, "DPO") if dpo_key else None,
        keyring=_read_keyring(keyring) if keyring else None,
    )


def attest_pack(
    pack: Path,
    key: Path,
    *,
    engine_key: Path | None = None,
    keyring: Path | None = None,
    passphrase: str | None = None,
    force: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """As the DPO: sign the pack's attestation with `key` (rewrites the pack). Returns the pack and its
    summary after, the attestation checked with the DPO's own public key (or the keyring)."""
    path = pack_file(pack)
    engine_pem = read_key(engine_key, "engine") if engine_key else None
    ring = _read_keyring(keyring) if keyring else None
    attest(path, key, engine_pub=engine_pem, passphrase=passphrase, force=force, keyring=ring)
    dpo_pub = public_key_pem(load_private_key(key, passphrase).public_key())
    return path, summary(path, engine_pub=engine_pem, dpo_pub=dpo_pub if ring is None else None, keyring=ring)


def verify_pack(
    pack: Path,
    *,
    engine_key: Path | None = None,
    dpo_key: Path | None = None,
    require_dpo: bool = True,
    audit_key: Path | None = None,
    keyring: Path | None = None,
    tsa_root: Path | None = None,
) -> VerifyResult:
    """The offline verifier (`python -m proof.verify`) on one pack with the keys given; `PackError`
    names the check that failed."""
    return verifier.verify_pack(
        pack_file(pack),
        read_key(engine_key, "engine") if engine_key else None,
        read_key(dpo_key, "DPO") if dpo_key else None,
        require_dpo=require_dpo,
        audit_pub_pem=read_key(audit_key, "audit") if audit_key else None,
        keyring=_read_keyring(keyring) if keyring else None,
        tsa_root_pem=read_key(tsa_root, "TSA root") if tsa_root else None,
    )


def pack_verdict(h: Home, request_id: str) -> dict[str, Any] | None:
    """The status the request's newest pack states (`all_clear`: whether that status is erased) and its
    exceptions, each with its explanation (None: no pack). What `erasure request run --json` says
    about all clear is read from here, so it never contradicts the pack."""
    path = newest_pack(h, request_id)
    if not path.is_file():
        return None
    try:
        s = summary(path)
    except ErasureError as exc:  # a pack that does not check says so, never all clear
        return {"status": f"unreadable ({exc})", "all_clear": False, "exceptions": []}
    exceptions = [
        {"tier": e.get("tier"), "kind": e.get("kind"), "meaning": explain(str(e.get("kind")))}
        for e in s["exceptions"]
        if isinstance(e, dict)
    ]
    return {"status": s["status"], "all_clear": s["status"] == ERASED, "exceptions": exceptions}
