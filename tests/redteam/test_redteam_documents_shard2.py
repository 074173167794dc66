"""Issue 33's generated document red team, shard 2 of 4 (tests/redteam_documents_shards.py): a file of its
own, so that `make test`'s workers run the shards side by side."""

from __future__ import annotations

import pytest

from tests.redteam_documents_shards import (
    WINDOWS,
    harness_url,  # noqa: F401  (the fixture)
    run_shard,
)


@pytest.mark.slow
@pytest.mark.redteam_generated
@pytest.mark.timeout(len(WINDOWS) * 900)
def test_issue33_scenarios_never_certify_leave_stuck_or_rewrite_a_bystander(harness_url: str) -> None:  # noqa: F811
    """Shard 2's windows: no false all clear, no request stuck, no bystander's words changed."""
    run_shard(2)
