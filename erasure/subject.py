"""The data subject, as named in an ingest line and in an erasure request envelope."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, field_validator

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class Subject(BaseModel):
    """A data subject: the platform's id for them and the identifiers it may hold."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    id: str
    email: str | None = None
    name: str | None = None
    phone: str | None = None

    @field_validator("id")
    @classmethod
    def _id_nonempty(cls, v: str) -> str:
        if not v or len(v) > 256 or "\x00" in v:
            raise ValueError("subject id must be 1-256 characters with no NUL")
        return v

    @field_validator("email")
    @classmethod
    def _email_shape(cls, v: str | None) -> str | None:
        if v is not None and not _EMAIL.match(v):
            raise ValueError("not an email address")
        return v

    @field_validator("name", "phone")
    @classmethod
    def _nonempty(cls, v: str | None) -> str | None:
        if v is not None and not v:
            raise ValueError("must not be empty when given")
        return v

    def identifiers(self) -> list[str]:
        """Every identifier the subject is known by: id, then email, name, phone when present."""
        return [v for v in (self.id, self.email, self.name, self.phone) if v]
