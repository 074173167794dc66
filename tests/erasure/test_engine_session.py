"""One run, one engine connection (issue 24): `erasure request run` through the CLI opens `engine.db`
once, and validates each request's vaulted envelope once. Counted at the one place a connection to
the engine database is made (`erasure.engine.connect`), not at the call sites. Then the session's
rules: nested, borrowed by threads that copy the context, one thread at a time (a thread kept waiting
raises `EngineBusy`, it never opens a connection of its own), closed at its end; and `Engine`, the
operations bound to one connection."""

from __future__ import annotations

import contextvars
import io
import json
import threading
import time
import tokenize
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import EngineBusy, ErasureError
from erasure.models import ErasureRequestEnvelope
from erasure.states import RequestState
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store, owned_counts, submit
from tests.cli_fixtures import erasure


@pytest.fixture
def ready(home: Home, tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> Home:
    """A store with the subject, one submitted request, an engine key; flows on the session's server."""
    from prefect.settings import PREFECT_API_URL

    from proof.keys import generate_keypair

    build_store(home, tmp_path)
    submit(home)
    generate_keypair("engine", home.keys_dir)
    monkeypatch.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))
    monkeypatch.setenv("PREFECT_HOME", str(home.root / "prefect"))
    return home


def _counting(counts: Counter[str], key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        counts[key] += 1
        return fn(*args, **kwargs)

    return wrapper


def count_opens(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count real connections to engine.db and memory.db, and envelope validations."""
    import erasure.engine
    import erasure.sqlite
    import memory.schema

    counts: Counter[str] = Counter()
    # Each module's own name `connect` (imported from erasure.sqlite) is the one it opens with.
    monkeypatch.setattr(erasure.engine, "connect", _counting(counts, "engine.db", erasure.sqlite.connect))
    monkeypatch.setattr(memory.schema, "connect", _counting(counts, "memory.db", erasure.sqlite.connect))
    validate = ErasureRequestEnvelope.model_validate_json
    monkeypatch.setattr(ErasureRequestEnvelope, "model_validate_json", _counting(counts, "envelope", validate))
    return counts


def test_a_request_run_opens_the_engine_database_once(ready: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_opens(monkeypatch)
    res = erasure("request", "run", "req-ann-1", "--home", str(ready.root), "--json")
    assert res.code == 0, res.out + res.err
    assert json.loads(res.out)["probes_all_clear"] is True  # the pack declares the model: not all clear
    assert all(v == 0 for v in owned_counts(ready, SUBJECT).values())
    assert counts["engine.db"] == 1, dict(counts)
    assert counts["envelope"] == 1, dict(counts)


def test_a_window_of_two_opens_the_engine_database_once(ready: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    submit(ready, "req-other-1", BYSTANDER)
    counts = count_opens(monkeypatch)
    res = erasure("request", "run", "req-ann-1", "req-other-1", "--home", str(ready.root), "--json")
    assert res.code == 0, res.out + res.err
    assert {r["outcome"] for r in json.loads(res.out)["requests"].values()} == {"all_clear"}
    assert counts["engine.db"] == 1, dict(counts)
    assert counts["envelope"] == 2, dict(counts)


# --- the session's rules --------------------------------------------------------------------------


def test_a_task_borrows_the_runs_engine_and_a_task_outside_a_run_opens_its_own(home: Home) -> None:
    submit(home)
    with Engine.session(home.engine_db) as engine:
        with (
            Engine.borrow(home.engine_db) as a,
            Engine.session(home.engine_db) as inner,  # a session inside one of the same path: the same
            Engine.borrow(home.engine_db) as b,
        ):
            assert a is b is engine.conn and inner is engine
        assert request_records.get(engine.conn, "req-ann-1").state is RequestState.submitted  # still open
    with pytest.raises(apsw.ConnectionClosedError):
        engine.conn.execute("SELECT 1")
    with Engine.borrow(home.engine_db) as outside:  # no run: the caller is its own entry point
        assert outside is not engine.conn
        request_records.get(outside, "req-ann-1")
    with pytest.raises(apsw.ConnectionClosedError):
        outside.execute("SELECT 1")


def test_the_envelope_is_validated_once_per_connection(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    submit(home)
    counts = count_opens(monkeypatch)
    with Engine.open(home.engine_db) as engine:
        first = engine.vault.load_envelope("req-ann-1")
        assert engine.vault.load_envelope("req-ann-1") is first
        assert request_records.load_envelope(engine.conn, "req-ann-1") is first
    with Engine.open(home.engine_db) as engine:
        assert engine.vault.load_envelope("req-ann-1") == first
    assert counts["envelope"] == 2 and counts["engine.db"] == 2


def test_engine_binds_the_operations_by_concern(home: Home) -> None:
    submit(home)
    with Engine.session(home.engine_db) as engine:
        engine.requests.set_state("req-ann-1", RequestState.running, "a test")
        assert engine.requests.get("req-ann-1").state is RequestState.running
        assert engine.vault.subject_of("req-ann-1") == SUBJECT
        assert engine.evidence.exceptions("req-ann-1") == []
        assert engine.steps.steps("req-ann-1") == []
        assert len(engine.id) == 32
        with Engine.open(home.engine_db) as own:  # `open` is always a connection of its own, said so
            assert own.conn is not engine.conn
            assert own.requests.get("req-ann-1").state is RequestState.running


def test_threads_that_copy_the_context_share_the_connection_one_at_a_time(home: Home) -> None:
    submit(home)
    order: list[str] = []
    with Engine.session(home.engine_db) as engine:
        mine = engine.lent()
        mine.__enter__()  # this thread holds it
        order.append("main took it")

        def other() -> None:
            with Engine.borrow(home.engine_db) as theirs:  # waits until the main thread gives it back
                order.append("thread took it")
                assert theirs is engine.conn
                request_records.set_state(theirs, "req-ann-1", RequestState.running)

        t = threading.Thread(target=contextvars.copy_context().run, args=(other,))
        t.start()
        time.sleep(0.1)
        order.append("main gives it back")
        mine.__exit__(None, None, None)
        t.join(timeout=10)
        assert order == ["main took it", "main gives it back", "thread took it"]
        assert request_records.get(engine.conn, "req-ann-1").state is RequestState.running


def test_a_thread_kept_waiting_raises_engine_busy_and_opens_no_connection_of_its_own(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old silent fallback (issue 36): a thread that waited more than 0.5 s for the run's connection
    opened one of its own. Now it raises `EngineBusy`, and no second connection is ever made."""
    import erasure.engine_db

    monkeypatch.setattr(erasure.engine_db, "LEND_WAIT_SECONDS", 0.05)
    submit(home)
    counts = count_opens(monkeypatch)
    got: dict[str, object] = {}

    def borrow() -> None:
        try:
            with Engine.borrow(home.engine_db) as conn:
                got["conn"] = conn
        except BaseException as exc:
            got["error"] = exc

    with Engine.session(home.engine_db) as engine, engine.lent():  # this thread holds the run's engine
        waiting = threading.Thread(target=contextvars.copy_context().run, args=(borrow,))
        waiting.start()
        waiting.join(timeout=10)
    assert isinstance(got.get("error"), EngineBusy), got
    assert isinstance(got["error"], ErasureError)  # one error hierarchy: the CLI prints it and exits 1
    assert "conn" not in got
    assert counts["engine.db"] == 1, dict(counts)  # the session's connection, and no other


# --- who opens it: the entry points, never the service layer ---------------------------------------

ROOT = Path(__file__).resolve().parents[2]

SERVICE_OPENS = {
    "service/metrics.py": "two entry points of its own: `python -m service.metrics`, and the live endpoint,"
    " whose every scrape arrives on a server thread and reads on a connection of its own (`Engine.open`)",
    "service/agent_requests.py": "the MCP preview's scratch engine: a throwaway database in a private folder, never"
    " the home's, where the cascade's own counting writes its footprint (the vault holds nothing before the confirm)",
}
"""The modules of service/ that may open the engine themselves, each with its reason."""


def engine_opens(source: str) -> list[str]:
    """Each place `source` opens or borrows an engine in code (comments and strings left out):
    `Engine.borrow(`, `Engine.open(`, `Engine.session(`, `Engine(` and `open_engine(`."""
    toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type in (tokenize.NAME, tokenize.OP)]
    found = []
    for i, t in enumerate(toks[:-1]):
        after = toks[i + 1].string
        if t.string == "open_engine" and after == "(":
            found.append(f"line {t.start[0]}: open_engine(")
        elif t.string == "Engine" and after == "(":
            found.append(f"line {t.start[0]}: Engine(")
        elif (
            t.string == "Engine"
            and after == "."
            and i + 3 < len(toks)
            and toks[i + 2].string in ("borrow", "open", "session")
            and toks[i + 3].string == "("
        ):
            found.append(f"line {t.start[0]}: Engine.{toks[i + 2].string}(")
    return found


def opens_under(root: Path, package: str) -> dict[str, list[str]]:
    """Per module of `package` under `root`, where it opens or borrows an engine."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        if got := engine_opens(path.read_text()):
            out[str(path.relative_to(root))] = got
    return out


def test_the_scan_sees_every_way_of_opening_an_engine_and_no_mention() -> None:
    code = (
        "with Engine.borrow(h.engine_db) as c:\n    pass\n"
        "e = Engine . open (p)\n"
        "with Engine.session(\n    p\n) as e:\n    pass\n"
        "conn = open_engine(p)\ne2 = Engine(conn)\n"
        "# Engine.borrow(h.engine_db) in a comment\n"
        "'''Engine.session(p) in a docstring'''\n"
        "def f(engine: Engine) -> None:\n    with engine.lent() as conn:\n        pass\n"
    )
    assert [f.split(": ")[1] for f in engine_opens(code)] == [
        "Engine.borrow(",
        "Engine.open(",
        "Engine.session(",
        "open_engine(",
        "Engine(",
    ]


def test_no_service_function_opens_or_borrows_the_engine_it_is_given_by_its_caller() -> None:
    """Issue 36, one explicit engine: the command or flow opens it (`Engine.session`) and passes it
    down; a service function takes `engine: Engine`. Only the modules in `SERVICE_OPENS`, each an
    entry point of its own, open one (and each of them still does: the list does not rot)."""
    found = opens_under(ROOT, "service")
    assert {m: w for m, w in found.items() if m not in SERVICE_OPENS} == {}
    assert sorted(found) == sorted(SERVICE_OPENS)


def test_commands_and_flows_open_the_engine_and_never_borrow_it() -> None:
    """The entry points open it and pass it down; `Engine.borrow` is for the tasks Prefect runs in
    threads with id-only parameters (tasks/), which cannot be handed an engine."""
    borrowed = {
        m: [w for w in where if "borrow" in w]
        for package in ("cli", "flows")
        for m, where in opens_under(ROOT, package).items()
    }
    assert {m: w for m, w in borrowed.items() if w} == {}
