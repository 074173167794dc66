"""`erasure store ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="store commands.", no_args_is_help=True)


def ingest() -> None:
    """Ingest a JSONL file of memory items (placeholder until the store lands)."""
    raise typer.Exit(1)
