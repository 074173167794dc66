"""Each target kind's spec: its configuration model, the keys its backups are copies of, and how to
quiesce a server that keeps its files open; read by the erasing side and the probing side.

A kind `k-name` has three modules, found by name and listed nowhere: `erasure/target_kinds/k_name.py`
(its `SPEC`), `tasks/targets/k_name` (its `ERASER`) and `probes/targets/k_name` (its `PROBE`); the one
loader is `kind_part`. This package holds what the sides agree on, the keys of targets.toml and what
makes them valid, and never code that reads or writes a store: the sides share no logic, only the
settings (and the facts of a format both read, e.g. `chroma`'s HNSW layout).

A model reads a `Target`'s kind-specific keys (`Target.options()`); relative paths are read from the
targets file's folder. A key it refuses is a `ConfigError` (exit 3) naming the target and the key.
Keys a kind does not know are ignored, as they always were.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo

from erasure.errors import ConfigError
from erasure.server_control import ServerControl
from erasure.targets import Target


class KindConfig(BaseModel):
    """The base of every kind's configuration model (frozen; build it with `of`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    @classmethod
    def of(cls, target: Target) -> Self:
        """The target's keys, checked: `ConfigError` "targets: target NAME (KIND): key ..." naming the
        first key that is missing or wrong."""
        try:
            return cls.model_validate(target.options(), context={"base_dir": target.base_dir})
        except ValidationError as exc:
            raise ConfigError(f"targets: target {target.name!r} ({target.kind}): {_message(exc)}") from None

    def server(self, target: str) -> ServerControl | None:
        """The server that keeps the target's files open and how to quiesce it (None: no server does)."""
        return None


@dataclass(frozen=True)
class KindSpec:
    """What a kind is, the same for both sides: `SPEC` of `erasure/target_kinds/<kind>.py`."""

    config: type[KindConfig]
    """The model that reads a target's keys."""
    backup_paths: tuple[str, ...] = ()
    """The keys naming the file or folder a backup is a copy of (`mode = "rewrite"`, the first by default);
    empty: this kind's backups cannot be rewritten, only held."""


def _message(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    key = ".".join(str(x) for x in err["loc"])
    if err["type"] == "missing":
        return f"key {key!r} is required"
    if err["type"] == "value_error":  # our own validators: the message names the key
        return str(err["ctx"]["error"])
    return f"key {key!r}: {err['msg']}" if key else str(err["msg"])


def _text(value: Any, info: ValidationInfo) -> str:
    if not isinstance(value, str):
        raise ValueError(f"key {info.field_name!r} must be a string")
    return value


def _texts(value: Any, info: ValidationInfo) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
        raise ValueError(f"key {info.field_name!r} must be a list of strings")
    return tuple(value)


def _path(value: Any, info: ValidationInfo) -> Path:
    p = Path(_text(value, info)).expanduser()
    if p.is_absolute():
        return p
    base = (info.context or {}).get("base_dir")
    if not isinstance(base, Path):
        raise ValueError(f"key {info.field_name!r}: a relative path needs the targets file's folder")
    return base / p


Text = Annotated[str, BeforeValidator(_text)]
"""A string key."""
Texts = Annotated[tuple[str, ...], BeforeValidator(_texts)]
"""A list-of-strings key."""
TargetPath = Annotated[Path, BeforeValidator(_path)]
"""A path key: relative paths are read from the targets file's folder, absolute ones as given."""


def kind_part(target: Target, package: str, attr: str, missing: str, absent: str | None = None) -> Any:
    """The one kind loader: `attr` of the kind's module in `package` (`erasure.target_kinds` its
    spec, `tasks.targets` its eraser, `probes.targets` its probe). `ConfigError` naming
    the target and saying `absent` (default: the kind has no `missing`) when there is no such module,
    and the kind has no `missing` when the module lacks `attr`."""
    name = f"{package}.{target.module}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        why = absent or f"kind {target.kind!r} has no {missing}"
        raise ConfigError(f"targets: target {target.name!r}: {why}") from exc
    part = getattr(module, attr, None)
    if part is None:
        raise ConfigError(f"targets: kind {target.kind!r} has no {missing}")
    return part


def spec_of(target: Target) -> KindSpec:
    """The spec of the target's kind: `SPEC` of `erasure/target_kinds/<kind>.py` (`ConfigError` when
    the kind has none)."""
    spec: Any = kind_part(target, "erasure.target_kinds", "SPEC", "configuration model")
    if not (isinstance(spec, KindSpec) and issubclass(spec.config, KindConfig)):
        raise ConfigError(f"targets: kind {target.kind!r} has no configuration model")
    return spec


def check_config(target: Target) -> KindConfig:
    """The target's keys, read by its kind's model (`ConfigError` naming the key that is wrong)."""
    return spec_of(target).config.of(target)


def server_of(target: Target) -> ServerControl | None:
    """The server that keeps the target's files open, quiesced around its erasure and its probes (None:
    none does)."""
    return check_config(target).server(target.name)
