"""The subject's fingerprint, taken by the probes' own code BEFORE the cascade (`probes.fingerprint`), and
its sealing.

What it holds: the keys that reach the subject in every tier (`probes.keys.SubjectKeys`), the byte-scan
needles (identifiers, distinctive content windows, raw float32 vector pieces, blob pieces, and
bystander canaries), the subject's vectors for the nearest-neighbour probe, and a baseline measured by
the same tier probes that verify afterwards: per tier and method, the subject's residue before (what
the probe could see then) and the size of every bystander population (what must survive).

Needles never reach disk in plaintext. The lifecycle, designed for a crash anywhere:
1. before the cascade the flow calls `probes.fingerprint.take_fingerprint` and
   `fp.seal(ciphertext_path, key_path)`: the whole fingerprint is encrypted with AES-256-GCM under a
   fresh random key; the key goes to its own file (mode 0600), then the ciphertext (0600), each
   written atomically (temp file, fsync, rename).
   `seal` refuses to replace a complete sealed pair (`Conflict`): a rerun must never trade the
   before-cascade fingerprint for one taken from a half-erased store.
2. the cascade runs; it may crash. A rerun finds both files and calls `Fingerprint.unseal(...)`
   instead of taking a new fingerprint (the subject's data may already be partly gone).
3. verification runs the probes and finally calls `destroy(ciphertext_path, key_path)`: the key file
   is overwritten with random bytes, fsynced and unlinked first (that alone makes the ciphertext
   unreadable), then the ciphertext likewise. `destroy` is idempotent.
A crash between 1's two writes leaves a key without ciphertext: `sealed_pair_exists` is false, and a
new `seal` replaces the leftover.
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from pathlib import Path
from typing import Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from erasure.errors import Conflict, ErasureError, InputError
from probes.harvest import VectorRef
from probes.keys import SubjectKeys
from probes.needles import Needle
from probes.targets.probe import TargetFingerprint

FORMAT: Literal["probe-fingerprint/v1"] = "probe-fingerprint/v1"
_MAGIC = b"PFP1"
BYSTANDER_STATE = ("bystander_digests",)
"""Keys of a target fingerprint's `state` that belong to the bystander baseline (content digests of
other people's records), retaken with it."""
_NONCE = 12


class FingerprintError(ErasureError):
    """A sealed fingerprint is missing, unreadable or was tampered with."""


class Fingerprint(BaseModel):
    """Everything the probes need to re-probe after the cascade. Sensitive: seal it, never log it
    (its repr shows counts only)."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")

    format: Literal["probe-fingerprint/v1"] = FORMAT
    subject_id: str = Field(repr=False)
    subject_ids: list[str] = Field(default_factory=list, repr=False)
    """The subject's ids as the store spelled them before the cascade (`probes.identity.store_ids`)."""
    taken_at: datetime
    keys: SubjectKeys = Field(repr=False)
    needles: list[Needle] = Field(default_factory=list, repr=False)
    vectors: list[VectorRef] = Field(default_factory=list, repr=False)
    needle_stats: dict[str, int] = Field(default_factory=dict)
    """What the needles hold and what was withheld, by kind and reason (counts only)."""
    targets: dict[str, TargetFingerprint] = Field(default_factory=dict, repr=False)
    """The other targets' fingerprints, by target name (`probes.targets`)."""
    window: str | None = None
    """The window whose shared bystander baseline this fingerprint holds (`probes.window`)."""
    window_entity_ids: list[int] = Field(default_factory=list)
    """Entities linked only to the window's frames, though to no one subject's alone (`probes.window`)."""
    baseline: str = "before-cascade"
    """`before-cascade`; `retaken-after-another-erasure` when a rerun found that another subject's
    erasure changed the store after this fingerprint was sealed; `retaken-after-bystanders-lost` when
    the run that sealed it ended with other people's data lost (exit 10): that run's erasure made the
    baseline stale, and every rerun would be measured against what is no longer there. Either way
    the bystander baseline is new and the subject's needles are the ones from before the cascade."""
    bystanders: dict[str, int] = Field(default_factory=dict)
    """`<tier>/<population>` -> size before the cascade."""
    subject_before: dict[str, int] = Field(default_factory=dict)
    """`<tier>/<method>` -> the subject's residue as each probe saw it before the cascade."""

    def with_bystanders_of(self, fresh: Fingerprint, baseline: str) -> Fingerprint:
        """This fingerprint (the subject's keys, needles and residue from before the cascade) with the
        bystander baseline of `fresh`, taken now: the reference store's populations and every
        target's populations and content digests."""
        targets = {}
        for name, old in self.targets.items():
            new = fresh.targets.get(name)
            if new is None:
                targets[name] = old
                continue
            state = {**old.state, **{k: new.state[k] for k in BYSTANDER_STATE if k in new.state}}
            targets[name] = old.model_copy(update={"bystanders": new.bystanders, "state": state})
        return self.model_copy(
            update={
                "bystanders": fresh.bystanders,
                "targets": targets,
                "taken_at": fresh.taken_at,
                "baseline": baseline,
            }
        )

    def needle_bytes(self) -> list[bytes]:
        """The needles' bytes, in order (index = needle index in a scan report)."""
        return [n.data for n in self.needles]

    def subject_counts(self) -> dict[str, int]:
        """Per tier, the subject's items before the cascade (the largest count any method saw)."""
        out: dict[str, int] = {}
        for key, n in self.subject_before.items():
            tier = key.split("/", 1)[0]
            out[tier] = max(out.get(tier, 0), n)
        return out

    def bystander_counts(self) -> dict[str, int]:
        """Per tier, the bystanders' items before the cascade (sum over populations)."""
        out: dict[str, int] = {}
        for key, n in self.bystanders.items():
            tier = key.split("/", 1)[0]
            out[tier] = out.get(tier, 0) + n
        return out

    def seal(self, path_ciphertext: Path, key_path: Path) -> None:
        """Encrypt the whole fingerprint to `path_ciphertext` under a fresh key written to `key_path`."""
        path_ciphertext, key_path = Path(path_ciphertext), Path(key_path)
        if path_ciphertext.resolve() == key_path.resolve():
            raise InputError("the fingerprint and its key must be separate files")
        if sealed_pair_exists(path_ciphertext, key_path):
            raise Conflict("a sealed fingerprint already exists for this request: unseal it instead")
        destroy(path_ciphertext, key_path)
        key = AESGCM.generate_key(bit_length=256)
        nonce = os.urandom(_NONCE)
        sealed = AESGCM(key).encrypt(nonce, self.model_dump_json().encode(), _MAGIC)
        _write_private(key_path, key)
        _write_private(path_ciphertext, _MAGIC + nonce + sealed)

    @classmethod
    def unseal(cls, path_ciphertext: Path, key_path: Path) -> Fingerprint:
        """Load a fingerprint sealed by `seal` (`FingerprintError` if missing, altered or unreadable)."""
        try:
            key = Path(key_path).read_bytes()
            blob = Path(path_ciphertext).read_bytes()
        except FileNotFoundError as exc:
            raise FingerprintError("the sealed fingerprint or its key is missing") from exc
        if not blob.startswith(_MAGIC) or len(key) != 32:
            raise FingerprintError("the sealed fingerprint is not in a known format")
        nonce, sealed = blob[len(_MAGIC) : len(_MAGIC) + _NONCE], blob[len(_MAGIC) + _NONCE :]
        try:
            plain = AESGCM(key).decrypt(nonce, sealed, _MAGIC)
            return cls.model_validate_json(plain)
        except (InvalidTag, ValidationError) as exc:
            raise FingerprintError("the sealed fingerprint failed authentication") from exc

    @staticmethod
    def destroy(path_ciphertext: Path, key_path: Path) -> None:
        """Overwrite and remove both files (key first); see the module function."""
        destroy(path_ciphertext, key_path)


def sealed_pair_exists(path_ciphertext: Path, key_path: Path) -> bool:
    """Both files of a sealed fingerprint are present."""
    return Path(path_ciphertext).is_file() and Path(key_path).is_file()


def destroy(path_ciphertext: Path, key_path: Path) -> None:
    """Overwrite with random bytes, fsync and unlink the key, then the ciphertext. Idempotent.

    On copy-on-write or wear-levelled storage the old blocks may survive the overwrite; destroying the
    key is what makes the ciphertext useless.
    """
    paths = [Path(key_path), Path(path_ciphertext)]
    for p in list(paths):  # temp files a crash inside `_write_private` may have left
        paths += sorted(p.parent.glob(f".{p.name}.*.tmp")) if p.parent.is_dir() else []
    for path in paths:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        with contextlib.suppress(FileNotFoundError):
            with open(path, "r+b", buffering=0) as f:
                f.write(os.urandom(size))
                os.fsync(f.fileno())
            path.unlink()


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
