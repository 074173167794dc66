"""Typed flow parameters for the UI forms: a description that reaches the form, and the request id."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field


def described(description: str, **constraints: Any) -> Any:
    """A pydantic `Field` for a flow parameter whose description reaches the UI form.

    Prefect 3.9.1 builds the parameter schema with an outer `Field(description=<docstring or None>)`
    that overrides the description of a `Field` inside `Annotated` (constraints survive); a
    `json_schema_extra` description is merged instead, so we set both."""
    return Field(description=description, json_schema_extra={"description": description}, **constraints)


RequestId = Annotated[
    str,
    described(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
        description="The request id (as given by `erasure request submit` or the inbox). Never an email or a name.",
    ),
]
