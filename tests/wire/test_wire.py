"""The pack's wire format is defined once, in wire/format.py: the writer, the store's audit log
and the request vault import it; no product module keeps a copy (tests may keep independent oracles)."""

from __future__ import annotations

import re
from pathlib import Path

import wire.format
from erasure.request_ids import SAFE_TOKEN
from erasure.tiers import CASCADE_ORDER

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("wire", "erasure", "memory", "tasks", "probes", "proof", "service", "flows", "cli")
COPIES = re.compile(
    r"def (canonical_json|pae|leaf_hash|node_hash|merkle_leaf|merkle_node|entry_hash|keyid_of)\b"
    r"|erasure-cascade\.dev/|in-toto\.io/Statement|= \"(audit-checkpoint/v2|audit-log-redaction/)"
)


def test_no_product_module_keeps_a_copy_of_the_wire_format() -> None:
    copies = [
        f"{path.relative_to(ROOT)}:{n}"
        for pkg in PRODUCT
        for path in sorted((ROOT / pkg).rglob("*.py"))
        if path != ROOT / "wire" / "format.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if COPIES.search(line)
    ]
    assert copies == []


def test_the_wire_names_what_the_domain_names() -> None:
    """The verifier may not import `erasure`: its copies of the tier order and the request-id rule are
    kept equal here."""
    assert tuple(t.value for t in CASCADE_ORDER) == wire.format.TIERS
    assert wire.format.REQUEST_ID.pattern == SAFE_TOKEN.pattern
