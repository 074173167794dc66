"""The keyring: the public keys a regulator pins once, each with its role and validity period, so
that packs signed before a key rotation keep verifying and a retired key signs nothing new.

A keyring file (`keyring.json`, written by `erasure keys generate` and `erasure keys rotate`) is
strict, canonical JSON (`keyring_bytes`: sorted keys, two-space indent, one final newline; its
sha256 is the one fingerprint to confirm with the controller):

    {"format": "erasure-keyring/v1",
     "keys": [{"keyid": <sha256 of the SPKI DER>, "role": "engine" | "dpo",
               "algorithm": "ecdsa-p256" | "ed25519", "public_key_pem": <PEM>,
               "valid_from": "YYYY-MM-DDTHH:MM:SSZ", "valid_until": "YYYY-MM-DDTHH:MM:SSZ" | null}, ...]}

Entries are sorted by (role, valid_from, keyid); times are whole UTC seconds; a key is valid at `t`
when `valid_from <= t < valid_until` (`valid_until` null: the role's current key, at most one per
role); the windows of one role do not overlap; no key appears twice.

With a keyring the verifier (check 2) takes the key each envelope names by keyid, refuses a keyid
the keyring does not hold or one of the other role, and, once the statements are read, refuses a
signature made outside its key's validity. The signing time is the time inside the signed
statement: the engine's `verified_at` (the engine signs when its verification ends), the DPO's
`attested_at`. Every failure is a `SignatureError`; an unusable keyring is a `KeyArgumentError`.
A backups follow-up beside the pack is checked with the engine key its envelope names, valid at its
`stated_at` (`followup_key`).

What a keyring cannot stop on its own: whoever still holds a retired private key can date a new
statement inside that key's old window (the times are the signer's own); a timestamp the signer does
not choose (RFC 3161) is what closes that.

Stdlib and cryptography only, like the rest of the verifier.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from proof.verify.envelopes import PublicKey, load_public_key, read_bounded, unverified_payload
from proof.verify.errors import KeyArgumentError, SignatureError, fail
from proof.verify.files import read_regular
from proof.verify.strict_json import json_object, parse_json, utc_time
from wire.format import DPO_ENVELOPE, ENGINE_ENVELOPE, FOLLOWUP_MAX_BYTES, keyid_of

KEYRING_FORMAT = "erasure-keyring/v1"
KEYRING_FILE = "keyring.json"
ROLES = ("engine", "dpo")
ALGORITHMS = ("ecdsa-p256", "ed25519")
MAX_KEYRING_BYTES = 1024 * 1024
MAX_KEYS = 1000
ENTRY_FIELDS = frozenset({"keyid", "role", "algorithm", "public_key_pem", "valid_from", "valid_until"})
_WHOLE_SECOND = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
SIGNING_TIME = {"engine": "verified_at", "dpo": "attested_at"}
"""The predicate field that holds each role's signing time."""


@dataclass(frozen=True)
class KeyEntry:
    """One key of the keyring, parsed: its public key and validity period (`valid_until` None while
    it is the role's current key)."""

    keyid: str
    role: str
    algorithm: str
    public_key_pem: str
    valid_from: datetime
    valid_until: datetime | None
    key: PublicKey

    def valid_at(self, when: datetime) -> bool:
        """Whether this key may have signed at `when`: valid_from <= when < valid_until."""
        return self.valid_from <= when and (self.valid_until is None or when < self.valid_until)

    def window(self) -> str:
        """`from <t> until <t|now>`, for messages."""
        until = "now (current)" if self.valid_until is None else format_time(self.valid_until)
        return f"from {format_time(self.valid_from)} until {until}"

    def as_dict(self) -> dict[str, Any]:
        """The entry's JSON form (as in the file)."""
        return {
            "keyid": self.keyid,
            "role": self.role,
            "algorithm": self.algorithm,
            "public_key_pem": self.public_key_pem,
            "valid_from": format_time(self.valid_from),
            "valid_until": None if self.valid_until is None else format_time(self.valid_until),
        }


@dataclass(frozen=True)
class Keyring:
    """The parsed keyring: its entries in file order."""

    entries: tuple[KeyEntry, ...]

    def by_keyid(self, kid: str) -> KeyEntry | None:
        """The entry of key id `kid`, if the keyring holds it."""
        return next((e for e in self.entries if e.keyid == kid), None)

    def current(self, role: str) -> KeyEntry | None:
        """The role's current key (valid_until null), if any."""
        return next((e for e in self.entries if e.role == role and e.valid_until is None), None)


def format_time(t: datetime) -> str:
    """A keyring time: whole UTC seconds, `YYYY-MM-DDTHH:MM:SSZ`."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sort_key(e: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(e["role"]), str(e["valid_from"]), str(e["keyid"]))


def keyring_bytes(entries: list[dict[str, Any]]) -> bytes:
    """The canonical bytes of a keyring holding `entries` (each in `KeyEntry.as_dict` form)."""
    doc = {"format": KEYRING_FORMAT, "keys": sorted(entries, key=_sort_key)}
    return (json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def _time(v: Any, what: str) -> datetime:
    when = utc_time(v) if isinstance(v, str) and _WHOLE_SECOND.fullmatch(v) else None
    if when is None:
        fail(KeyArgumentError, f"keyring: {what} is not a UTC time in whole seconds (YYYY-MM-DDTHH:MM:SSZ)")
    return when


def _entry(raw: Any, n: int) -> KeyEntry:
    e = json_object(raw, f"keyring entry {n}", KeyArgumentError)
    if set(e) != ENTRY_FIELDS:
        fail(KeyArgumentError, f"keyring entry {n} does not hold exactly the fields {', '.join(sorted(ENTRY_FIELDS))}")
    role, algorithm, pem = e["role"], e["algorithm"], e["public_key_pem"]
    if role not in ROLES:
        fail(KeyArgumentError, f"keyring entry {n}: role is not one of {', '.join(ROLES)}")
    if algorithm not in ALGORITHMS:
        fail(KeyArgumentError, f"keyring entry {n}: algorithm is not one of {', '.join(ALGORITHMS)}")
    if not isinstance(pem, str) or not pem.isascii():
        fail(KeyArgumentError, f"keyring entry {n}: public_key_pem is not PEM text")
    key = load_public_key(pem.encode("ascii"), f"keyring entry {n}")
    if ("ed25519" if isinstance(key, Ed25519PublicKey) else "ecdsa-p256") != algorithm:
        fail(KeyArgumentError, f"keyring entry {n}: the key is not a {algorithm} key")
    if e["keyid"] != keyid_of(key):
        fail(KeyArgumentError, f"keyring entry {n}: keyid is not the sha256 of its public key's DER")
    valid_from = _time(e["valid_from"], f"entry {n} valid_from")
    valid_until = None if e["valid_until"] is None else _time(e["valid_until"], f"entry {n} valid_until")
    if valid_until is not None and valid_until <= valid_from:
        fail(KeyArgumentError, f"keyring entry {n}: valid_until is not after valid_from")
    return KeyEntry(e["keyid"], role, algorithm, pem, valid_from, valid_until, key)


def _no_overlap(entries: tuple[KeyEntry, ...]) -> None:
    kids = [e.keyid for e in entries]
    if len(set(kids)) != len(kids):
        fail(KeyArgumentError, "keyring: a key appears twice")
    for role in ROLES:
        mine = sorted((e for e in entries if e.role == role), key=lambda e: e.valid_from)
        if sum(e.valid_until is None for e in mine) > 1:
            fail(KeyArgumentError, f"keyring: more than one current {role} key (valid_until null)")
        for a, b in itertools.pairwise(mine):
            if a.valid_until is None or a.valid_until > b.valid_from:
                fail(KeyArgumentError, f"keyring: the validity periods of two {role} keys overlap")


def parse_keyring(data: bytes) -> Keyring:
    """A keyring from its file's bytes, or `KeyArgumentError`: strict JSON in canonical form, every
    entry well formed (its keyid the sha256 of its key), windows that do not overlap."""
    if len(data) > MAX_KEYRING_BYTES:
        fail(KeyArgumentError, f"the keyring is larger than {MAX_KEYRING_BYTES} bytes")
    doc = json_object(parse_json(data, "the keyring", KeyArgumentError), "the keyring", KeyArgumentError)
    if set(doc) != {"format", "keys"} or doc["format"] != KEYRING_FORMAT:
        fail(KeyArgumentError, f"the keyring is not an {KEYRING_FORMAT} document (format and keys only)")
    raw = doc["keys"]
    if not isinstance(raw, list) or not raw or len(raw) > MAX_KEYS:
        fail(KeyArgumentError, f"the keyring's keys are not a list of 1 to {MAX_KEYS} entries")
    entries = tuple(_entry(r, n) for n, r in enumerate(raw, 1))
    _no_overlap(entries)
    if keyring_bytes([e.as_dict() for e in entries]) != data:
        fail(KeyArgumentError, "the keyring is not in canonical form (sorted keys and entries, 2-space indent)")
    return Keyring(entries)


def read_keyring(path: str) -> bytes:
    """A keyring file's bytes, read up to `MAX_KEYRING_BYTES`."""
    return read_bounded(path, MAX_KEYRING_BYTES, "the keyring")


def pick(keyring: Keyring, envelope: bytes, name: str, role: str) -> KeyEntry:
    """Check 2 with a keyring: the entry of the key `envelope` names (its first signature's keyid),
    which must be a key of `role`; else `SignatureError`."""
    _, _, kid = unverified_payload(envelope, name)
    if kid is None:
        fail(SignatureError, f"{name} names no signing key")
    entry = keyring.by_keyid(kid)
    if entry is None:
        fail(SignatureError, f"{name} is signed by key {kid[:16]}..., which the keyring does not hold")
    if entry.role != role:
        fail(
            SignatureError,
            f"{name} is signed by key {kid[:16]}..., the keyring's {entry.role} key, not a {role} key",
        )
    return entry


def keys_for(keyring: Keyring, files: Mapping[str, bytes], require_dpo: bool) -> tuple[KeyEntry, KeyEntry | None]:
    """The engine's and (when the pack holds its envelope) the DPO's keyring entries for a pack."""
    if ENGINE_ENVELOPE not in files:
        fail(SignatureError, f"the pack has no {ENGINE_ENVELOPE}")
    engine = pick(keyring, files[ENGINE_ENVELOPE], ENGINE_ENVELOPE, "engine")
    dpo = pick(keyring, files[DPO_ENVELOPE], DPO_ENVELOPE, "dpo") if DPO_ENVELOPE in files else None
    if dpo is None and require_dpo:
        fail(SignatureError, f"the pack has no {DPO_ENVELOPE}: it is not attested by the DPO")
    return engine, dpo


def signing_time(envelope: bytes, name: str, role: str) -> datetime:
    """The signing time inside an envelope's statement (read after its signature verified)."""
    _, payload, _ = unverified_payload(envelope, name)
    pred = json.loads(payload).get("predicate")
    value = pred.get(SIGNING_TIME[role]) if isinstance(pred, dict) else None
    when = utc_time(value)
    if when is None:
        fail(SignatureError, f"{name}: no signing time ({SIGNING_TIME[role]}) in its statement")
    return when


def check_validity(entry: KeyEntry, envelope: bytes, name: str) -> None:
    """The key `entry` was valid when it signed `envelope` (its statement's signing time); else
    `SignatureError` naming the key, the time and the key's validity."""
    when = signing_time(envelope, name, entry.role)
    if not entry.valid_at(when):
        retired = entry.valid_until is not None and when >= entry.valid_until
        why = "after the key was retired" if retired else "before the key's validity began"
        fail(
            SignatureError,
            f"{name} was signed at {SIGNING_TIME[entry.role]} {when.isoformat().replace('+00:00', 'Z')}, {why}:"
            f" the {entry.role} key {entry.keyid[:16]}... is valid {entry.window()}",
        )


def pem_of(keyring: bytes | None, kid: str) -> bytes:
    """The PEM of key `kid` in a keyring file's bytes (`KeyArgumentError` when it holds no such key)."""
    entry = parse_keyring(keyring).by_keyid(kid) if keyring is not None else None
    if entry is None:
        fail(KeyArgumentError, f"the keyring holds no key {kid[:16]}...")
    return entry.public_key_pem.encode("ascii")


def followup_key(keyring: Keyring, statement: Path) -> KeyEntry | None:
    """With a keyring, the key to check the backups follow-up `statement` with (it may be signed long
    after the pack, by a later engine key): the keyring's engine key its envelope names, which must
    have been valid at its statement's `stated_at` (else `SignatureError`). None when it names no key
    the keyring holds for the engine (the follow-up check then refuses it against the pack's own
    engine key)."""
    env_bytes = read_regular(statement, FOLLOWUP_MAX_BYTES, statement.name, SignatureError)
    try:
        env = json.loads(env_bytes)
        kid = env["signatures"][0]["keyid"]
        stated = json.loads(base64.b64decode(env["payload"], validate=True))["predicate"]["stated_at"]
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    entry = keyring.by_keyid(kid) if isinstance(kid, str) else None
    if entry is None or entry.role != "engine":
        return None
    when = utc_time(stated)
    if when is None or not entry.valid_at(when):
        fail(
            SignatureError,
            f"{statement.name} was signed at stated_at {printable_time(stated)} by the engine key"
            f" {entry.keyid[:16]}..., which is valid {entry.window()}",
        )
    return entry


def printable_time(v: Any) -> str:
    """A time taken from a pack, for a message (anything else shown as `?`)."""
    return v if isinstance(v, str) and utc_time(v) is not None else "?"
