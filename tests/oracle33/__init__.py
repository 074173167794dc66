"""The issue-33 red team's oracle: documents parsed with libraries other than the product's, and a
matching rule of its own (see `match`, `readers`, `scan`). Imports nothing of the product."""

from tests.oracle33.match import Matcher, Person33, fold, tokens
from tests.oracle33.scan import DocScanner, scan_bytes33, scan_home33, scan_text33, scan_tree33

__all__ = [
    "DocScanner",
    "Matcher",
    "Person33",
    "fold",
    "scan_bytes33",
    "scan_home33",
    "scan_text33",
    "scan_tree33",
    "tokens",
]
