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

from collections.abc import Callable
from dataclasses import dataclass

import apsw

from erasure.errors import Conflict
from erasure.identity import Identity, fold, normal_email, phone_digits
from tasks import mentions

SUBJECT_ID_TABLES = (
    "raw_archive",
    "frames",
    "working_sessions",
    "blobs",
    "ft_examples",
    "subprocessor_records",
    "audit_vault",
)


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


def _succ(prefix: str) -> str:
    """The least string above every string that starts with `prefix` (non-empty)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


_SPACE_RANGES = (("\t", "\x0e"), ("\x1c", "!"))
"""The ASCII characters `str.split` takes for white space, as half-open ranges."""


def values_folding_to(
    conn: apsw.Connection, table: str, column: str, target: str, *, where: str = "", params: tuple[str, ...] = ()
) -> set[str]:
    """Values of an indexed text column that may normalise to `target` (NFKC, case folding, white
    space folded), found by seeks on the column's index rather than a scan; the caller decides with
    its normal form. A superset of the values whose normal form is `target`:

    - for an ASCII `target`: a value that folds to it is, up to its first character that is not ASCII
      or is white space folding may change, an ASCII spelling of a prefix of `target` in some letter
      case. The walk follows the letter-case spellings of `target`'s prefixes that exist in the index
      and, at each, takes every value that goes on with such a character (a range of the index), plus
      the whole spellings at the end. Its cost grows with `target` and what matches, not the table.
    - for a non-ASCII `target` (no ASCII value can fold to it): the distinct non-ASCII values, a scan.
    """
    cond = f"{where} AND " if where else ""
    if not target.isascii():
        return {
            str(r[0])
            for r in conn.execute(
                f"SELECT DISTINCT {column} FROM {table} WHERE {cond}{column} IS NOT NULL AND {_non_ascii(column)}",
                params,
            )
        }
    ranges = f"SELECT {column} FROM {table} WHERE {cond}{column} >= ? AND {column} < ?"
    tail = f"SELECT {column} FROM {table} WHERE {cond}{column} >= ?"
    exists = f"SELECT 1 FROM {table} WHERE {cond}{column} >= ? AND {column} < ? LIMIT 1"
    found: set[str] = set()
    frontier = [""]
    for i in range(len(target) + 1):
        nxt: list[str] = []
        for prefix in frontier:
            odd = [(prefix + lo, prefix + hi) for lo, hi in _SPACE_RANGES]
            if prefix:
                odd.append((prefix + "\x80", _succ(prefix)))
                if i == len(target):
                    odd.append((prefix, prefix + "\x00"))
                for lo, hi in odd:
                    found |= {str(r[0]) for r in conn.execute(ranges, (*params, lo, hi))}
            else:
                for lo, hi in odd:
                    found |= {str(r[0]) for r in conn.execute(ranges, (*params, lo, hi))}
                found |= {str(r[0]) for r in conn.execute(tail, (*params, "\x80"))}
            if i < len(target):
                for ch in dict.fromkeys((target[i], target[i].upper(), target[i].lower())):
                    if ch.isascii() and conn.execute(exists, (*params, prefix + ch, _succ(prefix + ch))).fetchone():
                        nxt.append(prefix + ch)
        frontier = nxt
        if not frontier:
            break
    return found


def ids_folding_to(conn: apsw.Connection, identity: Identity) -> set[str]:
    """Store subject ids that normalise to one of the identity's ids (seeks on each table's subject index)."""
    wanted = set(identity.ids)
    found: set[str] = set()
    for table in SUBJECT_ID_TABLES:
        for target in sorted(wanted):
            found |= {sid for sid in values_folding_to(conn, table, "subject_id", target) if fold(sid) in wanted}
    return found


def personal_entities(conn: apsw.Connection, identity: Identity) -> dict[int, str]:
    """entity_id -> kind of the person/email/phone entities that name one of the identity's
    identifiers, compared in normal form (so `ADA@Example.org` and `+44 20 ...` spellings match).

    Person and email entities are found by seeks on the (kind, name) index (`values_folding_to`);
    phone entities, whose names may carry any characters between the digits, by a scan of the phone
    entities that keeps those holding the digits in order (or any non-ASCII character)."""
    out: dict[int, str] = {}
    names = set(identity.names) | set(identity.ids)
    emails, phones = set(identity.emails), set(identity.phones)

    def ids_named(kind: str, values: set[str]) -> set[str]:
        found: set[str] = set()
        for target in sorted(values):
            found |= values_folding_to(conn, "kg_entities", "name", target, where="kind = ?", params=(kind,))
        return found

    normal: dict[str, tuple[set[str], Callable[[str], str]]] = {
        "person": (names, fold),
        "email": (emails, normal_email),
    }
    for kind, (values, norm) in normal.items():
        for name in sorted(ids_named(kind, values)):
            if norm(name) in values:
                for (eid,) in conn.execute(
                    "SELECT entity_id FROM kg_entities WHERE kind = ? AND name = ?", (kind, name)
                ):
                    out[int(eid)] = kind
    if phones:
        out |= dict.fromkeys(_phone_entities(conn, phones), "phone")
    return out


def _phone_entities(conn: apsw.Connection, phones: set[str]) -> set[int]:
    """Phone entities whose digits are one of `phones`: from the window's one read of them inside a
    shared mention scope (`mentions.shared`), else by a scan that keeps the names holding the digits in
    order (or any non-ASCII character) and checks those."""
    index = mentions.shared_index(conn)
    if index is not None:
        return index.phone_entities(conn, phones)
    globs = ["*" + "*".join(p) + "*" for p in sorted(phones)]
    return {
        int(eid)
        for eid, name in conn.execute(
            f"SELECT entity_id, name FROM kg_entities WHERE kind = 'phone' AND ({_non_ascii('name')} OR "
            + " OR ".join("name GLOB ?" for _ in globs)
            + ")",
            globs,
        )
        if phone_digits(str(name)) in phones
    }


def ids_linked_to(conn: apsw.Connection, entity_ids: set[int]) -> dict[str, int]:
    """Subject id -> number of summary frames that link one of `entity_ids`."""
    out: dict[str, int] = {}
    for eid in sorted(entity_ids):
        for sid, n in conn.execute(
            "SELECT f.subject_id, count(*) FROM kg_entity_frames l JOIN frames f ON f.frame_id = l.frame_id"
            " WHERE l.entity_id = ? AND f.subject_id IS NOT NULL GROUP BY f.subject_id",
            (eid,),
        ):
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
            "them as the same person, or correct the request"
        )
    return StoreIds(same=tuple(sorted(same)), aliases=tuple(sorted(others)), alias_items=sum(others.values()))
