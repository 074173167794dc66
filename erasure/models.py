"""Domain models of intake and the cascade: the request envelope, the step record, and their checks.

The envelope is the only object that carries a subject's identifiers; it lives in the engine's vault
and nowhere else. Everything derived from it (request rows, events, step records, the pack) carries
ids, counts and digests only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from erasure.clocks import CLOCK_SKEW, LegalBasis
from erasure.errors import InputError
from erasure.mentions import mentions_subject
from erasure.request_ids import TOKEN_RULE, is_safe_token
from erasure.subject import Subject
from erasure.tiers import CASCADE_ORDER, Tier
from erasure.untrusted import check_json_depth, read_capped

MIN_RECEIVED_AT = datetime(2000, 1, 1, tzinfo=UTC)
"""The earliest `received_at` accepted: older than any law this engine knows (the deadline arithmetic
of year 1 or 9999 would overflow the calendar)."""

MAX_ENVELOPE_BYTES = 1_000_000
REQUEST_ID_FIELD = "request_id"


class StepStatus(StrEnum):
    """The outcome of one cascade step, as written in its step record."""

    running = "running"
    erased = "erased"
    skipped = "skipped"
    blocked = "blocked"
    failed = "failed"
    exception = "exception"


def _check_token(value: str) -> str:
    if not is_safe_token(value):
        raise ValueError(TOKEN_RULE)
    return value


def _aware_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must include a timezone offset (e.g. Z or +02:00)")
    return value.astimezone(UTC)


class ErasureRequestEnvelope(BaseModel):
    """One erasure request as submitted: who, what, under which law, received when, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    request_id: str
    tenant_id: str
    subject: Subject
    data_classes: tuple[Tier, ...] = CASCADE_ORDER
    legal_basis: LegalBasis
    received_at: datetime
    requester_identity_proof_ref: str = Field(min_length=1, max_length=512)
    reason: str = Field(min_length=1, max_length=2000)

    @field_validator("request_id", "tenant_id")
    @classmethod
    def _safe_token(cls, v: str) -> str:
        return _check_token(v)

    @field_validator("subject", mode="before")
    @classmethod
    def _subject_not_empty(cls, v: Any) -> Any:
        if v is None or (isinstance(v, dict) and not any(x not in (None, "") for x in v.values())):
            raise ValueError("must name the subject (at least an id)")
        return v

    @field_validator("data_classes")
    @classmethod
    def _cascade_order(cls, v: tuple[Tier, ...]) -> tuple[Tier, ...]:
        if not v:
            raise ValueError("must name at least one tier")
        wanted = set(v)
        return tuple(t for t in CASCADE_ORDER if t in wanted)

    @field_validator("received_at", mode="before")
    @classmethod
    def _iso_text(cls, v: Any) -> Any:
        if not isinstance(v, str | datetime):
            raise ValueError("must be an ISO 8601 date-time with a timezone offset")
        return v

    @field_validator("received_at")
    @classmethod
    def _received_at(cls, v: datetime, info: ValidationInfo) -> datetime:
        try:
            v = _aware_utc(v)
        except OverflowError:  # year 1 or 9999 with an offset: not a UTC time at all
            raise ValueError("is out of range (year 2000 to now)") from None
        if v < MIN_RECEIVED_AT:
            raise ValueError("is before 2000-01-01T00:00:00Z: out of range")
        ctx = info.context if isinstance(info.context, dict) else {}
        now = ctx.get("now") or datetime.now(UTC)
        if v > now + CLOCK_SKEW:
            raise ValueError("is in the future")
        return v

    @field_validator("reason")
    @classmethod
    def _reason_names_nobody(cls, v: str, info: ValidationInfo) -> str:
        subject = info.data.get("subject")
        if isinstance(subject, Subject):
            kind = mentions_subject(v, subject)
            if kind is not None:
                raise ValueError(f"must not contain the subject's identifiers (found the subject's {kind})")
        return v

    @model_validator(mode="after")
    def _request_id_names_nobody(self) -> ErasureRequestEnvelope:
        # a request id becomes Prefect parameters, run names, result paths, file names of the pack and
        # audit entries, all of which outlive the subject: it must not hold any part of their identity
        kind = mentions_subject(self.request_id, self.subject, strict=True)
        if kind is not None:
            raise ValueError(
                f"{REQUEST_ID_FIELD}: must not contain the subject's identifiers (found the subject's {kind})"
            )
        return self

    def canonical_dict(self) -> dict[str, Any]:
        """The envelope as plain JSON data (datetimes as ISO 8601 UTC): what the vault stores and
        what the envelope digest is computed over."""
        return self.model_dump(mode="json")


class StepRecord(BaseModel):
    """The record one cascade step leaves: counts before and after, and a digest of what it removed.
    `detail` holds ids and counts only, never identifiers or content."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    request_id: str
    step: str
    status: StepStatus
    before_count: int | None = Field(default=None, ge=0)
    after_count: int | None = Field(default=None, ge=0)
    started_at: datetime
    ended_at: datetime | None = None
    removed_digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    detail: dict[str, Any] = Field(default_factory=dict)
    target: str | None = None
    """The target (from targets.toml) this step erased; None for the reference store."""

    @field_validator("request_id", "step")
    @classmethod
    def _safe_token(cls, v: str) -> str:
        return _check_token(v)

    @field_validator("started_at", "ended_at")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else _aware_utc(v)


def removed_digest(ids: Iterable[str | int]) -> str:
    """SHA-256 hex over the ids sorted as strings, each UTF-8 encoded and prefixed by its byte length
    as 8-byte big-endian. Duplicates are kept (hash a set if the ids may repeat)."""
    h = hashlib.sha256()
    for s in sorted(str(i) for i in ids):
        b = s.encode("utf-8")
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)
    return h.hexdigest()


def _one_line(source: str, exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"]) or "envelope"
    if first["type"] == "extra_forbidden":
        what = "unknown field"
    elif first["type"] == "missing":
        what = "required field is missing"
    else:
        what = str(first["msg"]).removeprefix("Value error, ")
    if not first["loc"] and what.startswith(f"{REQUEST_ID_FIELD}: "):  # a check across fields names its field
        loc, what = what.split(": ", 1)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {loc}: {what}{more}"


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}" if is_safe_token(k) else "duplicate key")
        out[k] = v
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


def parse_envelope(
    data: str | bytes, *, source: str = "envelope", now: datetime | None = None
) -> ErasureRequestEnvelope:
    """Parse and validate envelope JSON. Raises `InputError` with one line "SOURCE: field: what is
    wrong" (malformed JSON: "SOURCE: line L column C: ..."); the message never quotes a value."""
    if len(data) > MAX_ENVELOPE_BYTES:
        raise InputError(f"{source}: envelope is larger than {MAX_ENVELOPE_BYTES} bytes")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    check_json_depth(data, source)
    try:
        obj = json.loads(data, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:
        raise InputError(f"{source}: {exc}") from None
    if not isinstance(obj, dict):
        raise InputError(f"{source}: envelope: must be a JSON object")
    try:
        return ErasureRequestEnvelope.model_validate(obj, context={"now": now or datetime.now(UTC)})
    except ValidationError as exc:
        raise InputError(_one_line(source, exc)) from None


def load_envelope_file(path: str | Path, *, now: datetime | None = None) -> ErasureRequestEnvelope:
    """Read and validate an envelope file; `InputError` "FILE: field: what is wrong" on bad input."""
    p = Path(path)
    raw = read_capped(p, MAX_ENVELOPE_BYTES, what="envelope")  # a device or pipe never read whole
    return parse_envelope(raw, source=str(p), now=now)
