"""`Engine`: the engine database's owner (sqlite-utils' `Database` is the model). One connection, the
`erasure.request_records` operations bound to it and grouped by concern, and the envelopes it has validated
(once each):

    with Engine.open(home.engine_db) as engine:
        engine.requests.set_state("req-1", RequestState.running)
        subject = engine.vault.load_envelope("req-1").subject

Who opens it, and how it goes down (issue 36: one explicit engine):

- An entry point opens it once: a CLI command, a flow, the request desk, a bench script, a test.
  `Engine.open(path)` is a connection of its own (always a new one); `Engine.session(path)` is the
  run's engine, which the entry point passes down: service functions take `engine: Engine`.
- Prefect runs tasks in threads, and a task's parameters never carry anything but ids and counts, so
  an engine does not travel through them. A task borrows the run's engine from one registry instead,
  keyed by the database's path (`Engine.borrow(home.engine_db)`; a flow's Prefect task that calls a
  service function enters `Engine.session`, which inside the run's session is the run's engine): the
  registry is a context variable that `Engine.session` fills, so it reaches the threads that run with
  a copy of the session's context (Prefect's task runner, `cli.live`) and no other thread. A task
  called outside any session (a script, a test) is its own entry point: it opens a connection for its
  block and closes it.
- The connection is used by one thread at a time: `engine.lent()` (and `Engine.borrow`) holds it for
  one block. A thread that cannot get it within `LEND_WAIT_SECONDS` raises `EngineBusy`; nothing ever
  opens a second connection behind the run's back. Within a run the flow runs its tasks one after
  another, so the wait is never long; a reader beside the run (the CLI's live progress table) opens
  its own engine on purpose (`Engine.open`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import apsw

from erasure import request_records as ops
from erasure.engine import EngineConnection, engine_id, open_engine
from erasure.errors import EngineBusy

LEND_WAIT_SECONDS = 30.0
"""How long a thread waits for the run's engine while another thread of the run holds it, before it
raises `EngineBusy` (a run's tasks run one after another: a long wait is a bug, never a reason to open
a second connection)."""

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
    `clocks`, `steps`, `evidence`), each request's envelope validated once. Opened by an entry point
    and passed down; used by one thread at a time (`lent`)."""

    def __init__(self, conn: EngineConnection) -> None:
        self.conn = conn
        self.requests = Requests(conn)
        self.vault = Vault(conn)
        self.clocks = Clocks(conn)
        self.steps = Steps(conn)
        self.evidence = Evidence(conn)
        self._lock = threading.RLock()

    @classmethod
    def open(cls, path: Path) -> Engine:
        """The engine database at `path`, on a connection of its own (a new one, every call)."""
        return cls(open_engine(path))

    @classmethod
    @contextmanager
    def session(cls, path: Path) -> Iterator[Engine]:
        """The run's engine: opened here, registered for this context (and the threads that run with a
        copy of it) so the run's tasks borrow it, closed at the end. A session inside a session of the
        same path is the outer one."""
        key = _key(path)
        runs = _RUNS.get()
        if key in runs:
            yield runs[key]
            return
        engine = cls.open(path)
        token = _RUNS.set({**runs, key: engine})
        try:
            yield engine
        finally:
            _RUNS.reset(token)
            with engine.lent():  # no thread of the run is inside a block when it closes
                engine.close()

    @classmethod
    @contextmanager
    def borrow(cls, path: Path) -> Iterator[EngineConnection]:
        """For a task: the run's engine connection (`session`'s, found by `path`) for this block, one
        thread at a time. Outside any session the caller is its own entry point: a connection of its
        own for the block."""
        engine = _RUNS.get().get(_key(path))
        if engine is None:
            with cls.open(path) as own:
                yield own.conn
            return
        with engine.lent() as conn:
            yield conn

    @contextmanager
    def lent(self) -> Iterator[EngineConnection]:
        """The connection, held by this thread for the block (again, if it holds it already). Raises
        `EngineBusy` when another thread keeps it past `LEND_WAIT_SECONDS`."""
        if not self._lock.acquire(timeout=LEND_WAIT_SECONDS):
            raise EngineBusy(
                f"the engine database is held by another thread of this run for more than {LEND_WAIT_SECONDS:g} s"
            )
        try:
            yield self.conn
        finally:
            self._lock.release()

    @property
    def id(self) -> str:
        """The database's random identity, fixed at creation (`erasure.engine.engine_id`)."""
        return engine_id(self.conn)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


_RUNS: ContextVar[Mapping[str, Engine]] = ContextVar("erasure_run_engines", default=MappingProxyType({}))
"""The registry of run engines, by resolved database path (`Engine.session` fills it)."""


def _key(path: Path) -> str:
    return str(Path(path).resolve())
