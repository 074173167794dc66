"""One ingest line (`MemoryItem`) and the JSONL reader that validates a whole file before any write.

A line looks like:
    {"source": "chat", "source_ref": "conv-0001", "subject": {"id": "user-1", "email": "a@b.org"},
     "content": "...", "attachments": ["files/a.txt"], "training": true, "subprocessors": ["crm-sync"]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, ValidationError

from erasure.errors import InputError
from erasure.subject import Subject

NonEmpty = Annotated[str, StringConstraints(strict=True, min_length=1, strip_whitespace=True)]
# A source never contains "/": turn keys are "<source>/<source_ref>" and must not be ambiguous.
SourceName = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=128, strip_whitespace=True,
                           pattern=r"^[^/\x00-\x1f]+$"),
]
SourceRef = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=512, strip_whitespace=True,
                           pattern=r"^[^\x00-\x1f]+$"),
]


class MemoryItem(BaseModel):
    """One memory item as an agent platform would ingest it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: SourceName
    source_ref: SourceRef
    subject: Subject
    content: NonEmpty
    attachments: list[NonEmpty] = Field(default_factory=list)
    training: StrictBool = False
    subprocessors: list[NonEmpty] = Field(default_factory=list)

    @property
    def turn_key(self) -> str:
        """The key of this item's verbatim turn frames: `<source>/<source_ref>`."""
        return f"{self.source}/{self.source_ref}"


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"]) or "line"
    msg = str(err["msg"])
    if err["type"] == "missing":
        return f"missing field {loc!r}"
    if err["type"] == "extra_forbidden":
        return f"unknown field {loc!r}"
    return f"{loc}: {msg}"


def parse_line(text: str, where: str, base_dir: Path) -> MemoryItem:
    """Parse one JSONL line; `where` is "FILE:LINE" for messages. Attachments are resolved against
    `base_dir` and must exist. Raises `InputError("FILE:LINE: ...")`."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: malformed JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    try:
        item = MemoryItem.model_validate(obj)
    except ValidationError as exc:
        raise InputError(f"{where}: {_first_error(exc)}") from None
    resolved: list[str] = []
    for i, name in enumerate(item.attachments):
        path = Path(name)
        if not path.is_absolute():
            path = base_dir / path
        if not path.is_file():
            raise InputError(f"{where}: attachments.{i}: file not found")
        resolved.append(str(path.resolve()))
    if resolved:
        item = item.model_copy(update={"attachments": resolved})
    return item


def read_jsonl(path: Path | str) -> list[MemoryItem]:
    """Read and validate a whole JSONL file of memory items (blank lines are ignored).

    Nothing is returned unless every line is valid: the first bad line raises
    `InputError("FILE:LINE: what is wrong")`. Attachment paths are relative to the file's directory.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror})") from None
    base = p.resolve().parent
    items: list[MemoryItem] = []
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        where = f"{p}:{lineno}"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{where}: not UTF-8") from None
        if not text.strip():
            continue
        items.append(parse_line(text, where, base))
    return items
