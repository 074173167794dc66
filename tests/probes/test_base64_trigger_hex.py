"""The base64 trigger skips runs that are all hex (`probes.matcher._base64_trigger`): a database holds a
hex digest in every row, and each was a trigger read and dropped in Python (docs/benchmarks.md,
2026-12-05). The generator draws bytes rich in hex digits, base64 characters, `-`, `=` and separators and
checks that the runs the trigger starts are exactly the runs the old start (`BASE64_START`, the oracle)
starts that are not all hex, read as `probes.view_payloads._base64_run` reads a run."""

from __future__ import annotations

import base64

import hyperscan
from hypothesis import given, settings
from hypothesis import strategies as st

from probes import matcher
from probes.matcher import BASE64_START, GENERIC_NAMES, Matcher
from probes.view_payloads import _B64_BYTES, _B64_RUN, _HEX, FileScan, read_triggered
from tests import budget


def _ends(pattern: bytes, data: bytes) -> list[int]:
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[pattern], ids=[0], flags=[0])
    out: list[int] = []
    db.scan(data, match_event_handler=lambda _i, _s, end, _f, _c: out.append(end))
    return out


def _run(data: bytes, end: int) -> tuple[int, int] | None:
    start = end - 1
    while start > 0 and data[start - 1] in _B64_BYTES:
        start -= 1
    m = _B64_RUN.match(data, start)
    return None if m is None else (start, m.end())


def _runs(pattern: bytes, data: bytes) -> set[tuple[int, int]]:
    runs = {_run(data, end) for end in _ends(pattern, data)}
    return {r for r in runs if r is not None and not _HEX.fullmatch(data[r[0] : r[1]].rstrip(b"="))}


PIECES = [
    b"0123456789abcdef",
    b"ABCDEF",
    b"9f",
    b"e",
    b"G",
    b"z",
    b"+",
    b"/",
    b"_",
    b"-",
    b"=",
    b"==",
    b" ",
    b"\x00",
    b'"',
    b".",
    b"user",
    b"Q",
    b"c0ec8e1f41e9506fa927ea1047a8ce06",
]


@settings(max_examples=budget.examples(1500), deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40))
def test_the_trigger_starts_the_runs_the_old_start_does_less_the_all_hex_ones(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    assert _runs(matcher._GENERIC["base64"], data) == _runs(BASE64_START, data)


@settings(max_examples=budget.examples(300), deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                b"c0ec8e1f41e9506fa927ea1047a8ce06",
                base64.b64encode(b"Dear Farid Quillfeather, hello"),
                base64.urlsafe_b64encode(b"mail farid.q@mail.example now"),
                b"user-000645",
                b"2025-01-06T09:00:00.000000Z",
                b"\x02",
                b" ",
                b"-",
            ]
        ),
        max_size=20,
    )
)
def test_a_glued_record_finds_what_the_old_start_found(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    needles = [("identifier", "Farid Quillfeather"), ("identifier", "farid.q@mail.example")]

    def found() -> set[int]:
        scan = FileScan(Matcher(needles, once=True), {}, [])
        read_triggered(scan, data, 0, match_windows=True)
        return set(scan.hits)

    got = found()
    old = dict(matcher._GENERIC, base64=BASE64_START)
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[old[n] for n in GENERIC_NAMES], ids=list(range(len(GENERIC_NAMES))), flags=[0] * len(old))
    saved = list(matcher._GENERIC_DB)
    try:
        matcher._GENERIC_DB[:] = [(db, hyperscan.Scratch(db))]
        assert got == found()
    finally:
        matcher._GENERIC_DB[:] = saved
