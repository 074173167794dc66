"""The tiers come from what a test reaches (tests/tiers.py): every entry point still imports, and a
function is in the tiers of the entry points it calls, directly, through the test tree's helpers, or
through a name imported inside it. (The functions under test are looked up by name, so that this module
reaches nothing itself and stays in `make quick`.)"""

from __future__ import annotations

import sys
from typing import Any

from tests import tiers


def _driver(request_id: str, home: Any) -> None:
    from tasks.runner import run_cascade

    run_cascade(request_id, home)


def _through_a_helper(home: Any) -> None:
    _driver("req-1", home)


def _nothing(x: int) -> int:
    return x + 1


def _reach(name: str) -> frozenset[str]:
    return tiers.Reach(tiers.entry_points()).of(getattr(sys.modules[__name__], name))


def test_every_entry_point_imports() -> None:
    found = tiers.entry_points()
    assert {t for ts in found.values() for t in ts} >= set(tiers.TIERS) - {"redteam"}


def test_a_name_imported_inside_a_function_puts_it_in_the_tier() -> None:
    assert _reach("_driver") == {"cascade"}


def test_a_helper_of_the_test_tree_passes_its_tier_on() -> None:
    assert _reach("_through_a_helper") == {"cascade"}


def test_a_function_that_reaches_no_entry_point_is_in_no_tier() -> None:
    assert _reach("_nothing") == frozenset()


def test_the_session_prefect_server_is_the_prefect_tier() -> None:
    from tests import conftest

    fixture = "prefect_harness"
    assert tiers.Reach(tiers.entry_points()).of(getattr(conftest, fixture)) == {"prefect"}
