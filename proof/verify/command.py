"""The verifier's command line:

    python -m proof.verify PACK --engine-key PUB --dpo-key PUB --audit-key PUB [--tsa-root PEM] [--json]
    python -m proof.verify PACK --keyring keyring.json --audit-key PUB [--tsa-root PEM] [--json]

and the same command as one file, `python erasure-verify.pyz ...` (`make verifier`; `erasure export`
ships it beside the pack).

Every input ends in one line, `OK` (exit 0) or `FAIL: <check>: <why>` (exit 1; 2 for bad usage), never
a traceback; every character outside printable ASCII in it is written as a \\x, \\u or \\U escape,
so nothing taken from a pack can act on a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from proof.verify import backups, files, reverify
from proof.verify.envelopes import read_key
from proof.verify.errors import KeyArgumentError, PackError, checking, printable
from proof.verify.keyring import read_keyring
from proof.verify.verifier import Trust, Verifier

DESCRIPTION = "Offline verifier of an erasure proof pack: the Python standard library and `cryptography` only."


def _say(line: str) -> None:
    sys.stdout.write(printable(line) + "\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """The verifier's command line: `python -m proof.verify PACK --engine-key PUB --dpo-key PUB [--json]`: prints OK or
    `FAIL: <check>: <why>`; exit 0 when the pack verifies, 1 when it does not, 2 on bad usage."""
    parser = argparse.ArgumentParser(prog="python -m proof.verify", description=DESCRIPTION)
    parser.add_argument("pack", help="the proof.tar.gz to verify")
    parser.add_argument("--engine-key", help="the engine's trusted public key (PEM); or give --keyring")
    parser.add_argument("--dpo-key", help="the DPO's trusted public key (PEM); required unless --no-dpo or --keyring")
    parser.add_argument(
        "--keyring",
        help="the keyring you pinned (keyring.json: every engine and DPO key with its validity period), instead"
        " of --engine-key and --dpo-key: each signature's key is taken from it and must have been valid when it signed",
    )
    parser.add_argument(
        "--no-dpo", action="store_true", help="accept a pack the DPO has not attested yet (its engine signature only)"
    )
    parser.add_argument(
        "--audit-key",
        help="the store's audit checkpoint public key (PEM; `erasure keys audit`"
        " prints it, `erasure export` ships it as audit.pub.pem); required unless --no-audit-key",
    )
    parser.add_argument(
        "--no-audit-key",
        action="store_true",
        help="check the audit checkpoints against the key the pack itself names (NOT pinned:"
        " whoever re-signs the pack can re-sign the checkpoints too)",
    )
    parser.add_argument(
        "--reverify",
        nargs="+",
        default=[],
        metavar="FILE",
        help="re-verification statements beside the pack (reverify-<n>.intoto.json): each must be signed by"
        " the engine key, name this pack, and say all clear",
    )
    parser.add_argument(
        "--tsa-root",
        help="the timestamp authority's root certificate(s) (PEM) that the pack's RFC 3161 tokens must chain"
        " to; without it the tokens are not checked (a pack without tokens is refused with it)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of one line")
    args = parser.parse_args(argv)
    files.reset_ceiling()
    if args.keyring is not None and (args.engine_key is not None or args.dpo_key is not None):
        parser.error("give either --keyring or --engine-key/--dpo-key, not both")
    if args.keyring is None and args.engine_key is None:
        parser.error("--engine-key (or --keyring) is required")
    if args.dpo_key is None and args.keyring is None and not args.no_dpo:
        parser.error("--dpo-key is required (or --no-dpo to check a pack awaiting attestation)")
    if args.audit_key is None and not args.no_audit_key:
        parser.error(
            "--audit-key is required: the store's audit checkpoint public key (or --no-audit-key to"
            " accept the key the pack names, which pins nothing)"
        )
    try:
        with checking(KeyArgumentError):
            engine = read_key(args.engine_key, "engine") if args.engine_key else None
            dpo = read_key(args.dpo_key, "DPO") if args.dpo_key else None
            audit = read_key(args.audit_key, "audit") if args.audit_key else None
            ring = read_keyring(args.keyring) if args.keyring else None
            tsa_root = read_key(args.tsa_root, "TSA root") if args.tsa_root else None
        trust = Trust.from_pem(
            engine, dpo, require_dpo=not args.no_dpo, audit_pub_pem=audit, keyring=ring, tsa_root_pem=tsa_root
        )
        # and what lies beside the pack: the statements given, a backups follow-up when there is one
        result = Verifier(trust).verify(args.pack, statements=args.reverify, followup=backups.beside(args.pack))
    except PackError as exc:
        if args.json:
            _say(json.dumps({"ok": False, "check": exc.check, "error": str(exc)}, sort_keys=True))
        else:
            _say(f"FAIL: {exc.check}: {exc}")
        return 1
    if result.followup is not None and not args.json:
        _say(f"backups-followup: OK ({result.followup})")
    if args.json:
        _say(json.dumps({"ok": True, **result.as_dict(), **reverify.as_dict(result.reverified)}, sort_keys=True))
    else:
        _say(reverify.with_notes(result.line(), result.reverified))
    return 0
