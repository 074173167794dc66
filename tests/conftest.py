"""Shared fixtures. Feature-specific fixtures live in their own test files."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from tests import budget
from tests.tiers import TIERS

if TYPE_CHECKING:
    from erasure.config import Home
    from erasure.engine_db import Engine

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

# CI's full budget draws the same examples on every run (a failure in CI is the same failure on a laptop
# with `ERASURE_TEST_FULL=1`, and a green local full run is the run CI will see); the tenth budget of the
# inner loop, and `HYPOTHESIS_EXPLORE=1` at any size, draw new ones each time. A test's own settings win.
# No deadline: a test's speed is measured in bench/, never asserted (hypothesis's 200 ms deadline failed a
# matching test at load 14 in a full run: 254 ms, then 120 ms).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("explore", derandomize=False, print_blob=True, deadline=None)
settings.load_profile("ci" if budget.full() and not os.environ.get("HYPOTHESIS_EXPLORE") else "explore")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A fresh ERASURE_HOME (and evidence root) in a temp dir, exported to the environment."""
    from erasure.config import Home

    h = Home.resolve(tmp_path / "home", tmp_path / "evidence").ensure()
    monkeypatch.setenv("ERASURE_HOME", str(h.root))
    monkeypatch.setenv("ERASURE_EVIDENCE", str(h.evidence_root))
    return h


@pytest.fixture
def engine_of() -> Iterator[Callable[[Home], Engine]]:
    """The test as an entry point: `engine_of(h)` is the engine of home `h`, opened once for the test
    (`Engine.open`) and passed to the service functions it calls; closed at its end."""
    from erasure.engine_db import Engine

    opened: dict[Path, Engine] = {}
    with ExitStack() as closing:

        def of(h: Home) -> Engine:
            if h.engine_db not in opened:
                opened[h.engine_db] = closing.enter_context(Engine.open(h.engine_db))
            return opened[h.engine_db]

        yield of


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One Prefect test server for the whole session (about 13 s to start). Request it in flow tests.
    Like every server the project starts, it requires a credential (issue 23): its clients send it."""
    import secrets

    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_SERVER_API_AUTH_STRING, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    secret = secrets.token_urlsafe(32)
    with (
        temporary_settings({PREFECT_SERVER_API_AUTH_STRING: secret, PREFECT_API_AUTH_STRING: secret}),
        prefect_test_harness(server_startup_timeout=120),
    ):
        yield


# --- test tiers (tests/tiers.py): each test is marked with the tiers its code and fixtures reach --------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with every tier its closure of fixtures, its own code, its parameters, or the test
    tree's helpers these call reach (the entry points of tests/tiers.py). Marks set by hand stay."""
    from tests import tiers

    reach = tiers.Reach(tiers.entry_points())
    for item in items:
        found = reach.of_all(tiers.fixture_functions(item))
        test_function = getattr(item, "obj", None)
        if test_function is not None:
            found |= reach.of(test_function)
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            found |= reach.of_all(v for v in callspec.params.values() if callable(v))
        if item.get_closest_marker("redteam_generated"):
            found.add("redteam")
        for tier in sorted(found - {m.name for m in item.iter_markers()}):
            item.add_marker(tier)
    _longest_files_first(items)


#: A file the duration table does not know yet (a new one): seconds it is taken to last, by its slowest tier.
_TIER_SECONDS = {
    "redteam": 200.0,
    "postgres": 120.0,
    "browser": 90.0,
    "framework": 40.0,
    "prefect": 20.0,
    "cascade": 20.0,
}


def _longest_files_first(items: list[pytest.Item]) -> None:
    """The longest files first (measured seconds from tests/durations.json, or an estimate from their
    tiers), each file's tests in their own order. Under pytest-xdist's `--dist loadfile` a file is one
    unit of work, handed out in this order: a long file started last runs alone on one worker while the
    others sit idle (longest processing time first)."""
    from tests import durations

    measured = durations.load()
    root = items[0].config.rootpath if items else Path()
    guess: dict[Path, float] = {}
    for item in items:  # a file's estimate is its slowest test's slowest tier
        tiers = (_TIER_SECONDS.get(m.name, 1.0) for m in item.iter_markers())
        guess[item.path] = max([guess.get(item.path, 1.0), *tiers])
    seconds = {
        path: measured.get(path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path), est)
        for path, est in guess.items()
    }
    items.sort(key=lambda item: -seconds[item.path])


_UNTIERED_SECONDS: dict[str, float] = {}
_TIER_MARKS = frozenset({*TIERS, "slow"})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Time the tests that are in no tier (setup, call and teardown), for the summary below."""
    import time

    untiered = not any(m.name in _TIER_MARKS for m in item.iter_markers())
    start = time.monotonic()
    try:
        return (yield)
    finally:
        if untiered:
            _UNTIERED_SECONDS[item.nodeid] = time.monotonic() - start


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Unmarked tests slower than tiers.SLOW_SECONDS: each wants a fixture that reaches a tier's entry
    point, an entry point of its own in tests/tiers.py, or an explicit mark (`slow` at least)."""
    from tests.tiers import SLOW_SECONDS

    slow = sorted(((s, n) for n, s in _UNTIERED_SECONDS.items() if s > SLOW_SECONDS), reverse=True)
    if slow:
        terminalreporter.section(f"untiered tests slower than {SLOW_SECONDS:.0f} s (give them a tier)")
        for seconds, nodeid in slow:
            terminalreporter.write_line(f"{seconds:6.1f}s {nodeid}")
