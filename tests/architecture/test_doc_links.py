"""Every relative link in README.md and docs/*.md leads somewhere (issue 35): the file exists in the
checkout and, for a `#fragment`, the page has a heading with that GitHub anchor. A link out of the
repository (such as ../shared/DESIGN.md, which no clone has) is dead."""

from __future__ import annotations

import re
from pathlib import Path

from erasure.config import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as '-'."""
    heads = re.findall(r"(?m)^#+ (.*)$", page.read_text())
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def dead_links(page: Path) -> list[str]:
    """The relative links of `page` that lead nowhere."""
    dead = []
    for target in LINK.findall(re.sub(r"(?s)```.*?```", "", page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        inside = dest.is_relative_to(PROJECT_ROOT.resolve())
        if not inside or not dest.exists() or (fragment and dest.suffix == ".md" and fragment not in anchors(dest)):
            dead.append(target)
    return dead


def test_every_relative_link_of_the_readme_and_docs_leads_somewhere() -> None:
    assert len(PAGES) > 5
    dead = {p.name: d for p in PAGES if (d := dead_links(p))}
    assert dead == {}


def test_a_link_out_of_the_checkout_or_to_a_missing_anchor_counts_as_dead(tmp_path: Path) -> None:
    page = PROJECT_ROOT / "docs" / "_probe_links.md"
    page.write_text("[a](../../shared/DESIGN.md) [b](operations.md#no-such-heading) [c](operations.md#tests)\n")
    try:
        assert dead_links(page) == ["../../shared/DESIGN.md", "operations.md#no-such-heading"]
    finally:
        page.unlink()


def test_the_readme_is_short() -> None:
    assert len((PROJECT_ROOT / "README.md").read_text().splitlines()) <= 200
