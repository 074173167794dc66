"""Check 11: the re-verification statements given beside a pack (`reverify-<n>.intoto.json`, written by
`proof/reverification.py` each time a sealed request is probed again). Stdlib and cryptography only.

For each statement, in the order given:
1. it is a DSSE envelope in the writer's canonical form, signed by the trusted engine key (the same
   key the pack verified with: `envelopes.check_signature`);
2. it is an in-toto Statement v1 of the re-verification predicate, its one subject this pack's name
   (the sha256 of the pack's engine statement) and its predicate for the pack's request, naming the
   engine key and the same pack name;
3. it says all clear: a statement that found the subject again is a failure of the pack's claim (the
   request was reopened), reported with its tiers;
4. together they are one chain without a gap: sequences 1..n, each statement's `previous` the sha256
   of the file of the one before (the first's: the pack's name). Leaving out a statement (one that
   found the subject again) breaks the chain and is refused. The result names the chain's length and
   its latest statement: what was given ends there (a regulator compares that with the export's date).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proof.verify.envelopes import PublicKey, check_signature, check_statement
from proof.verify.errors import PackError, ReverifyError, checking, fail
from proof.verify.files import read_regular
from proof.verify.strict_json import utc_time
from wire.format import REVERIFY_PREDICATE, REVERIFY_SUBJECT, keyid_of, sha256_hex

REVERIFY_FIELDS: dict[str, Callable[[Any], bool]] = {
    "request_id": lambda v: isinstance(v, str),
    "pack_name": lambda v: isinstance(v, str),
    "sequence": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "previous": lambda v: isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v),
    "reverified_at": lambda v: utc_time(v) is not None,
    "all_clear": lambda v: isinstance(v, bool),
    "residue": lambda v: isinstance(v, dict),
    "residue_tiers": lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v),
    "changed_files": lambda v: isinstance(v, dict),
    "engine_keyid": lambda v: isinstance(v, str),
}


@dataclass(frozen=True)
class Reverified:
    """One statement that passed: its sequence number, time, what changed since the pack's scan, the
    digest it names as the one before it and its own file's digest."""

    sequence: int
    reverified_at: str
    changed_files: dict[str, Any]
    previous: str = ""
    digest: str = ""

    def note(self) -> str:
        """One line for the verifier's output (counts only)."""
        c = self.changed_files
        counts = {k: c.get(f"{k}_count", len(c.get(k, []))) for k in ("added", "removed", "modified")}
        changed = (
            f"{counts['added']} added, {counts['removed']} removed, {counts['modified']} modified since the pack's scan"
            if c.get("compared")
            else "files not compared"
        )
        return f"re-verification {self.sequence} at {self.reverified_at}: all clear ({changed})"


def check_one(data: bytes, name: str, engine_key: PublicKey, request_id: str, pack_name: str) -> Reverified:
    """Steps 1-3 of the module's docstring for one statement; raises `ReverifyError`."""
    with checking(ReverifyError):
        try:
            payload_type, payload = check_signature(data, name, engine_key, "engine")
            statement = check_statement(payload_type, payload, name, REVERIFY_PREDICATE, REVERIFY_FIELDS)
        except PackError as exc:
            fail(ReverifyError, str(exc))
        pred = statement["predicate"]
        if statement["subject"] != [{"name": REVERIFY_SUBJECT, "digest": {"sha256": pack_name}}]:
            fail(ReverifyError, f"{name}: its subject is not this pack")
        if pred["pack_name"] != pack_name or pred["request_id"] != request_id:
            fail(ReverifyError, f"{name}: it is for another pack or request")
        if pred["engine_keyid"] != keyid_of(engine_key):
            fail(ReverifyError, f"{name}: it names another engine key")
        if not pred["all_clear"]:
            tiers = ", ".join(pred["residue_tiers"]) or "unknown tiers"
            fail(
                ReverifyError,
                f"{name}: re-verification {pred['sequence']} at {pred['reverified_at']} found the subject"
                f" again (residue in: {tiers}); the request was reopened",
            )
        return Reverified(
            pred["sequence"], pred["reverified_at"], dict(pred["changed_files"]), pred["previous"], sha256_hex(data)
        )


def check_reverifications(
    statements: Sequence[tuple[str, bytes]], engine_key: PublicKey, request_id: str, pack_name: str
) -> list[Reverified]:
    """Check 11 on every (name, bytes) given: each statement (steps 1-3), then the chain (step 4).
    Returns them in chain order."""
    out = sorted((check_one(data, name, engine_key, request_id, pack_name) for name, data in statements), key=_seq)
    seqs = [r.sequence for r in out]
    if len(set(seqs)) != len(seqs):
        fail(ReverifyError, "two re-verification statements carry the same sequence number")
    before = pack_name
    for want, r in enumerate(out, start=1):
        if r.sequence != want:
            fail(
                ReverifyError,
                f"the chain of re-verifications has a gap: statement {want} is missing before statement"
                f" {r.sequence} (every statement since the pack must be given)",
            )
        if r.previous != before:
            fail(
                ReverifyError,
                f"re-verification {r.sequence} does not name the statement before it"
                f" ({'the pack' if want == 1 else f'statement {want - 1}'}): the chain is broken",
            )
        before = r.digest
    return out


def _seq(r: Reverified) -> int:
    return r.sequence


MAX_STATEMENT_BYTES = 1 << 20


def read_statements(paths: Sequence[str | Path]) -> list[tuple[str, bytes]]:
    """The statement files given (the command line's `--reverify FILE...`), (name, bytes) each."""
    return [(Path(p).name, read_regular(p, MAX_STATEMENT_BYTES, Path(p).name, ReverifyError)) for p in paths]


def as_dict(reverified: Sequence[Reverified]) -> dict[str, Any]:
    """The `--json` output's part (nothing when no statement was given)."""
    if not reverified:
        return {}
    return {
        "reverification_chain": {
            "length": len(reverified),
            "latest": reverified[-1].sequence,
            "latest_at": reverified[-1].reverified_at,
        },
        "reverifications": [
            {
                "sequence": r.sequence,
                "reverified_at": r.reverified_at,
                "all_clear": True,
                "changed_files": r.changed_files,
            }
            for r in reverified
        ],
    }


def with_notes(line: str, reverified: Sequence[Reverified]) -> str:
    """The verifier's OK line with one note per statement checked."""
    if not reverified:
        return line
    last = reverified[-1]
    chain = f"re-verification chain of {len(reverified)}, latest {last.sequence} at {last.reverified_at}"
    notes = "; ".join([chain, *(r.note() for r in reverified)])
    return f"{line[:-1]}; {notes})" if line.endswith(")") else f"{line} ({notes})"
