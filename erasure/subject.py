"""The data subject, as named in an ingest line and in an erasure request envelope."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, field_validator

# One addr-spec (RFC 5322 3.4.1) in its dot-atom form, nothing around it: atoms of atext (RFC 6532
# adds any non-ASCII character but white space) joined by single dots, '@', then a domain of two or
# more labels (letters, digits, inner '-'). No quoted local part, domain literal, comment, display
# name, angle bracket, group or list: a comma or ';' is not atext, so `a,b@x.example` is refused.
_ATOM = r"(?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]|[^\x00-\x7f\s\x80-\x9f\u2028\u2029])+"
_LABEL = r"[^\W_]+(?:-+[^\W_]+)*"
_EMAIL = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+")
MAX_EMAIL = 254  # RFC 5321 4.5.3.1.3: a path holds at most 256 octets, with its angle brackets


def one_addr_spec(v: str) -> bool:
    """True when `v` is exactly one addr-spec (`local@domain`), which a mail header reads as one
    recipient: no list, display name, group, comment, quoting or white space."""
    if len(v) > MAX_EMAIL or not _EMAIL.fullmatch(v):
        return False
    # The standard library's reading of the field as a To header must agree: one mailbox, this one.
    from email.headerregistry import Address
    from email.utils import getaddresses

    try:
        parsed = Address(addr_spec=v)
    except (ValueError, IndexError, TypeError):
        return False
    return parsed.addr_spec == v and getaddresses([v]) == [("", v)]


class Subject(BaseModel):
    """A data subject: the platform's id for them and the identifiers it may hold."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True, defer_build=True)

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
        if v is not None and not one_addr_spec(v):
            raise ValueError("not one address (local@domain, with no name, list, comment or quoting)")
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
