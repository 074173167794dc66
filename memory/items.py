"""One ingest line (`MemoryItem`) and the JSONL reader that validates a whole file before any write.

A line looks like:
    {"source": "chat", "source_ref": "conv-0001", "subject": {"id": "user-1", "email": "a@b.org"},
     "content": "...", "attachments": ["files/a.txt"], "training": true, "subprocessors": ["crm-sync"],
     "item_id": "msg-17"}

An item is not its conversation: `(source, source_ref)` names where it was said, and many people say
many things there. Its identity (`item_key`) is its conversation plus its `item_id` when the platform
gives one, else plus its subject and content: two people in one room are two items, and an exact
re-delivery of one item is the same item again.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, ValidationError

from erasure.errors import InputError
from erasure.identity import salted_hash
from erasure.subject import Subject
from erasure.untrusted import check_json_depth

MAX_LINE_BYTES = 1 << 20
"""The longest ingest line accepted (1 MiB, newline excluded); a longer one rejects the file."""

NonEmpty = Annotated[str, StringConstraints(strict=True, min_length=1, strip_whitespace=True)]
# A source never contains "/": turn keys are "<source>/<source_ref>" and must not be ambiguous.
SourceName = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=128, strip_whitespace=True, pattern=r"^[^/\x00-\x1f]+$"),
]
SourceRef = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=512, strip_whitespace=True, pattern=r"^[^\x00-\x1f]+$"),
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
    item_id: SourceRef | None = None
    """The platform's own id of the item within its conversation (a message id), when it has one."""


def item_key(
    secret: bytes, source: str, source_ref: str, subject_id: str, content: str, item_id: str | None = None
) -> str:
    """An item's identity: HMAC-SHA256 under the store's secret (hex) of its conversation and its
    `item_id`, or, without one, of its conversation, subject id and content. Keyed, so the key says
    nothing of what it identifies."""
    parts = (
        [source, source_ref, "id", item_id]
        if item_id is not None
        else [source, source_ref, "content", subject_id, content]
    )
    return salted_hash(secret, "item", json.dumps(parts, ensure_ascii=False))


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"]) or "line"
    msg = str(err["msg"])
    if err["type"] == "missing":
        return f"missing field {loc!r}"
    if err["type"] == "extra_forbidden":
        return f"unknown field {loc!r}"
    return f"{loc}: {msg}"


def resolve_attachment(name: str, base_dir: Path, where: str) -> Path:
    """The real path of one attachment: a regular file with one link (a hard link's other name can be
    any file) inside `base_dir` (itself resolved) after resolving symlinks. Relative names are
    relative to `base_dir`. Anything else (outside the folder,
    a directory, a device, a FIFO, a loop, a missing file) raises `InputError("WHERE: why")`; the
    message never repeats the name."""
    if "\x00" in name:
        raise InputError(f"{where}: not a file name")
    try:
        path = (base_dir / name).resolve(strict=True)  # an absolute name replaces base_dir here
    except FileNotFoundError:
        raise InputError(f"{where}: file not found") from None
    except (OSError, RuntimeError):  # a symlink loop, a name too long, no permission
        raise InputError(f"{where}: cannot be resolved") from None
    if not path.is_relative_to(base_dir):
        raise InputError(f"{where}: outside the JSONL file's folder (attachments must be inside it)")
    try:
        st = path.stat()
    except OSError:
        raise InputError(f"{where}: cannot be read") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{where}: not a regular file")
    if st.st_nlink != 1:  # its other name may be any file of the file system: refused like a link out
        raise InputError(f"{where}: has another hard link (a hard-linked file may be someone else's file)")
    return path


def parse_line(text: str, where: str, base_dir: Path) -> MemoryItem:
    """Parse one JSONL line; `where` is "FILE:LINE" for messages. Attachments are resolved against
    `base_dir` (a resolved path) and must be regular files inside it (`resolve_attachment`).
    Raises `InputError("FILE:LINE: ...")`."""
    check_json_depth(text, where)
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
    resolved = [
        str(resolve_attachment(name, base_dir, f"{where}: attachments.{i}")) for i, name in enumerate(item.attachments)
    ]
    if resolved:
        item = item.model_copy(update={"attachments": resolved})
    return item


def iter_lines(path: Path, max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes without the newline) of every line of `path`, read one bounded line at a
    time: a line longer than `max_line` bytes raises `InputError("FILE:LINE: ...")` before more
    than `max_line` + 1 bytes of it are held (the zero device is one endless line)."""
    try:
        with open(path, "rb") as f:
            lineno = 0
            while True:
                line = f.readline(max_line + 1)
                if not line:
                    return
                lineno += 1
                if line.endswith(b"\n"):
                    line = line[:-1]
                elif len(line) > max_line:
                    raise InputError(
                        f"{path}:{lineno}: line is longer than {max_line:,} bytes (the maximum of one memory item)"
                    )
                yield lineno, line
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None


def read_jsonl(path: Path | str) -> list[MemoryItem]:
    """Read and validate a whole JSONL file of memory items (blank lines are ignored).

    Nothing is returned unless every line is valid: the first bad line raises
    `InputError("FILE:LINE: what is wrong")`. Lines are at most `MAX_LINE_BYTES` long. Attachments
    are relative to the file's folder and must be regular files inside it (`resolve_attachment`).
    """
    p = Path(path)
    base = p.resolve().parent
    items: list[MemoryItem] = []
    for lineno, line in iter_lines(p):
        where = f"{p}:{lineno}"
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{where}: not UTF-8") from None
        if not text.strip():
            continue
        items.append(parse_line(text, where, base))
    return items
