"""The regulator's export of a sealed request (`erasure export`, the request desk's download): the
pack, the keys that signed it, VERIFY.md and the offline verifier; checked before anything is given."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes

from erasure.config import Home
from erasure.errors import ConfigError, Conflict, InputError, RequestBlocked
from erasure.request_ids import REQUEST_ID_MAX_CHARS
from proof.errors import PackRejected
from proof.evidence import REQUEST_ID
from proof.evidence_folder import EvidenceFolder
from proof.keyring import read_beside
from proof.keys import keyid, load_public_key
from proof.review import summary
from proof.tarball import write_atomic
from proof.tsa import TSA_ROOT_ENV
from proof.verifier_zipapp import VERIFIER_ZIPAPP, verifier_zipapp
from proof.verify import PackError, printable, verify_bytes
from proof.verify.keyring import KEYRING_FILE, pem_of
from service import signoff
from service.verify_note import TSA_STEPS, verify_md
from wire.format import followup_name, sha256_hex


def _audit_pub(h: Home) -> bytes | None:
    """The store's audit checkpoint public key, or None when the home keeps no audit log of its own."""
    from service.scope import audit_public_pem

    return audit_public_pem(h)


def _keys_from_keyring(pack: Path, ring: bytes, dpo_key: Path | None) -> tuple[dict[str, Any], bytes, bytes]:
    """With a keyring: the pack's summary checked against it, and the two public keys that signed the
    pack (the keyring's, by the envelopes' key ids). A `--dpo-key` given must be the one that attested."""
    s = summary(pack, keyring=ring)
    if not s["attested"] or s["dpo_keyid"] is None:
        raise RequestBlocked(f"the pack at {pack} is not sealed yet: the DPO must attest it first")
    try:
        engine_pub, dpo_pub = pem_of(ring, s["engine_keyid"]), pem_of(ring, s["dpo_keyid"])
    except PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc
    if dpo_key is not None and keyid(load_public_key(dpo_key)) != s["dpo_keyid"]:
        raise Conflict(f"--dpo-key {dpo_key} is not the key that attested the pack (keyid {s['dpo_keyid'][:16]}...)")
    return s, engine_pub, dpo_pub


def _keyring_slots(ring: bytes | None) -> dict[str, str]:
    """VERIFY.md's keyring slots: the keyring to pin, or the two keys when the home has no keyring."""
    if ring is None:
        return {
            "keyring_intro": "",
            "keyring_confirm": "",
            "key_args": "--engine-key engine.pub.pem --dpo-key dpo.pub.pem",
            "keyring": '""',
        }
    return {
        "keyring_intro": (
            f"\n\n`{KEYRING_FILE}` is the keyring: every engine and DPO key the controller has used, each"
            "\nwith its role and validity period (keys are rotated; a retired key stays in it for the packs"
            "\nit signed before). Pin the keyring rather than single keys: the verifier then takes each"
            "\nsignature's key from it and refuses one made outside that key's validity."
        ),
        "keyring_confirm": (
            f"\n   Confirm the keyring the same way: `sha256sum {KEYRING_FILE}` must print"
            f"\n   `{sha256_hex(ring)}`;"
            "\n   the two key ids above must be in it, the engine's as an engine key and the DPO's as a DPO"
            "\n   key (the recipe checks both, and that each key was valid when it signed)."
        ),
        "key_args": f"--keyring {KEYRING_FILE}",
        "keyring": f"$PWD/{KEYRING_FILE}",
    }


def _tsa_root_pem(option: Path | None) -> bytes:
    """The TSA root to pin for a pack whose times are RFC 3161 timestamps: `--tsa-root`, else
    `$ERASURE_TSA_ROOT`; `ConfigError` without one (the regulator must be able to check the tokens)."""
    path = option or (Path(os.environ[TSA_ROOT_ENV]) if os.environ.get(TSA_ROOT_ENV) else None)
    if path is None or not path.is_file():
        raise ConfigError(
            "this pack's times are RFC 3161 timestamps: give --tsa-root (or set ERASURE_TSA_ROOT) with the"
            " timestamp authority's root certificate, so the regulator can check them"
        )
    return path.read_bytes()


def _tsa_slots(tsa_pem: bytes, engine_time: str | None, dpo_time: str | None) -> dict[str, str]:
    """VERIFY.md's trusted-time slots: the root's fingerprint, the verifier's argument, the openssl steps."""
    root = x509.load_pem_x509_certificates(tsa_pem)[0]
    fingerprint = root.fingerprint(hashes.SHA256()).hex()
    return {
        "tsa_fingerprint": f", and the timestamp authority's root certificate `tsa-root.pem`, SHA-256 fingerprint"
        f" `{fingerprint}` (`openssl x509 -in tsa-root.pem -noout -fingerprint -sha256`)",
        "tsa_arg": " --tsa-root tsa-root.pem",
        "tsa_steps": TSA_STEPS,
        "token_count": "2",
        "times": printable(
            f"Times: RFC 3161 timestamps from the TSA `{root.subject.rfc4514_string()}`: the engine's signature"
            f" at {engine_time}, the DPO's at {dpo_time} (signatures/engine.tsr, signatures/dpo.tsr)."
        ),
    }


def refuse_unsafe_target(to: Path, force: bool) -> None:
    """`--to` is a real directory (not a symlink), new or empty unless `force`."""
    if to.is_symlink():
        raise InputError(f"--to {to} is a symbolic link: give the directory itself")
    if to.exists() and not to.is_dir():
        raise InputError(f"--to {to} is not a directory")
    if to.exists() and any(to.iterdir()) and not force:
        raise Conflict(f"--to {to} is not empty: pass --force to replace the exported files in it")


def check_request_id(request_id: str) -> None:
    """`InputError` unless `request_id` is a request id (it names a folder and files)."""
    if not REQUEST_ID.fullmatch(request_id):
        raise InputError(
            f"{printable(request_id)!r} is not a request id (1-{REQUEST_ID_MAX_CHARS} of"
            " A-Z a-z 0-9 . _ -, starting with a letter or digit)"
        )


def export_files(
    h: Home, request_id: str, *, dpo_key: Path | None = None, tsa_root: Path | None = None
) -> dict[str, bytes]:
    """The regulator's export of a sealed request, by file name: the pack (`<request>-proof.tar.gz`),
    the public keys (or the keyring), the audit and TSA keys where they apply, the re-verification
    statements, VERIFY.md and the verifier (`erasure-verify.pyz`). The pack must verify with the
    engine's key AND the DPO's trusted key (default: the home's keys/dpo.pub.pem) before anything is
    returned; with a keyring in the home's keys folder, against it too, and the keys are the keyring's
    that signed this pack. `erasure export` writes them into a folder, the request desk zips them."""
    check_request_id(request_id)
    pack = signoff.pack_path(h, request_id)
    ring = read_beside(h.keys_dir)
    data = pack.read_bytes()
    if ring is not None:
        s, engine_pub, dpo_pub = _keys_from_keyring(pack, ring, dpo_key)
    else:
        engine_pub_path = signoff.engine_pub_path(h)
        dpo_pub_path = dpo_key or h.keys_dir / "dpo.pub.pem"
        if not dpo_pub_path.is_file():
            raise ConfigError(f"no DPO public key at {dpo_pub_path}: pass --dpo-key with the DPO's trusted public key")
        engine_pub, dpo_pub = engine_pub_path.read_bytes(), dpo_pub_path.read_bytes()
        s = summary(pack, engine_pub=engine_pub, dpo_pub=dpo_pub)
    if not s["attested"]:
        raise RequestBlocked(f"the pack of {request_id} is not sealed yet: the DPO must attest it first")
    if pack.read_bytes() != data:
        raise Conflict(f"the pack of {request_id} changed while it was being checked: export again")
    audit_pub = _audit_pub(h)
    try:
        result = verify_bytes(data, engine_pub, dpo_pub, audit_pub_pem=audit_pub)
        tsa_pem = _tsa_root_pem(tsa_root) if result.timestamps != "engine clock" else None
        if tsa_pem is not None:
            result = verify_bytes(data, engine_pub, dpo_pub, audit_pub_pem=audit_pub, tsa_root_pem=tsa_pem)
        if ring is not None:
            verify_bytes(data, None, None, audit_pub_pem=audit_pub, keyring=ring, tsa_root_pem=tsa_pem)
    except PackError as exc:
        raise PackRejected(exc.check, str(exc)) from exc
    # Re-verifications signed since the pack (issue 27): they go along, and VERIFY.md checks them.
    folder = EvidenceFolder(pack.parent)
    statements = folder.statements(pack)
    # The whole history goes along (issue 34): every earlier pack and every pack's statements.
    history = {f"{request_id}-{p.name}": p.read_bytes() for p in folder.packs if p != pack}
    chains = sorted(s for p in folder.packs for s in folder.statements(p))
    name = f"{request_id}-{pack.name}"
    # Each pack's backups follow-up, named as the verifier looks for it beside the pack's exported name.
    followups = {
        followup_name(f"{request_id}-{p.name}"): f.read_bytes() for p in folder.packs if (f := folder.followup(p))
    }
    note = verify_md(
        **_keyring_slots(ring),
        request_id=request_id,
        pack=name,
        name_digest=s["pack_name"],
        engine_keyid=s["engine_keyid"],
        audit_keyid=keyid(load_public_key(audit_pub)) if audit_pub else "(none: no audit log)",
        audit_arg="--audit-key audit.pub.pem" if audit_pub else "--no-audit-key",
        dpo_keyid=str(s["dpo_keyid"]),
        status=s["status"],
        all_clear=str(s["all_clear"]).lower(),
        verified_at=printable(str(s["verified_at"])),
        attested_at=printable(str(s["attested_at"])),
        **(_tsa_slots(tsa_pem, result.engine_timestamp, result.dpo_timestamp) if tsa_pem is not None else {}),
        reverify_arg=(" --reverify " + " ".join(p.name for p in statements)) if statements else "",
    )
    files: dict[str, bytes] = {
        name: data,
        "engine.pub.pem": engine_pub,
        "dpo.pub.pem": dpo_pub,
        **({"audit.pub.pem": audit_pub} if audit_pub else {}),
        **({KEYRING_FILE: ring} if ring is not None else {}),
        **({"tsa-root.pem": tsa_pem} if tsa_pem else {}),
        **history,
        **{p.name: p.read_bytes() for p in chains},
        **followups,
        "VERIFY.md": note.encode("utf-8"),
        VERIFIER_ZIPAPP: verifier_zipapp(),
    }
    return files


def export_zip(h: Home, request_id: str) -> bytes:
    """The regulator's export as one zip (a folder `<request>-export/` of `export_files`), for a
    download: reproducible (sorted names, a fixed time), files 0644."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for fname, body in sorted(export_files(h, request_id).items()):
            info = zipfile.ZipInfo(f"{request_id}-export/{fname}", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, body)
    return buf.getvalue()


def export_to(
    h: Home,
    request_id: str,
    to: Path,
    *,
    force: bool = False,
    dpo_key: Path | None = None,
    tsa_root: Path | None = None,
) -> list[str]:
    """`erasure export`: the checked `export_files` written into `to` (a real directory, new or empty
    unless `force`; one rename a file, so a symbolic link in the way is replaced, never followed).
    Returns the names in `to`, sorted."""
    check_request_id(request_id)
    refuse_unsafe_target(to, force)
    files = export_files(h, request_id, dpo_key=dpo_key, tsa_root=tsa_root)
    refuse_unsafe_target(to, force)
    to.mkdir(parents=True, exist_ok=True)
    for fname, body in files.items():
        write_atomic(to / fname, body, 0o644)
    return sorted(p.name for p in to.iterdir())


def dpo_kit_to(h: Home, to: Path, request_id: str | None = None, *, force: bool = False) -> list[str]:
    """`erasure export --dpo-kit`: the DPO's signing kit (`service.dpo_kit`) written into `to` (checked
    as for an export). Returns the names written, sorted."""
    from service.dpo_kit import write_dpo_kit

    if request_id is not None:
        check_request_id(request_id)
    refuse_unsafe_target(to, force)
    return write_dpo_kit(h, to, request_id)
