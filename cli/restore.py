"""`erasure restore ...`: a store restored from a backup, and the replay that erases again what it brought back.

A restored store (its erasure epoch is behind the ledger's) refuses ingest and requests (exit 6) until
`erasure restore replay --target NAME` has re-applied every erasure the backup predates: each as a
replay request named after the original one, through the same cascade, verification and signed pack.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.common import HomeOpt, JsonOpt, console, home_of, print_json
from cli.targets import TargetsOpt, targets_for
from erasure import ledger
from erasure.errors import ErasureError, VerificationFailed
from proof.history import current_pack

app = typer.Typer(
    help="Restored stores: show their erasure epochs against the ledger, replay their erasures.", no_args_is_help=True
)


class ReplayFailed(ErasureError):
    """A replay did not end all clear (the store stays refused)."""


@app.command("status")
def status(home: HomeOpt = None, targets: TargetsOpt = None, json_out: JsonOpt = False) -> None:
    """Each target's erasure epoch against the ledger: restored (behind) or not, and what to replay."""
    from tasks.epochs import epochs

    h = home_of(home)
    rows = [e.as_dict() for e in epochs(h, targets_for(h, targets))]
    if json_out:
        print_json({"targets": rows})
        return
    table = Table(title="erasure epochs")
    for col in ("target", "kind", "store epoch", "ledger epoch", "restored", "to replay"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["target"],
            r["kind"],
            str(r["store_epoch"]),
            str(r["ledger_epoch"]),
            "[red]yes[/red]" if r["restored"] else "no",
            ", ".join(r["pending"]),
        )
    console.print(table)


def _tenant(h: Any, found: Any) -> str:
    if found.reference() is None:
        return str(found.tenant)
    from memory.schema import meta, open_store

    store = open_store(h.store_dir)
    try:
        return meta(store, "tenant_id")
    finally:
        store.close()


@app.command("replay")
def replay(
    target: Annotated[
        str, typer.Option("--target", help="The restored target (its name in targets.toml).", show_default=False)
    ],
    home: HomeOpt = None,
    targets: TargetsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Re-apply every erasure newer than the target's epoch: find each subject by the ledger's keyed
    hashes, run the same cascade and verification as a replay request named after the original, write
    its signed pack, and bring the store's sticky lists and epoch up to date.

    Exits 0 when every replay ended all clear (or the target was not restored); 7 when one found
    residue; 1 otherwise."""
    from cli.run import run_flow
    from tasks import replay as rp
    from tasks.epochs import epochs

    h = home_of(home)
    found = targets_for(h, targets)
    t = found.by_name(target)
    now = next(e for e in epochs(h, found) if e.target == t.name)
    results: list[dict[str, Any]] = []
    if now.restored:
        book = ledger.open_ledger(h)
        try:
            pending = ledger.entries(book, t.name, after_epoch=now.store_epoch)
        finally:
            book.close()
        tenant = _tenant(h, found)
        before = os.environ.get("ERASURE_TARGETS")
        one = rp.replay_targets_file(found.source, t, h, tenant)
        try:
            if one is not None:
                os.environ["ERASURE_TARGETS"] = str(one)
            for entry in pending:
                results.append(replay_one(h, t, entry, tenant, run_flow))
        finally:
            if one is not None:
                one.unlink(missing_ok=True)
            if before is None:
                os.environ.pop("ERASURE_TARGETS", None)
            else:
                os.environ["ERASURE_TARGETS"] = before
    after = next(e for e in epochs(h, targets_for(h, targets)) if e.target == t.name)
    if json_out:
        print_json(
            {
                "target": t.name,
                "replayed": results,
                "store_epoch": after.store_epoch,
                "ledger_epoch": after.ledger_epoch,
                "restored": after.restored,
            }
        )
    else:
        table = Table(title=f"replay on {t.name}: epoch {after.store_epoch} of {after.ledger_epoch}")
        for col in ("original request", "replay request", "found by", "outcome", "pack"):
            table.add_column(col)
        for r in results:
            table.add_row(r["original"], r["replay"] or "", r["found_by"] or "", r["outcome"], r["pack"] or "")
        console.print(table)
        if not results:
            console.print(f"target {t.name} is not restored: nothing to replay")


def replay_one(h: Any, t: Any, entry: ledger.Entry, tenant: str, run_flow: Any, tag: str = "replay") -> dict[str, Any]:
    """Re-apply one ledger entry on target `t` (a restored store, or a restored copy of a backup): find
    the subject by the ledger's keyed hashes, run the request flow as `<original>.<tag>-<seq>`, and bring
    the store's epoch up to the entry's. Raises when it did not end all clear."""
    from tasks import replay as rp

    found = rp.find_subject(h, t, entry)
    if found.subject is None:  # no item of the store is keyed by the subject (ledger hashes): nothing to erase
        rp.finish(h, t, entry, f"{rp.replay_id(entry, tag)}", "nothing_found")
        return {
            "original": entry.request_id,
            "replay": None,
            "found_by": None,
            "outcome": "nothing_found",
            "pack": None,
        }
    rid = rp.submit_replay(h, t, entry, found, tenant, rp.replay_id(entry, tag))
    state = run_flow(rid, h, live=False)
    ver = h.evidence_dir(rid) / "verification.json"
    doc = json.loads(ver.read_text()) if ver.exists() else {}
    if not (state.is_completed() and doc.get("all_clear")):
        book = ledger.open_ledger(h)
        try:
            ledger.end_replay(book, rid, "failed")
        finally:
            book.close()
        if doc and not doc.get("all_clear"):
            raise VerificationFailed(
                f"replay {rid} of {entry.request_id}: verification found residue; the store stays refused"
            )
        raise ReplayFailed(f"replay {rid} of {entry.request_id} did not complete: {state.message or state.name}")
    rp.finish(h, t, entry, rid, "all_clear")
    pack = current_pack(h.evidence_dir(rid))
    return {
        "original": entry.request_id,
        "replay": rid,
        "found_by": found.source,
        "outcome": "all_clear",
        "pack": str(pack) if pack.exists() else None,
    }
