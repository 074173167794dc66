"""The probes' own view of who the subject is: every store id and every spelling, found with the
probes' own code (deliberately not `erasure.identity` nor `tasks.identity`: shared code would mean
shared blind spots).

- Store ids: ids that equal the request's id after NFKC and case folding, and ids whose summary frames
  link an email entity equal (lower-cased) to the request's email (the same person under a second
  id: by the time verification runs, the team confirmed them or nothing was erased).
- Spellings for the byte scan: each id as given and folded, the email lower-cased, the name as given
  and folded, the phone as given, its digits, its E.164 digits with `+`, and its national form with a
  trunk 0 where the country code is one or two digits long and obvious from the spelling given. The
  scan matches them ASCII-case-insensitively.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

import apsw

from erasure.subject import Subject

ID_TABLES = ("raw_archive", "frames", "working_sessions", "blobs", "ft_examples", "subprocessor_records", "audit_vault")


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def store_ids(conn: apsw.Connection, subject: Subject) -> list[str]:
    """The subject's ids as the store spells them (the request's own id included)."""
    every: set[str] = set()
    for table in ID_TABLES:
        every |= {
            str(r[0]) for r in conn.execute(f"SELECT DISTINCT subject_id FROM {table} WHERE subject_id IS NOT NULL")
        }
    return store_ids_in(conn, subject, ids_by_fold(every))


def ids_by_fold(every_id: Iterable[str]) -> dict[str, set[str]]:
    """Store ids grouped by their NFKC case-folded form."""
    out: dict[str, set[str]] = {}
    for sid in every_id:
        out.setdefault(_fold(sid), set()).add(sid)
    return out


def email_entities(conn: apsw.Connection) -> dict[str, list[int]]:
    """Every email entity's id by its name stripped and lower-cased."""
    out: dict[str, list[int]] = {}
    for eid, name in conn.execute("SELECT entity_id, name FROM kg_entities WHERE kind = 'email'"):
        out.setdefault(str(name).strip().lower(), []).append(int(eid))
    return out


def store_ids_in(
    conn: apsw.Connection, subject: Subject, by_fold: dict[str, set[str]], emails: dict[str, list[int]] | None = None
) -> list[str]:
    """`store_ids`, given every store id by folded form (`ids_by_fold`) and, optionally, every email
    entity by address (`email_entities`): both read once for a whole window."""
    ids = {subject.id} | by_fold.get(_fold(subject.id), set())
    if subject.email:
        email = subject.email.strip().lower()
        for eid in (emails if emails is not None else email_entities(conn)).get(email, []):
            ids |= {
                str(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT f.subject_id FROM kg_entity_frames l JOIN frames f ON f.frame_id = l.frame_id"
                    " WHERE l.entity_id = ? AND f.subject_id IS NOT NULL",
                    (eid,),
                )
            }
    return sorted(ids)


def phone_forms(phone: str) -> list[str]:
    """The phone as digit strings: all digits, `+`E.164, and the national form with a trunk 0."""
    digits = re.sub(r"\D", "", phone)
    if phone.strip().startswith("00"):
        digits = digits[2:]
    out = [digits, "+" + digits]
    parts = re.findall(r"\d+", phone)
    if phone.strip().startswith("+") and parts and len(parts[0]) <= 3 and len(parts) > 1:
        rest = digits[len(parts[0]) :]
        out.append(rest if parts[0] == "1" else "0" + rest)
    return [p for p in dict.fromkeys(out) if len(p.lstrip("+")) >= 7]


def spellings(subject: Subject, ids: list[str]) -> list[tuple[str, str]]:
    """(kind, spelling) of every identifier to look for in bytes, each once."""
    out: list[tuple[str, str]] = []
    for sid in ids:
        out += [("id", sid), ("id", _fold(sid))]
    if subject.email:
        out.append(("email", subject.email.strip().lower()))
    if subject.name:
        out += [("name", subject.name), ("name", " ".join(subject.name.split())), ("name", _fold(subject.name))]
    if subject.phone:
        out.append(("phone", subject.phone.strip()))
        out += [("phone", p) for p in phone_forms(subject.phone)]
    seen: set[str] = set()
    unique = []
    for kind, s in out:
        if s and s.lower() not in seen:
            seen.add(s.lower())
            unique.append((kind, s))
    return unique
