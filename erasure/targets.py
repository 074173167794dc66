"""Targets: the agent memories a request erases from, as listed in `$ERASURE_HOME/targets.toml`.

    tenant = "default"                 # optional: the tenant these stores belong to

    [[targets]]
    name = "support-agent"             # shown in step records, verification and the pack
    kind = "langgraph-sqlite"          # which erasing and probing modules handle it
    store = "agent/store.sqlite"       # kind-specific keys; relative paths are read from this file's folder

Without the file, the one target is the reference store (`kind = "reference"`, path `$ERASURE_HOME/store`).
This module and each kind's spec (`erasure.target_kinds`) are what the erasing side (`tasks/targets/`)
and the probing side (`probes/targets/`) share: the configuration, never code that reads or writes a
store. A kind (`reference` too) is its spec and a module on each side, named after it
(`langgraph-sqlite` -> `erasure/target_kinds/langgraph_sqlite.py`, `tasks/targets/langgraph_sqlite`
and `probes/targets/langgraph_sqlite`); adding one touches nothing else.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from erasure.errors import ConfigError
from erasure.request_ids import SAFE_TOKEN
from erasure.untrusted import toml_bounds

TARGETS_FILE = "targets.toml"
REFERENCE = "reference"
MAX_TARGETS_BYTES = 1_000_000
MAX_TOML_DEPTH = 16
"""Deepest nesting of arrays and tables (brackets) accepted in targets.toml."""
MAX_KEY_PARTS = 16
"""Most parts of one dotted key (`a.b.c` has 3) accepted in targets.toml."""


class Target(BaseModel):
    """One target: its name, kind, the folder its relative paths are read from, and its own keys."""

    model_config = ConfigDict(frozen=True, extra="allow")

    name: str
    kind: str
    base_dir: Path = Field(exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not SAFE_TOKEN.fullmatch(v):
            raise ValueError("must be 1-128 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit")
        return v

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if not v or not all(c.isalnum() or c == "-" for c in v):
            raise ValueError("must be a kind name such as langgraph-sqlite, chroma, mem0, reference")
        return v

    @property
    def module(self) -> str:
        """The module name of this kind on each side (`langgraph-sqlite` -> `langgraph_sqlite`)."""
        return self.kind.replace("-", "_")

    def options(self) -> dict[str, Any]:
        """The kind-specific keys, as written in the file."""
        return dict(self.model_extra or {})

    def value(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        """A kind-specific key; `ConfigError` naming it when required and missing."""
        extra = self.model_extra or {}
        if key not in extra:
            if required:
                raise ConfigError(f"targets: target {self.name!r} ({self.kind}): key {key!r} is required")
            return default
        return extra[key]

    def text(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        """A string key (`ConfigError` naming it when it is not a string)."""
        v = self.value(key, default, required=required)
        if v is not None and not isinstance(v, str):
            raise ConfigError(f"targets: target {self.name!r}: key {key!r} must be a string")
        return v

    def texts(self, key: str, default: list[str] | None = None, *, required: bool = False) -> list[str]:
        """A list-of-strings key."""
        v = self.value(key, default, required=required)
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"targets: target {self.name!r}: key {key!r} must be a list of strings")
        return list(v)

    def path(self, key: str, default: str | None = None, *, required: bool = False) -> Path | None:
        """A path key: relative paths are read from the targets file's folder, absolute ones as given."""
        v = self.text(key, default, required=required)
        if v is None:
            return None
        p = Path(v).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)


class Targets(BaseModel):
    """Every target of a home, and the tenant they belong to."""

    model_config = ConfigDict(frozen=True)

    tenant: str = "default"
    targets: tuple[Target, ...]
    source: Path | None = None
    """The file they were read from (None: the default, the reference store alone)."""

    def by_name(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        raise ConfigError(f"targets: no target named {name!r}")

    def external(self) -> tuple[Target, ...]:
        """The targets that are not the reference store."""
        return tuple(t for t in self.targets if t.kind != REFERENCE)

    def reference(self) -> Target | None:
        return next((t for t in self.targets if t.kind == REFERENCE), None)


def default_targets(home_root: Path, store_dir: Path) -> Targets:
    """The reference store alone: what a home without targets.toml has."""
    ref = Target.model_validate({"name": REFERENCE, "kind": REFERENCE, "base_dir": home_root, "path": str(store_dir)})
    return Targets(targets=(ref,))


def load_targets(home_root: Path, store_dir: Path, file: Path | None = None) -> Targets:
    """Read `file`, else `<home>/targets.toml`, else the default. `ConfigError` (exit 3) names the key."""
    path = Path(file) if file is not None else home_root / TARGETS_FILE
    if file is None and not path.exists():
        return default_targets(home_root, store_dir)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_TARGETS_BYTES + 1)  # capped: /dev/zero as the file is refused, not read
    except OSError as exc:
        raise ConfigError(f"targets: cannot read {path}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_TARGETS_BYTES:
        raise ConfigError(f"targets: {path} is larger than {MAX_TARGETS_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"targets: {path}: not valid TOML: {exc}") from exc
    too_costly = toml_bounds(text, MAX_TOML_DEPTH, MAX_KEY_PARTS)  # before the parser spends on it
    if too_costly is not None:
        raise ConfigError(f"targets: {path}: refused before parsing: {too_costly}")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"targets: {path}: not valid TOML: {exc}") from exc
    unknown = sorted(set(doc) - {"tenant", "targets"})
    if unknown:
        raise ConfigError(f"targets: {path}: unknown key {unknown[0]!r} (expected tenant, targets)")
    items = doc.get("targets")
    if not isinstance(items, list) or not items or not all(isinstance(t, dict) for t in items):
        raise ConfigError(f"targets: {path}: key 'targets' must be one or more [[targets]] tables")
    base = path.resolve().parent
    out: list[Target] = []
    for i, item in enumerate(items):
        try:
            target = Target.model_validate({**item, "base_dir": base})
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(x) for x in err["loc"]) or "?"
            raise ConfigError(f"targets: {path}: targets[{i}].{key}: {err['msg']}") from exc
        if target.kind == REFERENCE and target.value("path") is None:
            target = Target.model_validate({**item, "base_dir": base, "path": str(store_dir)})
        out.append(target)
    names = [t.name for t in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"targets: {path}: two targets are named {dupes[0]!r}")
    if sum(t.kind == REFERENCE for t in out) > 1:
        raise ConfigError(f"targets: {path}: at most one target of kind 'reference'")
    tenant = doc.get("tenant", "default")
    if not isinstance(tenant, str) or not SAFE_TOKEN.fullmatch(tenant):
        raise ConfigError(f"targets: {path}: key 'tenant' must be a tenant id")
    return Targets(tenant=tenant, targets=tuple(out), source=path)


def home_targets(home_root: Path, store_dir: Path) -> Targets:
    """The targets in effect for a home: `ERASURE_TARGETS` (what `--targets FILE` exports), else
    `<home>/targets.toml`, else the reference store alone."""
    import os

    file = os.environ.get("ERASURE_TARGETS")
    return load_targets(home_root, store_dir, Path(file) if file else None)
