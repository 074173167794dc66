"""Options and helpers shared by every command."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from erasure.config import Home

console = Console()
err_console = Console(stderr=True)

HomeOpt = Annotated[
    Path | None,
    typer.Option(
        "--home", envvar="ERASURE_HOME", help="State directory (default: .erasure/ in the project).", show_default=False
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def home_of(home: Path | None) -> Home:
    """Resolve, create and export the home so Prefect and subprocesses use it too."""
    h = Home.resolve(home).ensure()
    h.export_env()
    return h


def print_json(obj: Any) -> None:
    """JSON to stdout, sorted keys, ISO dates."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
