"""Test tiers, read from what a test reaches, so the marks cannot drift from the code.

A test is in a tier when its code, a fixture in its closure (`item.fixturenames`), or any function of
the test tree these call (transitively) names one of the tier's entry points below: a Prefect server,
a framework store, a full cascade, a PostgreSQL cluster, a real browser. `tests/conftest.py` marks each
collected test with its tiers; `make quick` runs the tests in no tier.

To put a new slow helper in a tier, add it to `ENTRY_POINTS`; a test that is slow in a way no entry
point shows (a subprocess that starts a server, say) takes a fixture that reaches one, or an explicit
mark. Every run lists the unmarked tests that took longer than `SLOW_SECONDS`.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterable
from types import CodeType, ModuleType
from typing import Any

#: The tiers, in the order `make help` and the README name them.
TIERS = ("prefect", "framework", "cascade", "postgres", "browser", "redteam")

#: Per tier, the "module:attribute" entry points that put a test reaching one of them in the tier.
ENTRY_POINTS: dict[str, tuple[str, ...]] = {
    # a Prefect test server (the session's, `prefect_harness`, or one of a test's own)
    "prefect": (
        "prefect.testing.utilities:prefect_test_harness",
        "cli.prefect_api:prepare",  # migrates a new home's Prefect database (about 10 s)
        "cli.prefect_api:migrate_database",
        "tests.flows.test_deployments:start_console",  # `erasure serve`: server, deployments, worker
    ),
    # the framework stores: LangGraph (SQLite and PostgreSQL), Chroma (folder and server), mem0, Graphiti
    "framework": (
        "tests.chroma_fixtures:client",  # every chromadb client the tests open goes through one of these
        "tests.chroma_fixtures:opened",
        "tests.chroma_fixtures:reopen",
        "tests.chroma_fixtures:build_memory",
        "tests.chroma_server_fixtures:chroma_server",
        "tests.chroma_server_fixtures:build_over_http",
        "tests.mem0_fixtures:open_memory",
        "tests.mem0_fixtures:build_memory",
        "tests.mem0_fixtures:built_copy",
        "tests.langgraph_sqlite_fixtures:build_memory",
        "tests.langgraph_postgres_fixtures:build_memory",
        "tests.graphiti_fixtures:with_driver",  # every graph the tests build or read goes through it
        "tests.graphiti_fixtures:open_driver",
    ),
    # a full cascade: the driver without Prefect, the service's windows, the flows
    "cascade": (
        "tasks.runner:run_cascade",
        "service.cascade:run_requests",
        "service.cascade:erase_window",
        "flows.erasure_request:erasure_request",
        "flows.window:erasure_window",
    ),
    # a PostgreSQL cluster of its own
    "postgres": ("tests.pg_cluster:cluster",),
    # chromium driven by playwright
    "browser": ("playwright.sync_api:sync_playwright", "playwright.sync_api:expect"),
    # the generated red teams are marked by hand (`redteam_generated`, and `tests/redteam/test_redteam.py`)
    "redteam": (),
}

#: Unmarked tests slower than this (setup + call + teardown, in seconds) are listed after a run.
SLOW_SECONDS = 5.0

#: Third-party entry points may be absent (playwright without a browser install); the project's may not.
OPTIONAL_PACKAGES = ("playwright",)


def entry_points() -> dict[int, set[str]]:
    """id(object) -> its tiers, for every entry point that imports. A project entry point that no longer
    imports is an error: a renamed helper must not silently empty its tier."""
    found: dict[int, set[str]] = {}
    for tier, names in ENTRY_POINTS.items():
        for name in names:
            module_name, attribute = name.split(":")
            try:
                obj = getattr(importlib.import_module(module_name), attribute)
            except ImportError:
                if module_name.split(".")[0] in OPTIONAL_PACKAGES:
                    continue
                raise
            except AttributeError as e:
                raise AttributeError(f"tests/tiers.py: the entry point {name} is gone; update ENTRY_POINTS") from e
            found.setdefault(id(obj), set()).add(tier)
            found.setdefault(id(_unwrap(obj)), set()).add(tier)  # a fixture's own function, say
    return found


def _unwrap(obj: Any) -> Any:
    """The plain function behind a fixture, a flow or task (`.fn`), a hypothesis test, or a
    `functools.wraps` wrapper."""
    inner_test = getattr(getattr(obj, "hypothesis", None), "inner_test", None)
    if inner_test is not None:
        return inner_test
    for attribute in ("_get_wrapped_function", "fn", "__wrapped__"):
        inner = getattr(obj, attribute, None)
        if inner is None:
            continue
        if attribute == "_get_wrapped_function" and callable(inner):
            try:
                return inner()
            except Exception:  # pragma: no cover - a pytest internal changed shape
                return obj
        return inner
    return obj


def _codes(code: CodeType) -> Iterable[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _codes(const)


class Reach:
    """Which tiers a function reaches: the entry points named in its code (as globals, attributes of an
    imported module, or names imported in the function), and, transitively, the test tree's functions it
    names."""

    def __init__(self, entries: dict[int, set[str]]) -> None:
        self.entries = entries
        self.modules = {name.split(":")[0] for names in ENTRY_POINTS.values() for name in names}
        self.memo: dict[int, frozenset[str]] = {}

    def of(self, obj: Any) -> frozenset[str]:
        direct = self.entries.get(id(obj))
        if direct:
            return frozenset(direct)
        fn = _unwrap(obj)
        if fn is not obj and id(fn) in self.entries:
            return frozenset(self.entries[id(fn)])
        if not inspect.isfunction(fn) or not str(getattr(fn, "__module__", "")).startswith("tests"):
            return frozenset()
        key = id(fn)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = frozenset()  # a recursion back here adds nothing
        names: set[str] = set()
        for code in _codes(fn.__code__):
            names.update(code.co_names)
        scope: dict[str, Any] = fn.__globals__
        candidates: list[Any] = []
        modules: list[ModuleType] = []
        for name in names:
            if name in scope:
                value = scope[name]
                if isinstance(value, ModuleType):
                    modules.append(value)
                else:
                    candidates.append(value)
            elif name in sys.modules:  # `from X import y` inside the function
                modules.append(sys.modules[name])
        # `from package import module` names the module as an attribute of its package
        modules += [
            sys.modules[f"{m.__name__}.{n}"] for m in list(modules) for n in names if f"{m.__name__}.{n}" in sys.modules
        ]
        for module in modules:
            if module.__name__ in self.modules or module.__name__.startswith("tests."):
                candidates.extend(vars(module)[name] for name in names if name in vars(module))
        tiers: set[str] = set()
        for value in candidates:
            if value is not fn and (callable(value) or id(value) in self.entries):
                tiers |= self.of(value)
        self.memo[key] = frozenset(tiers)
        return self.memo[key]

    def of_all(self, objects: Iterable[Any]) -> set[str]:
        out: set[str] = set()
        for obj in objects:
            out |= self.of(obj)
        return out


def fixture_functions(item: Any) -> list[Callable[..., Any]]:
    """The functions of every fixture in a test's closure (every definition of a name: an override may
    request the fixture it overrides)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    out: list[Callable[..., Any]] = []
    for name in item.fixturenames:
        out.extend(d.func for d in info.name2fixturedefs.get(name, ()))
    return out
