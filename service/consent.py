"""Re-consent: an erased request's subject may be ingested again (the `suppression-allow` deployment)."""

from __future__ import annotations

from typing import TypedDict

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import NotFound
from memory import keyed, suppression
from memory.schema import open_store
from service.common import checked_request_id


class Reconsented(TypedDict):
    """How many suppression keys and erased-identity hashes a request's re-consent removed."""

    request_id: str
    allowed: int
    identities: int


def allow_reingest(h: Home, request_id: str, reason: str, actor: str, source: str | None = None) -> Reconsented:
    """Remove the suppression keys that `request_id`'s erasure recorded (optionally only those of one
    `source`), so the subject's items may be ingested again; without a `source`, also the
    erased-identity hashes it recorded. `NotFound` if there are no keys."""
    checked_request_id(request_id)
    engine = open_engine(h.engine_db)
    try:
        subject = request_records.load_envelope(engine, request_id).subject
        request_records.refuse_if_names_a_subject(engine, {"reason": reason, "actor": actor}, subject)
        store = open_store(h.store_dir)
        try:
            keys = [
                k
                for k in suppression.list_suppressed(store)
                if k.request_ref == request_id and (source is None or k.source == keyed.hashed(store, source))
            ]
            if not keys:
                raise NotFound(
                    f"no suppressed keys recorded for request {request_id}"
                    + (f" and source {source!r}" if source else "")
                )
            allowed = sum(
                suppression.allow(store, s, r, reason, actor, request_ref=request_id)
                for s, r in dict.fromkeys((k.source, k.source_ref) for k in keys)
            )
            # the whole re-consent (no source named) also releases the identity the erasure recorded
            identities = 0 if source else suppression.allow_identities_of(store, request_id, reason, actor)
        finally:
            store.close()
        request_records.log_event(
            engine, request_id, "suppression.allowed", {"keys": allowed, "source": source, "identities": identities}
        )
    finally:
        engine.close()
    return {"request_id": request_id, "allowed": allowed, "identities": identities}
