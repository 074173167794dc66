"""`Engine`: the engine database's owner (sqlite-utils' `Database` is the model). One connection, the
`erasure.request_records` operations bound to it and grouped by concern, and the envelopes it has validated
(once each):

    with Engine.open(home.engine_db) as engine:
        engine.requests.set_state("req-1", RequestState.running)
        subject = engine.vault.load_envelope("req-1").subject

`Engine.session(path)` is `erasure.engine.engine_session` with an `Engine` around the shared
connection: every `open_engine(path)` inside it gets that one connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import apsw

from erasure import request_records as ops
from erasure.engine import EngineConnection, engine_id, engine_session, open_engine

P = ParamSpec("P")
R = TypeVar("R")


class _Concern:
    """A group of operations over one engine connection."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn


class _Bound(Generic[P, R]):
    """An `erasure.request_records` function with its connection argument bound to the concern's."""

    def __init__(self, fn: Callable[Concatenate[apsw.Connection, P], R]) -> None:
        self.fn = fn
        self.__doc__ = fn.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _Bound[P, R]: ...
    @overload
    def __get__(self, obj: _Concern, owner: type[Any]) -> Callable[P, R]: ...
    def __get__(self, obj: _Concern | None, owner: type[Any]) -> _Bound[P, R] | Callable[P, R]:
        if obj is None:
            return self
        fn, conn = self.fn, obj.conn

        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return fn(conn, *args, **kwargs)

        return call


class Requests(_Concern):
    """Intake and the request row."""

    submit = _Bound(ops.submit)
    get = _Bound(ops.get)
    check_tenant = _Bound(ops.check_tenant)
    list_requests = _Bound(ops.list_requests)
    set_state = _Bound(ops.set_state)


class Vault(_Concern):
    """The envelope (identifiers), salt, store ids and aliases."""

    load_envelope = _Bound(ops.load_envelope)
    vault_subjects = _Bound(ops.vault_subjects)
    subject_by_id = _Bound(ops.subject_by_id)
    subject_of = _Bound(ops.subject_of)
    requests_of_subject = _Bound(ops.requests_of_subject)
    refuse_if_names_a_subject = _Bound(ops.refuse_if_names_a_subject)
    subject_salt = _Bound(ops.subject_salt)
    store_ids = _Bound(ops.store_ids)
    add_store_ids = _Bound(ops.add_store_ids)
    confirm_aliases = _Bound(ops.confirm_aliases)
    confirmed_aliases = _Bound(ops.confirmed_aliases)


class Clocks(_Concern):
    """Pauses, resumes, the extension and the deadline."""

    clock_events = _Bound(ops.clock_events)
    deadline_of = _Bound(ops.deadline_of)
    pause = _Bound(ops.pause)
    resume = _Bound(ops.resume)
    extend = _Bound(ops.extend)


class Steps(_Concern):
    """Step records and the footprint."""

    upsert_step = _Bound(ops.upsert_step)
    steps = _Bound(ops.steps)
    target_steps = _Bound(ops.target_steps)
    add_footprint = _Bound(ops.add_footprint)
    footprint = _Bound(ops.footprint)


class Evidence(_Concern):
    """Exceptions, subprocessor receipts and the event log."""

    open_exception = _Bound(ops.open_exception)
    close_exception = _Bound(ops.close_exception)
    exceptions = _Bound(ops.exceptions)
    upsert_receipt = _Bound(ops.upsert_receipt)
    receipts = _Bound(ops.receipts)
    log_event = _Bound(ops.log_event)


class Engine:
    """The engine database's owner: one connection, the operations by concern (`requests`, `vault`,
    `clocks`, `steps`, `evidence`), each request's envelope validated once."""

    def __init__(self, conn: EngineConnection) -> None:
        self.conn = conn
        self.requests = Requests(conn)
        self.vault = Vault(conn)
        self.clocks = Clocks(conn)
        self.steps = Steps(conn)
        self.evidence = Evidence(conn)

    @classmethod
    def open(cls, path: Path) -> Engine:
        """The engine database at `path` (`open_engine`: inside a session, the session's connection)."""
        return cls(open_engine(path))

    @classmethod
    @contextmanager
    def session(cls, path: Path) -> Iterator[Engine]:
        """`engine_session(path)`: one connection for everything run inside, as an `Engine`."""
        with engine_session(path) as conn:
            yield cls(conn)

    @property
    def id(self) -> str:
        """The database's random identity, fixed at creation (`erasure.engine.engine_id`)."""
        return engine_id(self.conn)

    def close(self) -> None:
        """Close the connection (inside a session: give it back)."""
        self.conn.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
