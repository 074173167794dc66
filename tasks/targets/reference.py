"""Kind `reference`: our own nine-tier store (`memory/`). Its eraser is the nine-tier cascade
(`tasks.runner`: one idempotent step per tier, driven per request by the service layer, with its own
step records), so this module holds what the rest of the house asks of a kind, and the store's own part
of an erasure's afterlife: the tiers and files, the subject's counts, its sticky rows in a ledger entry,
how a restored store names the subject, and how a replay puts the sticky rows back.

Beyond the `tasks.targets.eraser` protocol's `kind`, `tiers`, `check` and `files`, the hooks a kind may
offer and this one does (the callers ask for them by name, never by kind):
- `count_request(target, request_id, home)`: per tier, the subject's items (the cascade's `prepare`);
- `sticky(target, request_id)`: the store's suppression rows of a completed request (keyed hashes);
- `find_subject(target, key, entry)`: the subject of a ledger entry as the restored store spells it;
- `reapply(target, entry, marker)`: an entry's sticky rows back, and the epoch up to it, in one transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from erasure import epoch, ledger
from erasure.config import Home
from erasure.identity import fold, normal_email, phone_digits
from erasure.ledger import Entry
from erasure.sqlite import connect, transaction
from erasure.subject import Subject
from erasure.target_kinds.reference import ReferenceConfig
from erasure.targets import REFERENCE, Target
from erasure.tiers import CASCADE_ORDER, Tier
from memory.schema import db_path
from tasks.identity import SUBJECT_ID_TABLES
from tasks.replay import Found


class ReferenceEraser:
    """The reference store as a kind: every tier of the nine, one database file."""

    kind: ClassVar[str] = REFERENCE
    tiers: ClassVar[tuple[Tier, ...]] = tuple(CASCADE_ORDER)

    def check(self, target: Target) -> None:
        ReferenceConfig.of(target)

    def files(self, target: Target) -> list[Path]:
        """The store's database first: it holds the erasure epoch (`tasks.epochs.epoch_db`)."""
        return [db_path(ReferenceConfig.of(target).path)]

    def count_request(self, target: Target, request_id: str, home: Home) -> dict[str, int]:
        """Per tier, the request's subject's items in the store now (the cascade's own footprint)."""
        from tasks.runner import prepare

        return prepare(request_id, home)

    def sticky(self, target: Target, request_id: str) -> dict[str, Any]:
        """The store's own suppression rows of `request_id` (keyed hashes under its secret)."""
        conn = connect(self.files(target)[0], readonly=True)
        try:
            keys = [
                list(r)
                for r in conn.execute(
                    "SELECT source, source_ref, item_key, erased_at FROM erased_subjects"
                    " WHERE request_ref = ? ORDER BY id",
                    (request_id,),
                )
            ]
            ids = [
                list(r)
                for r in conn.execute(
                    "SELECT kind, digest, created_at FROM erased_identities"
                    " WHERE erasure_ref = ? ORDER BY kind, digest",
                    (request_id,),
                )
            ]
        finally:
            conn.close()
        return {"erased_subjects": keys, "erased_identities": ids}

    def find_subject(self, target: Target, key: bytes, entry: Entry) -> Found:
        """The subject as the restored store spells them, found by the entry's keyed hashes."""
        conn = connect(self.files(target)[0], readonly=True)
        try:
            ids: set[str] = set()
            for table in SUBJECT_ID_TABLES:
                sql = f"SELECT DISTINCT subject_id FROM {table} WHERE subject_id IS NOT NULL"
                ids |= {str(r[0]) for r in conn.execute(sql)}
            matched = sorted(
                s
                for s in ids
                if entry.has("store_id", ledger.store_id_hash(key, s))
                or entry.has("id", ledger.keyed(key, "id", fold(s)))
            )
            spelled: dict[str, str] = {}
            for kind, name in conn.execute(
                "SELECT kind, name FROM kg_entities WHERE kind IN ('person', 'email', 'phone')"
            ):
                kind, name = str(kind), str(name)
                if kind == "person" and entry.has("name", ledger.keyed(key, "name", fold(name))):
                    spelled.setdefault("name", name)
                elif kind == "email" and entry.has("email", ledger.keyed(key, "email", normal_email(name))):
                    spelled.setdefault("email", name)
                elif (
                    kind == "phone"
                    and phone_digits(name)
                    and entry.has("phone", ledger.keyed(key, "phone", phone_digits(name)))
                ):
                    spelled.setdefault("phone", name)
        finally:
            conn.close()
        if not matched:
            return Found(None, None)
        exact = [s for s in matched if entry.has("id", ledger.keyed(key, "id", fold(s)))]
        main = (exact or matched)[0]
        subject = Subject.model_validate({"id": main, **spelled})
        same = {s for s in matched if fold(s) == fold(main)}
        return Found(subject, "store", len(set(matched) - same))

    def reapply(self, target: Target, entry: Entry, marker: str) -> int:
        """The entry's sticky rows back in the store and its epoch up to the entry's, in one transaction;
        returns the store's epoch."""
        conn = connect(self.files(target)[0])
        try:
            with transaction(conn):
                for source, ref, item_key, erased_at in entry.sticky.get("erased_subjects", []):
                    conn.execute(
                        "INSERT OR IGNORE INTO erased_subjects(source, source_ref, item_key, erased_at, "
                        "request_ref) VALUES (?, ?, ?, ?, ?)",
                        (source, ref, item_key, erased_at, entry.request_id),
                    )
                for kind, digest, created_at in entry.sticky.get("erased_identities", []):
                    conn.execute(
                        "INSERT OR IGNORE INTO erased_identities(kind, digest, erasure_ref, created_at) "
                        "VALUES (?, ?, ?, ?)",
                        (kind, digest, entry.request_id, created_at),
                    )
                return epoch.raise_to(conn, entry.epoch, marker)
        finally:
            conn.close()


ERASER = ReferenceEraser()
