"""The home an operation works on: named by the environment, its engine key, its targets."""

from __future__ import annotations

import os

from erasure.config import Home
from erasure.errors import ConfigError
from erasure.targets import Targets, home_targets


def home() -> Home:
    """The home named by the environment (the CLI and the worker export it, prefect.yaml passes it to every
    run). `ConfigError` when a deployment carries a `{{ $ERASURE_... }}` placeholder that `prefect deploy`
    could not fill in (it ran without that variable)."""
    for name in ("ERASURE_HOME", "ERASURE_EVIDENCE"):
        if "{{" in os.environ.get(name, ""):
            raise ConfigError(
                f"{name} is an unfilled placeholder ({os.environ[name]}): deploy with "
                "`erasure server start` or export it before `prefect deploy`"
            )
    return Home.resolve().ensure()


def engine_key_present(h: Home) -> None:
    """`ConfigError` (before anything is erased) when the home has no engine signing key."""
    key = h.keys_dir / "engine.pem"
    if not key.exists():
        raise ConfigError(f"no engine signing key at {key}: run `erasure keys generate --role engine` first")


def targets_of(h: Home) -> Targets:
    """The home's targets (`erasure.targets.home_targets`)."""
    return home_targets(h.root, h.store_dir)
