"""What a file repeats is read once: a short SQLite value (`probes.view_sqlite._short_values`: a subject id
in every row of a table is not parsed and matched again for each row) and a base64 run
(`probes.view_payloads._base64_run`: a database writes the same values in many rows). The generators check
each against reading every repeat again (the old loop, written here as the oracle; for base64 runs, the
memory turned off): the same needles found and the same declarations (an image declared once per row)."""

from __future__ import annotations

import base64
import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from erasure.sqlite import connect
from probes import view_payloads, view_sqlite
from probes.matcher import GENERIC_NAMES, Matcher
from probes.view_payloads import FileScan, read_payload, read_triggered
from probes.views import scan_views
from tests import budget

NAME, EMAIL, SID = "Farid Quillfeather", "farid.q@mail.example", "subj-0042"
NEEDLES = [("identifier", NAME), ("identifier", EMAIL), ("identifier", SID)]
POOL = [
    b"subj-0001",
    SID.encode(),
    f"note for {NAME}".encode(),
    base64.b64encode(f"mail {EMAIL}".encode()),
    json.dumps({"who": NAME.replace("Q", "\\u0051")}).encode(),
    b"\x89PNG\r\n\x1a\n" + b"\x07subj\x00" * 40,  # an image whose bytes hold a trigger: declared
    b"Quillfeather & Quillfeather",
    b"nothing here at all",
]


def _oracle(values: list[bytes]) -> tuple[set[int], Counter[tuple[str, int]]]:
    scan = FileScan(Matcher(NEEDLES, once=True), {}, [])
    joined = b"\x00".join(values)
    starts, at = [], 0
    for v in values:
        starts.append(at)
        at += len(v) + 1
    hit = sorted(
        {
            max(i for i, s in enumerate(starts) if s <= end - 1)
            for pid, end in scan.matcher.triggers(joined)
            if pid >= len(GENERIC_NAMES) or GENERIC_NAMES[pid] in ("escapes", "fullwidth")
        }
    )
    for i in hit:
        read_payload(scan, values[i], 1, whole_file=False, speculative=True)
    return set(scan.hits), Counter((reason, size) for reason, _d, size in scan.unscanned)


@settings(max_examples=budget.examples(200), deadline=None)
@given(st.lists(st.sampled_from(POOL), min_size=1, max_size=30))
def test_repeated_values_read_once_find_and_declare_what_reading_each_does(values: list[bytes]) -> None:
    scan = FileScan(Matcher(NEEDLES, once=True), {}, [])
    view_sqlite._short_values(scan, values, {})
    assert (set(scan.hits), Counter((r, n) for r, _d, n in scan.unscanned)) == _oracle(values)


def test_a_subject_id_in_every_row_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    conn = connect(db)
    conn.execute("CREATE TABLE frames (subject_id TEXT, body TEXT)")
    for k in range(500):
        conn.execute("INSERT INTO frames VALUES (?, ?)", ("subj-0001", f"turn {k} of a chat"))
    conn.execute("INSERT INTO frames VALUES (?, ?)", ("subj-0001", f"and then {NAME} wrote"))
    conn.close()
    reads: list[bytes] = []

    def counting(
        scan: FileScan,
        data: bytes,
        depth: int,
        *,
        whole_file: bool,
        speculative: bool = False,
        layout: str | None = None,
    ) -> None:
        reads.append(data)
        read_payload(scan, data, depth, whole_file=whole_file, speculative=speculative, layout=layout)

    monkeypatch.setattr(view_sqlite, "read_payload", counting)
    report = scan_views(tmp_path, NEEDLES)
    assert 0 in report.found
    assert reads.count(b"subj-0001") == 1  # 501 rows hold it (its "subj" is a trigger of the subject's id)


RUNS = [
    base64.b64encode(f"Dear {NAME}, your parcel".encode()),
    base64.b64encode(gzip.compress(f"to {EMAIL}".encode(), mtime=0)),
    base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(200))),  # an image: declared
    base64.b64encode(b"nothing of anyone in this text"),
    b"000000Zmemory",
    b"c0ec8e1f41e9506fa927ea1047a8ce06blobs",
    base64.b64encode(base64.b64encode(f"{NAME} again".encode())),
]


def _read(data: bytes) -> tuple[set[int], Counter[tuple[str, int]]]:
    scan = FileScan(Matcher(NEEDLES, once=True), {}, [])
    read_triggered(scan, data, 0, match_windows=True)
    return set(scan.hits), Counter((reason, size) for reason, _d, size in scan.unscanned)


@settings(max_examples=budget.examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(RUNS), st.sampled_from([b" ", b"\x00", b'","', b"\n"])), max_size=25))
def test_repeated_base64_runs_read_once_find_and_declare_what_reading_each_does(
    pieces: list[tuple[bytes, bytes]],
) -> None:
    data = b"".join(run + sep for run, sep in pieces)
    got = _read(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(view_payloads, "MEMO_RUNS", 0)
        assert got == _read(data)


def test_a_repeated_base64_run_is_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    run = base64.b64encode(b"nothing of anyone in this text")
    decodes: list[bytes] = []
    real = view_payloads._b64decode

    def counting(piece: bytes, urlsafe: bool) -> bytes | None:
        decodes.append(piece)
        return real(piece, urlsafe)

    monkeypatch.setattr(view_payloads, "_b64decode", counting)
    once = _read(run + b" ")
    n = len(decodes)
    assert _read((run + b" ") * 50) == once
    assert len(decodes) == 2 * n
