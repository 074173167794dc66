"""Kind `reference`: our own nine-tier store (`memory/`), one folder holding `memory.db` and its files.

    [[targets]]
    name = "reference"
    kind = "reference"
    path = "store"          # optional: the store folder (default: the home's, `$ERASURE_HOME/store`)

A home without targets.toml has this target alone (`erasure.targets.default_targets`). Its eraser is the
nine-tier cascade (`tasks/targets/reference.py`), its probe the tier probes (`probes/targets/reference.py`).
"""

from __future__ import annotations

from erasure.target_kinds import KindConfig, KindSpec, TargetPath


class ReferenceConfig(KindConfig):
    """A reference target's keys: its folder (filled in with the home's when the file gives none)."""

    path: TargetPath


SPEC = KindSpec(ReferenceConfig)
