"""`erasure targets ...`: the agent memories a request erases from (`$ERASURE_HOME/targets.toml`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.common import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.config import Home
from erasure.errors import ErasureError
from erasure.targets import REFERENCE, Targets, load_targets
from erasure.tiers import CASCADE_ORDER

app = typer.Typer(
    help="The agent memories a request erases from: list them, count a subject in them.", no_args_is_help=True
)

TargetsOpt = Annotated[
    Path | None,
    typer.Option(
        "--targets",
        envvar="ERASURE_TARGETS",
        show_default=False,
        help="targets.toml to use (default: $ERASURE_HOME/targets.toml, else the reference store alone).",
    ),
]


def targets_for(h: Home, file: Path | None) -> Targets:
    """Load the targets and export the file for flows run from this process."""
    if file is not None:
        os.environ["ERASURE_TARGETS"] = str(Path(file).resolve())
    return load_targets(h.root, h.store_dir, file)


def _tiers_and_files(target: Any, h: Home) -> tuple[list[str], list[Path]]:
    if target.kind == REFERENCE:
        return [t.value for t in CASCADE_ORDER], [h.store_db]
    from tasks.targets.base import eraser_for

    eraser = eraser_for(target)
    eraser.check(target)
    return [t.value for t in eraser.tiers], eraser.files(target)


@app.command("list")
def list_(home: HomeOpt = None, targets: TargetsOpt = None, json_out: JsonOpt = False) -> None:
    """Each target: its kind, the tiers it holds, and whether its files are reachable."""
    h = home_of(home)
    found = targets_for(h, targets)
    rows: list[dict[str, Any]] = []
    for t in found.targets:
        try:
            tiers, files = _tiers_and_files(t, h)
            missing = [str(f) for f in files if not f.exists()]
            rows.append(
                {
                    "name": t.name,
                    "kind": t.kind,
                    "tiers": tiers,
                    "reachable": not missing,
                    "missing": missing,
                    "error": None,
                }
            )
        except ErasureError as exc:
            rows.append(
                {"name": t.name, "kind": t.kind, "tiers": [], "reachable": False, "missing": [], "error": str(exc)}
            )
    _annotate_restored(rows, h, found)  # hook (issue 26): restored stores and what they wait to replay
    if json_out:
        print_json({"tenant": found.tenant, "source": str(found.source) if found.source else None, "targets": rows})
        return
    table = Table(title=f"targets ({found.source or 'default: the reference store'}), tenant {found.tenant}")
    for col in ("name", "kind", "tiers", "reachable"):
        table.add_column(col)
    for r in rows:
        reach = "yes" if r["reachable"] else f"[red]no[/red] {r['error'] or ', '.join(r['missing'])}"
        reach += f" [red]restored: replay {len(r['to_replay'])} erasure(s)[/red]" if r.get("restored") else ""
        table.add_row(r["name"], r["kind"], ", ".join(r["tiers"]), reach)
    console.print(table)


@app.command("check")
def check(
    request: Annotated[str, typer.Option("--request", help="The request whose subject to count.")],
    home: HomeOpt = None,
    targets: TargetsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Per target and tier, how many items the request's subject has there now (nothing is erased)."""
    from erasure import request_records as requests
    from erasure.engine import open_engine
    from tasks.runner import prepare
    from tasks.targets.runner import count_target

    h = home_of(home)
    found = targets_for(h, targets)
    engine = open_engine(h.engine_db)
    try:
        subject = requests.load_envelope(engine, request).subject
    finally:
        engine.close()
    out: dict[str, dict[str, int | None]] = {}
    for t in found.targets:
        if t.kind == REFERENCE:
            counts = prepare(request, h)
            out[t.name] = {tier.value: counts.get(tier.value) for tier in CASCADE_ORDER}
        else:
            out[t.name] = count_target(t, subject)
    if json_out:
        print_json({"request_id": request, "targets": out})
        return
    table = Table(title=f"the subject of {request}, per target and tier (nothing erased)")
    table.add_column("tier")
    for name in out:
        table.add_column(name, justify="right")
    for tier in CASCADE_ORDER:
        table.add_row(tier.value, *["n/a" if out[n][tier.value] is None else str(out[n][tier.value]) for n in out])
    console.print(table)


def _annotate_restored(rows: list[dict[str, Any]], h: Any, found: Any) -> None:
    """Each row gets `restored` and `to_replay` (the original request ids a restored store waits to replay)."""
    from tasks.epochs import epochs  # only when listing: tasks is heavy for the CLI's start

    by_name = {e.target: e for e in epochs(h, found)}
    for row in rows:
        e = by_name.get(row["name"])
        row["restored"] = bool(e and e.restored)
        row["to_replay"] = list(e.pending) if e else []
