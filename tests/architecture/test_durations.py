"""The duration table that orders a full run (tests/durations.py): read from a JUnit report per file, and
the files of this run handed out longest first by it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import durations

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.flows.test_slow" name="test_a" time="100.5"/>
<testcase classname="tests.flows.test_slow" name="test_b[x]" time="20.25"/>
<testcase classname="tests.cli.test_fast.TestGroup" name="test_c" time="1.0"/>
<testcase classname="tests.cli.test_fast" name="test_d" time="0.5"/>
</testsuite></testsuites>
"""


def test_seconds_are_summed_per_file_with_test_classes_folded_into_their_module(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(REPORT)
    assert durations.from_junit(report) == {"tests/cli/test_fast.py": 1.5, "tests/flows/test_slow.py": 120.8}


def test_this_run_hands_out_the_measured_files_longest_first(request: pytest.FixtureRequest) -> None:
    """The session's own items, as tests/conftest.py sorted them: a file the table knows comes before every
    file the table says is shorter."""
    table = durations.load()
    assert table, "tests/durations.json is missing or empty"
    root = request.config.rootpath
    order: list[str] = []
    for item in request.session.items:
        rel = item.path.relative_to(root).as_posix()
        if not order or order[-1] != rel:
            order.append(rel)
    known = [table[f] for f in order if f in table]
    if len(known) > 1:  # a run of one file (`pytest this_file`) has nothing to order
        assert known == sorted(known, reverse=True)
