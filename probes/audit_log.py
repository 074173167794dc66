"""Tier 9 (audit log): the vault of personal values, and the entries that must all remain.

Residue: vault rows of the subject (by subject id or by the fingerprint's commitments), and entries
whose fields hold one of the subject's identifiers in plaintext (personal fields must be commitments).
Bystanders: other people's vault rows, and the number of log entries: redaction never deletes an
entry, so a drop means the log itself was cut.
"""

from __future__ import annotations

import contextlib

import apsw
import hyperscan

from probes.context import ProbeContext, to_results
from probes.model import Measurement, ProbeResult
from probes.needles import NeedleKind
from probes.store import count, ids_in, json_list, open_store

TIER = "audit_log"


def _plaintext(conn: apsw.Connection, idents: list[str]) -> int:
    """Entries whose fields hold any identifier in plaintext (any letter case): one pass over the log for
    all of them (a window's), each entry scanned once by one hyperscan database."""
    if not idents:
        return 0
    needles = sorted({i.encode() for i in idents})
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=["".join(f"\\x{b:02x}" for b in n).encode() for n in needles],
        ids=list(range(len(needles))),
        flags=hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH,
    )
    hits = [0]

    def on_match(*_args: object) -> bool:
        hits[0] += 1
        return True  # one match is enough: stop scanning this entry

    for (fields,) in conn.execute("SELECT fields FROM audit_log"):
        with contextlib.suppress(hyperscan.ScanTerminated):  # raised when on_match stops the scan
            db.scan(str(fields).encode(), match_event_handler=on_match)
    return hits[0]


def measure(ctx: ProbeContext) -> list[Measurement]:
    """The subject's vault rows and plaintext mentions left; bystanders' vault rows; entry count."""
    sid, commitments = ctx.ids_json, json_list(ctx.fingerprint.keys.audit_commitments)
    idents = [n.data.decode().lower() for n in ctx.fingerprint.needles if n.kind is NeedleKind.identifier]
    with open_store(ctx.store_dir) as conn:
        vault_others = count(
            conn,
            "SELECT count(*) FROM audit_vault WHERE (subject_id IS NULL OR"
            f" subject_id NOT {ids_in('?1')}) AND commitment NOT {ids_in('?2')}",
            (sid, commitments),
        )
        entries = count(conn, "SELECT count(*) FROM audit_log")
        plaintext = _plaintext(conn, idents)
        return [
            Measurement(
                "vault-by-subject-id",
                count(conn, f"SELECT count(*) FROM audit_vault WHERE subject_id {ids_in()}", (sid,)),
                "vault",
                vault_others,
            ),
            Measurement(
                "vault-by-commitment",
                count(conn, f"SELECT count(*) FROM audit_vault WHERE commitment {ids_in()}", (commitments,)),
                "vault",
                vault_others,
            ),
            Measurement("plaintext-in-entries", plaintext, "entries", entries),
        ]


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the audit log."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
