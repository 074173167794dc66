"""`erasure targets ...`: the agent memories a request erases from (`$ERASURE_HOME/targets.toml`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.config import Home

if TYPE_CHECKING:
    from erasure.targets import Targets

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
    from erasure.targets import load_targets  # pydantic: not for `--help` of the commands taking TargetsOpt

    if file is not None:
        os.environ["ERASURE_TARGETS"] = str(Path(file).resolve())
    return load_targets(h.root, h.store_dir, file)


@app.command("list")
def list_(home: HomeOpt = None, targets: TargetsOpt = None, json_out: JsonOpt = False) -> None:
    """Each target: its kind, the tiers it holds, and whether its files are reachable."""
    from rich.table import Table

    h = home_of(home)
    found = targets_for(h, targets)
    from service.targets import target_rows  # tasks is heavy for the CLI's start: only when listing

    rows = target_rows(h, found)
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
    from rich.table import Table

    from erasure.tiers import CASCADE_ORDER
    from service.targets import subject_counts

    h = home_of(home)
    out = subject_counts(h, targets_for(h, targets), request)
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
