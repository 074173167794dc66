"""`erasure request ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="request commands.", no_args_is_help=True)
