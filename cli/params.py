"""typer's parameter coercion without pydantic for the values that need no conversion.

typer (0.29) coerces every parameter's value, defaults included, through a pydantic `TypeAdapter` built
on first use: for `erasure sla --json` that is a sixth of all it costs. Most values need no conversion:
an absent value, a string for a `str` option, a number default in range, a string for a plain `Path`
option. For those `install` makes typer return what its adapter would have returned, without building
it; every other value goes to typer's own coercion, built when a value first needs it.
tests/cli/test_cli_params.py holds the two to the same results and errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from typer import core
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_path


@dataclass(frozen=True)
class Deferred(RuntimeParam):
    """A parameter's coercion: plain values here, the rest by typer's own (built on first need)."""

    descriptor: TypeDescriptor

    @cached_property
    def typer_param(self) -> RuntimeParam:
        """typer's own coercion of this parameter (its pydantic adapter)."""
        return build_runtime_param(self.descriptor)

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        info = self.parameter_info
        kind = self.annotation
        if info.parser is None and self.descriptor.file_annotation is None:
            if kind is str and type(value) is str:
                return value
            if (kind is int or kind is float) and type(value) is kind and _in_range(value, info):
                return value
            if kind is Path and info.path_type is None and type(value) is str and str(Path(value)) == value:
                # typer's adapter: the string made a Path by pydantic, then checked as here (a string
                # the Path spells the same, so typer's messages name it the same)
                return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
        return self.typer_param._coerce_value(value, param=param, ctx=ctx)


def _in_range(value: float, info: Any) -> bool:
    return not info.clamp and (info.min is None or value >= info.min) and (info.max is None or value <= info.max)


def deferred(descriptor: TypeDescriptor) -> RuntimeParam:
    """The coercion typer builds for a parameter, as `Deferred`."""
    return Deferred(annotation=descriptor.annotation, parameter_info=descriptor.parameter_info, descriptor=descriptor)


def install() -> None:
    """Make typer coerce plain values without pydantic (every command built after this)."""
    core.build_runtime_param = deferred  # type: ignore[attr-defined]
