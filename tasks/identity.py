"""Which of the store's subject ids are the request's subject: resolution by identity, not by one id.

The store files a person's items under the id the platform gave them, in whatever letter case it
used, and sometimes under a second id (a new account with the same email). A request names one id in
its own spelling. The subject's store ids are:
- every id equal to the request's id once both are normalised (NFKC, case folding);
- every id whose items carry one of the request's emails (the email entity the ingest links to the
  item's summary frame), when the team confirmed those aliases for this request.

An email that belongs to an id other than the request's is a conflict: either the same person under a
second id, or a request that names someone else's email. Nothing is erased until the team confirms
how many other ids they reviewed (`erasure request run ID --confirm-aliases N`). Names and phones
are weak identifiers (namesakes, a household phone): they never pull in another id; entities they
name that other people's items also link are shared, and are unlinked rather than deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from erasure.errors import Conflict
from erasure.identity import Identity, fold, normal_email, phone_digits
from tasks.mentions import PHONE_SEPARATORS

SUBJECT_ID_TABLES = ("raw_archive", "frames", "working_sessions", "blobs", "ft_examples",
                     "subprocessor_records", "audit_vault")


class IdentityConflict(Conflict):
    """The request's identifiers also belong to other subject ids in the store (never named)."""


@dataclass(frozen=True)
class StoreIds:
    """The subject's ids as the store spells them; `aliases` are other ids that share an email."""

    same: tuple[str, ...]
    aliases: tuple[str, ...]
    alias_items: int

    def all(self) -> tuple[str, ...]:
        return tuple(sorted({*self.same, *self.aliases}))


def _non_ascii(col: str) -> str:
    return f"length(CAST({col} AS BLOB)) != length({col})"


def _odd_spaces(col: str) -> str:
    """SQL: `col` has ASCII white space that folding changes (not a single inner space)."""
    terms = [f"instr({col}, char({ord(c)}))" for c in "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"]
    terms += [f"instr({col}, '  ')", f"{col} GLOB ' *'", f"{col} GLOB '* '"]
    return " OR ".join(terms)


def _in(values: list[str]) -> str:
    return ",".join("?" * len(values)) or "NULL"


def ids_folding_to(conn: apsw.Connection, identity: Identity) -> set[str]:
    """Store subject ids that normalise to one of the identity's ids (each table's subject index).

    SQL keeps only the distinct ids that can fold to one of them (an ASCII id folds to its lower case
    unless it has odd white space; a non-ASCII one is always checked), and `fold` decides."""
    wanted = set(identity.ids)
    ascii_wanted = sorted(w for w in wanted if w.isascii())
    found: set[str] = set()
    for table in SUBJECT_ID_TABLES:
        for (sid,) in conn.execute(
                f"WITH d(x) AS MATERIALIZED (SELECT DISTINCT subject_id FROM {table} WHERE subject_id IS NOT NULL)"
                f" SELECT x FROM d WHERE lower(x) IN ({_in(ascii_wanted)}) OR {_non_ascii('x')} OR {_odd_spaces('x')}",
                ascii_wanted):
            if fold(str(sid)) in wanted:
                found.add(str(sid))
    return found


def personal_entities(conn: apsw.Connection, identity: Identity) -> dict[int, str]:
    """entity_id -> kind of the person/email/phone entities that name one of the identity's
    identifiers, compared in normal form (so `ADA@Example.org` and `+44 20 ...` spellings match).

    Each kind is read through the (kind, name) index with a SQL condition that keeps every name whose
    normal form can be one of the identity's (see `ids_folding_to`); the normal form decides."""
    out: dict[int, str] = {}
    names = set(identity.names) | set(identity.ids)
    emails, phones = set(identity.emails), set(identity.phones)
    odd = f"{_non_ascii('name')} OR {_odd_spaces('name')}"
    ascii_names = sorted(n for n in names if n.isascii())
    for eid, name in conn.execute(
            f"SELECT entity_id, name FROM kg_entities WHERE kind = 'person' AND (lower(name) IN ({_in(ascii_names)})"
            f" OR {odd})", ascii_names):
        if fold(str(name)) in names:
            out[int(eid)] = "person"
    ascii_emails = sorted(e for e in emails if e.isascii())
    if emails:
        for eid, name in conn.execute(
                f"SELECT entity_id, name FROM kg_entities WHERE kind = 'email'"
                f" AND (lower(name) IN ({_in(ascii_emails)}) OR {odd})", ascii_emails):
            if normal_email(str(name)) in emails:
                out[int(eid)] = "email"
    if phones:
        stripped = "name"
        for c in PHONE_SEPARATORS + "+":
            stripped = f"replace({stripped}, char({ord(c)}), '')"
        digits = sorted(phones)
        for eid, name in conn.execute(
                f"SELECT entity_id, name FROM kg_entities WHERE kind = 'phone' AND ({_non_ascii('name')}"
                f" OR {stripped} GLOB '*[^0-9]*' OR " + " OR ".join(f"instr({stripped}, ?)" for _ in digits) + ")",
                digits):
            if phone_digits(str(name)) in phones:
                out[int(eid)] = "phone"
    return out


def ids_linked_to(conn: apsw.Connection, entity_ids: set[int]) -> dict[str, int]:
    """Subject id -> number of summary frames that link one of `entity_ids`."""
    out: dict[str, int] = {}
    for eid in sorted(entity_ids):
        for sid, n in conn.execute(
                "SELECT f.subject_id, count(*) FROM kg_entity_frames l JOIN frames f ON f.frame_id = l.frame_id"
                " WHERE l.entity_id = ? AND f.subject_id IS NOT NULL GROUP BY f.subject_id", (eid,)):
            out[str(sid)] = out.get(str(sid), 0) + int(n)
    return out


def resolve_store_ids(conn: apsw.Connection, identity: Identity, *, confirmed_aliases: int | None) -> StoreIds:
    """The subject's store ids. Raises `IdentityConflict` when an email of the request also belongs to
    other ids and the team has not confirmed exactly that many."""
    same = ids_folding_to(conn, identity)
    entities = personal_entities(conn, identity)
    emails = {e for e, k in entities.items() if k == "email"}
    by_email = ids_linked_to(conn, emails)
    others = {sid: n for sid, n in by_email.items() if sid not in same}
    if others and confirmed_aliases != len(others):
        items = sum(others.values())
        who = "the request's id holds nothing in the store and " if not same else ""
        raise IdentityConflict(
            f"{who}the request's email also belongs to {len(others)} other subject id(s) in the store "
            f"({items} item(s)): review them, then run again with --confirm-aliases {len(others)} to erase "
            "them as the same person, or correct the request")
    return StoreIds(same=tuple(sorted(same)), aliases=tuple(sorted(others)), alias_items=sum(others.values()))
