"""The request vault API over the engine database (`erasure.engine.open_engine`): a facade over one
module per concern, so `from erasure import request_records; request_records.set_state(conn, ...)`
works everywhere.

- `intake`: submit, the request row (get, list, tenant check) and its state
- `vault`: the envelope (identifiers), salt, store ids, confirmed aliases, free-text checks
- `clocks`: pauses, resumes and the extension
- `steps`: step records and the footprint
- `exceptions`, `receipts`, `events`: what could not be erased, subprocessor receipts, the event log
- `tokens`: the agent surface's used confirmation tokens (single use)

Every function takes an apsw connection to the engine database (`erasure.engine_db.Engine` binds
them to one). Only the `vault` tables hold the subject's identifiers; request rows, clock events,
engine events, step records, exceptions and receipts hold ids, counts and digests. Multi-statement
writes run in one transaction (a savepoint when the caller already holds one), so a failure leaves
nothing behind.
"""

from __future__ import annotations

from erasure.request_records.clocks import MAX_REASON, clock_events, deadline_of, extend, pause, resume
from erasure.request_records.events import log_event
from erasure.request_records.exceptions import ExceptionRow, close_exception, exceptions, open_exception
from erasure.request_records.intake import (
    SALT_BYTES,
    RequestRow,
    SubmitResult,
    check_tenant,
    get,
    list_requests,
    set_state,
    submit,
)
from erasure.request_records.receipts import ReceiptRow, receipts, upsert_receipt
from erasure.request_records.steps import add_footprint, footprint, steps, target_steps, upsert_step
from erasure.request_records.tokens import TokenAlreadyUsed, agent_filed, token_use, use_token
from erasure.request_records.vault import (
    add_store_ids,
    commit_identifier,
    confirm_aliases,
    confirmed_aliases,
    envelope_digest,
    every_store_id,
    load_envelope,
    refuse_if_names_a_subject,
    requests_of_subject,
    store_ids,
    subject_by_id,
    subject_of,
    subject_salt,
    vault_subjects,
)

__all__ = [
    "MAX_REASON",
    "SALT_BYTES",
    "ExceptionRow",
    "ReceiptRow",
    "RequestRow",
    "SubmitResult",
    "TokenAlreadyUsed",
    "add_footprint",
    "add_store_ids",
    "agent_filed",
    "check_tenant",
    "clock_events",
    "close_exception",
    "commit_identifier",
    "confirm_aliases",
    "confirmed_aliases",
    "deadline_of",
    "envelope_digest",
    "every_store_id",
    "exceptions",
    "extend",
    "footprint",
    "get",
    "list_requests",
    "load_envelope",
    "log_event",
    "open_exception",
    "pause",
    "receipts",
    "refuse_if_names_a_subject",
    "requests_of_subject",
    "resume",
    "set_state",
    "steps",
    "store_ids",
    "subject_by_id",
    "subject_of",
    "subject_salt",
    "submit",
    "target_steps",
    "token_use",
    "upsert_receipt",
    "upsert_step",
    "use_token",
    "vault_subjects",
]
