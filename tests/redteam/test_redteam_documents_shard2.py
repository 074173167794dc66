"""Issue 33's generated document red team, shard 2 of 4 (tests/redteam_documents_shards.py): a file of its
own, so that `make test`'s workers run the shards side by side."""

from __future__ import annotations

from tests.redteam_documents_shards import harness_url, shard_test  # noqa: F401  (harness_url: the fixture)

test_issue33_scenarios_never_certify_leave_stuck_or_rewrite_a_bystander = shard_test(2)
