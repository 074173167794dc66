"""Issue 33's generated document red team, shard 0 of 4, and the plan all shards share
(tests/redteam_documents_shards.py says what the scenarios are and why there are shards)."""

from __future__ import annotations

from tests.redteam_documents_shards import (
    ATTACKS,
    GROUPS,
    SCENARIOS,
    SHARD_OF,
    SHARDS,
    WINDOWS,
    harness_url,  # noqa: F401  (the fixture)
    shard_test,
)


def test_the_shards_together_run_every_window_and_every_attack_once() -> None:
    """The plan: at least SCENARIOS scenarios, every attack of issue 33 in some window, and every window in
    exactly one shard, the shards within one largest window of each other."""
    assert sum(n for _, n in WINDOWS) >= SCENARIOS
    assert {a.removesuffix("+file") for g, _ in WINDOWS for a in GROUPS[g]} == set(ATTACKS)
    assert sorted(set(SHARD_OF)) == list(range(SHARDS))
    sizes = [sum(n for (_, n), k in zip(WINDOWS, SHARD_OF, strict=True) if k == s) for s in range(SHARDS)]
    assert max(sizes) - min(sizes) <= max(n for _, n in WINDOWS)


test_issue33_scenarios_never_certify_leave_stuck_or_rewrite_a_bystander = shard_test(0)
