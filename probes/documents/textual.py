"""Text formats read into records (U+001E between them): RTF (striprtf), vCard and iCalendar (lines
unfolded, each property value a record; structured values' `;` a space; quoted-printable and base64
values decoded, a base64 value (a photo, an attachment) read again as a payload), JSON (each object's
keys and scalar values one record, nested objects records of their own), and mail (the standard
library's `email` with `email.policy.default`: each header decoded (encoded words) is a record, each
part's payload decoded (base64, quoted-printable) and read again as a payload)."""

from __future__ import annotations

import base64
import binascii
import contextlib
import email
import email.policy
import json
import quopri
import re
from dataclasses import dataclass, field
from email.message import EmailMessage, Message
from typing import Any

from striprtf.striprtf import rtf_to_text

from probes.documents.markup import RS

MAX_JSON_NODES = 1_000_000


@dataclass
class TextReading:
    """What a text format holds: records to match, and payloads to read again."""

    records: list[str] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)


def rtf_records(text: str) -> TextReading:
    """An RTF document's text, one record per paragraph."""
    try:
        plain = str(rtf_to_text(text, errors="ignore"))  # type: ignore[no-untyped-call]
    except Exception:  # striprtf raises what its regexes meet: the document is then not read
        return TextReading()
    return TextReading([line.strip() for line in plain.splitlines() if line.strip()])


_FOLD = re.compile(r"\r?\n[ \t]")
_VALUE_ESCAPE = re.compile(r"\\([,;:\\nN])")


def _unescape(value: str) -> str:
    return _VALUE_ESCAPE.sub(lambda m: " " if m.group(1) in "nN" else m.group(1), value)


def _split_property(line: str) -> tuple[str, list[str], str] | None:
    """(name, parameters, value) of one unfolded content line (a `:` inside a quoted parameter is not the
    value's start)."""
    quoted = False
    for i, c in enumerate(line):
        if c == '"':
            quoted = not quoted
        elif c == ":" and not quoted:
            head, value = line[:i], line[i + 1 :]
            name, *params = head.split(";")
            return name.strip().upper(), params, value
    return None


def vcard_records(text: str) -> TextReading:
    """vCard (2.1, 3.0, 4.0) and iCalendar: lines unfolded, then each property's value (and each
    parameter's, such as an attendee's CN) a record."""
    out = TextReading()
    for line in _FOLD.sub("", text).splitlines():
        parsed = _split_property(line)
        if parsed is None:
            continue
        name, params, value = parsed
        upper = [p.upper() for p in params]
        for p in params:
            if "=" in p and p.split("=", 1)[1].strip('"').strip():
                out.records.append(p.split("=", 1)[1].strip('"'))
        if name in ("BEGIN", "END", "VERSION"):
            continue
        if any(p in ("ENCODING=B", "ENCODING=BASE64", "BASE64") for p in upper) or value.startswith("data:"):
            raw = value.split(",", 1)[1] if value.startswith("data:") else value
            try:
                out.payloads.append(base64.b64decode(raw.strip(), validate=False))
            except (binascii.Error, ValueError):
                out.records.append(value)
            continue
        if any(p in ("ENCODING=QUOTED-PRINTABLE", "QUOTED-PRINTABLE") for p in upper):
            value = quopri.decodestring(value.encode("utf-8", "replace")).decode("utf-8", "replace")
        out.records.append(" ".join(_unescape(value).replace(";", " ").split()))
    return out


def _json_walk(node: Any, out: list[str], budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        return
    if isinstance(node, dict):
        own: list[str] = []
        for key, value in node.items():
            own.append(str(key))
            if isinstance(value, dict | list):
                _json_walk(value, out, budget)
            elif value is not None:
                own.append(str(value))
        out.append(" ".join(own))
    elif isinstance(node, list):
        scalars = [str(v) for v in node if not isinstance(v, dict | list) and v is not None]
        if scalars:
            out.append(" ".join(scalars))
        for value in node:
            if isinstance(value, dict | list):
                _json_walk(value, out, budget)
    elif node is not None:
        out.append(str(node))


def json_records(text: str) -> TextReading:
    """A JSON document or JSON lines: each object's keys and scalar values one record."""
    docs: list[Any] = []
    try:
        docs = [json.loads(text)]
    except (ValueError, RecursionError):
        try:
            docs = [json.loads(line) for line in text.splitlines() if line.strip()]
        except (ValueError, RecursionError):
            return TextReading()
    out: list[str] = []
    budget = [MAX_JSON_NODES]
    for doc in docs:
        _json_walk(doc, out, budget)
    return TextReading([r for r in out if r.strip()])


def _headers(part: Message) -> list[str]:
    out: list[str] = []
    for name, value in part.items():
        try:
            out.append(f"{name}: {' '.join(str(value).split())}")
        except Exception:  # a header the policy cannot parse: its raw text
            out.append(f"{name}: {value!r}")
    return out


def email_records(data: bytes) -> TextReading:
    """A mail message: each header of each part (decoded) a record; each leaf part's payload decoded and
    returned to be read again (text parts too: their charset is the part's, the pipeline reads bytes);
    a part's file name a record."""
    out = TextReading()
    msg = email.message_from_bytes(data, policy=email.policy.default)
    for part in msg.walk():
        out.records += _headers(part)
        if part.is_multipart():
            continue
        name = part.get_filename()
        if name:
            out.records.append(name)
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            charset = part.get_content_charset()
            if part.get_content_maintype() == "text" and charset and charset.lower() not in ("utf-8", "us-ascii"):
                with contextlib.suppress(LookupError):
                    payload = payload.decode(charset, "replace").encode("utf-8")
            out.payloads.append(payload)
    if isinstance(msg, EmailMessage) and not out.records:
        out.records.append(str(msg))
    return out


def join(records: list[str]) -> str:
    """Records as one text to match, U+001E between them."""
    return RS.join(records)
