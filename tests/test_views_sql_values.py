"""Short SQLite values are read once per distinct value in a file (`probes.view_sqlite._short_values`): a
subject id repeated in every row of a table is not parsed and matched again for each row. The generator
checks it against the reading of every triggered value, one by one (the old loop, written here as the
oracle): the same needles found and the same declarations (an image value declared once per row)."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from erasure.sqlite import connect
from probes import view_sqlite
from probes.matcher import GENERIC_NAMES, Matcher
from probes.view_payloads import FileScan, read_payload
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
