"""Offline verifier of an erasure proof pack: the Python standard library and `cryptography` only.

    python -m proof.verify proof.tar.gz --engine-key engine.pub.pem --dpo-key dpo.pub.pem \
        --audit-key audit.pub.pem [--tsa-root tsa-root.pem] [--json]
    python -m proof.verify proof.tar.gz --keyring keyring.json --audit-key audit.pub.pem [--tsa-root ...] [--json]

It imports nothing else of this project but the ground-floor `wire` package (the pack's wire format,
defined once: the writer imports it too; import-linter checks both), so it also ships as one file,
`erasure-verify.pyz` (`make verifier`; `erasure export` writes it beside the pack), and a regulator
runs it with nothing but Python and `cryptography`. Trusted public keys come from the command line,
never from the pack. A pack's name is the sha256 of the engine's signed statement
(`VerifyResult.pack_name`), never of its container bytes.

Modules, in the order a pack meets them:

    errors       the one error hierarchy (`PackError`, one subclass per check) and its safety net
    files        every file read, given or beside the pack: regular files only (no link, FIFO or
                 device), sizes checked before reading, under one memory ceiling
    strict_json  JSON as every check reads it
    verifier     `Trust` (the keys given: check 0) and `Verifier`, whose `STEPS` are checks 1-12 in
                 order (their list is at its top); `verify_pack` and `verify_bytes` wrap them
    archive      check 1: one gzip member, one ustar stream, exactly the manifest's files
    envelopes    keys, check 2 (DSSE signatures) and check 3 (in-toto statements)
    keyring      checks 2 and 10 with a keyring: each key by keyid, of its role, valid at the signing time
    digests      checks 4 and 5: subjects, manifest.json and SHA256SUMS
    merkle       RFC 9162 inclusion, multiproof and consistency proofs
    audit        check 7: the audit-log redaction evidence
    consistency  check 8: the claims follow from the records
    der          a small strict DER reader (the standard library only)
    timestamp    check 9: the RFC 3161 tokens over the envelopes' signatures, against a pinned TSA root
    reverify     check 11: re-verification statements given beside the pack
    backups      check 12: the backups follow-up statement beside the pack
    command      the command line (`__main__` runs it)
"""

from proof.verify.archive import extract, read_pack
from proof.verify.audit import AuditSummary, check_audit_log
from proof.verify.command import main
from proof.verify.envelopes import load_public_key, read_key, unverified_payload
from proof.verify.errors import (
    ArchiveError,
    AuditLogError,
    ChecksumError,
    ConsistencyError,
    KeyArgumentError,
    PackError,
    SameKeyError,
    SignatureError,
    StatementError,
    SubjectError,
    TimestampError,
    printable,
)
from proof.verify.merkle import verify_consistency, verify_inclusion, verify_multiproof
from proof.verify.strict_json import utc_time
from proof.verify.verifier import STEPS, Trust, Verifier, VerifyResult, verify_bytes, verify_contents, verify_pack
from wire.format import MERKLE_EMPTY_ROOT, TIERS, keyid_of, merkle_leaf, merkle_node

__all__ = [
    "MERKLE_EMPTY_ROOT",
    "STEPS",
    "TIERS",
    "ArchiveError",
    "AuditLogError",
    "AuditSummary",
    "ChecksumError",
    "ConsistencyError",
    "KeyArgumentError",
    "PackError",
    "SameKeyError",
    "SignatureError",
    "StatementError",
    "SubjectError",
    "TimestampError",
    "Trust",
    "Verifier",
    "VerifyResult",
    "check_audit_log",
    "extract",
    "keyid_of",
    "load_public_key",
    "main",
    "merkle_leaf",
    "merkle_node",
    "printable",
    "read_key",
    "read_pack",
    "unverified_payload",
    "utc_time",
    "verify_bytes",
    "verify_consistency",
    "verify_contents",
    "verify_inclusion",
    "verify_multiproof",
    "verify_pack",
]
