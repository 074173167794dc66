"""Find a ledger entry's subject in a restored framework store (langgraph-sqlite, chroma, mem0) by the
ledger's keyed hashes alone, without the original request's vault.

What is read: every SQLite database among the target's files (`files(target)` of its eraser; a folder
is walked), read-only, every row of every ordinary table. From each value come candidate strings:

- a text value itself (a namespace label, a metadata value, a user id), the parts of a dotted
  LangGraph namespace (`users.<id>`, and every run of its parts), the values of a mem0 session scope
  (`agent_id=..&user_id=..`, mem0's escaping undone), the strings of a JSON document (keys and values);
- a blob's strings: a pickle's (local Qdrant's points: read with `pickletools`, never unpickled), or
  the printable runs of any other encoding (msgpack checkpoints), with a possible length byte dropped;
- inside every text: email-shaped tokens, phone-shaped tokens and runs of one to four words (names).

Each candidate is put in every normal form (`erasure.identity`: `fold` for ids and names,
`normal_email`, `phone_digits`), hashed under the ledger key, and compared with the entry's hashes.
The matching values, as the store spells them, make the replay's subject: the framework erasers find
a subject's items by their id (folded), so the id is what must be found; the other identifiers found
are given to the probes too. Nothing found means the store holds no item keyed by the subject: there
is nothing of them to erase there. Values stay in memory; nothing is logged or returned but the subject.
"""

from __future__ import annotations

import json
import pickletools
import re
from collections.abc import Iterator
from pathlib import Path

import apsw

from erasure import ledger
from erasure.identity import fold, normal_email, phone_digits
from erasure.ledger import Entry
from erasure.subject import Subject
from erasure.targets import Target
from tasks.targets.langgraph_sqlite import json_strings

SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_WHOLE = 256
"""A string longer than this is not an identifier itself (a subject id has at most 256 characters);
only its tokens are."""
MAX_TEXT = 20_000
"""Characters of one value read for tokens."""
_EMAIL = re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?:\+|00)?\d[\d\s().-]{5,}\d")
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
_RUN = re.compile(r"[^\x00-\x1f\x7f\ufffd]{3,}")


def sqlite_files(target: Target) -> list[Path]:
    """Every SQLite database among the target's files (folders walked), in a stable order."""
    from tasks.targets.eraser import eraser_for

    out: list[Path] = []
    for path in eraser_for(target).files(target):
        for p in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if p.is_file() and not p.is_symlink() and p not in out:
                with p.open("rb") as f:
                    if f.read(16) == SQLITE_MAGIC:
                        out.append(p)
    return out


def _pickle_strings(data: bytes) -> Iterator[str]:
    try:
        for _op, arg, _pos in pickletools.genops(data):
            if isinstance(arg, str):
                yield arg
            elif isinstance(arg, bytes) and len(arg) <= MAX_TEXT:
                yield arg.decode("utf-8", "ignore")
    except Exception:  # a truncated or foreign pickle: its strings so far are what we have
        return


def _blob_strings(data: bytes) -> Iterator[str]:
    if data[:1] == b"\x80":
        yield from _pickle_strings(data)
    for run in _RUN.findall(data[: MAX_TEXT * 4].decode("utf-8", "replace")):
        yield run
        yield run[1:]  # msgpack str8 / pickle SHORT_BINUNICODE: a printable length byte glued in front


def _text_strings(text: str, depth: int = 0) -> Iterator[str]:
    yield text
    t = text.strip()
    if depth < 3 and t[:1] in '{["' and len(t) <= MAX_TEXT * 4:
        try:
            doc = json.loads(t)
        except ValueError:
            doc = None
        for s in json_strings(doc):
            if s != text:
                yield from _text_strings(s, depth + 1)
    if len(text) <= MAX_WHOLE and "." in text and " " not in text:
        parts = text.split(".")
        for i in range(len(parts)):
            for j in range(i + 1, len(parts) + 1):
                yield ".".join(parts[i:j])
    if "=" in text and len(text) <= MAX_TEXT:
        for part in text.split("&"):
            _k, sep, v = part.partition("=")
            if sep:
                yield v.replace("%3D", "=").replace("%26", "&").replace("%25", "%")


def _candidates(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield from _text_strings(value)
    elif isinstance(value, bytes):
        for s in _blob_strings(value):
            yield from _text_strings(s)


def harvest(target: Target) -> set[str]:
    """Every candidate string of every row of every SQLite database of `target` (in memory only); a kind
    whose eraser has `replay_strings(target)` (langgraph-postgres) gives its rows' strings itself."""
    out: set[str] = set()
    from tasks.targets.eraser import eraser_for

    own = getattr(eraser_for(target), "replay_strings", None)
    if own is not None:  # a kind not in SQLite files (langgraph-postgres) reads its own rows
        for value in own(target):
            out.update(_candidates(value))
        return out
    for path in sqlite_files(target):
        conn = apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        conn.setbusytimeout(30_000)
        try:
            tables = [
                str(r[0])
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
                )
            ]
            for table in tables:
                quoted = '"' + table.replace('"', '""') + '"'
                try:
                    for row in conn.execute(f"SELECT * FROM {quoted}"):
                        for value in row:
                            out.update(_candidates(value))
                except apsw.Error:
                    continue  # a table this SQLite cannot read (a module it lacks): its shadow tables are read
        finally:
            conn.close()
    return out


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    """(kind, value) of the identifier-shaped tokens of `text`: emails, phones, runs of 1-4 words."""
    text = text[:MAX_TEXT]
    for m in _EMAIL.finditer(text):
        yield "email", m.group(0)
    for m in _PHONE.finditer(text):
        yield "phone", m.group(0)
    words = [m.group(0) for m in _WORD.finditer(text)]
    for i in range(len(words)):
        for n in range(1, 5):
            if i + n <= len(words):
                yield "name", " ".join(words[i : i + n])


def match(key: bytes, entry: Entry, strings: set[str]) -> tuple[Subject | None, int]:
    """The subject of `entry` as `strings` spell them (None when no id matches), and how many other
    spellings of ids (store ids the original request confirmed as aliases) matched."""
    ids: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for s in sorted(strings):
        whole = s.strip()
        if whole and len(whole) <= MAX_WHOLE:
            f = fold(whole)
            digest = ledger.keyed(key, "id", f)
            if entry.has("id", digest):
                ids.setdefault("exact", whole)
            elif entry.has("store_id", digest):
                ids.setdefault(f"alias:{f}", whole)
            if entry.has("name", ledger.keyed(key, "name", f)):
                spelled.setdefault("name", whole)
        for kind, value in _tokens(s):
            if kind in spelled:
                continue
            normal = {"email": normal_email, "phone": phone_digits, "name": fold}[kind](value)
            if normal and entry.has(kind, ledger.keyed(key, kind, normal)):
                spelled[kind] = value.strip()
    if not ids:
        return None, 0
    main = ids.get("exact") or ids[sorted(ids)[0]]
    fields: dict[str, str] = {"id": main}
    for kind, value in spelled.items():
        try:
            Subject.model_validate({"id": main, kind: value})
        except ValueError:
            continue  # not a shape a request could carry (e.g. an email with a display part): the id suffices
        fields[kind] = value
    aliases = len({k for k in ids if k.startswith("alias:") and k[6:] != fold(main)})
    return Subject.model_validate(fields), aliases
