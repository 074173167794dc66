"""The folded-text probe: an identifier left in a compatibility form (full-width letters, as a CJK input
method types them) or in a non-ASCII letter case is residue, although no byte of it is the
identifier's; the byte scan alone would call it all clear."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import pytest

from erasure.config import Home
from probes.fingerprint import take_fingerprint
from probes.run import run_probes
from tests.probe_fixtures import BYSTANDERS, SUBJECT, Built, build_store, erase_by_hand


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@pytest.fixture
def built(home: Home) -> Iterator[Built]:
    b = build_store(home.store_dir)
    yield b
    b.conn.close()


def _bystander_says(built: Built, words: str) -> None:
    """Put `words` into a bystander's frame and session state in place (as a cascade that missed a
    mention would leave them): no bystander count changes."""
    conn = built.conn
    bob = BYSTANDERS[0].id
    (fid,) = cast(
        tuple[Any, ...], conn.execute("SELECT frame_id FROM frames WHERE subject_id = ? LIMIT 1", (bob,)).fetchone()
    )
    conn.execute("UPDATE frames SET content = content || ? WHERE frame_id = ?", (f" ask {words}", fid))
    (sid, state) = cast(
        tuple[Any, ...],
        conn.execute("SELECT session_id, state FROM working_sessions WHERE subject_id = ? LIMIT 1", (bob,)).fetchone(),
    )
    conn.execute(
        "UPDATE working_sessions SET state = ? WHERE session_id = ?",
        (json.dumps({**json.loads(state), "note": f"call {words}"}, ensure_ascii=False), sid),
    )


@pytest.mark.parametrize(
    "words",
    [
        _fullwidth(SUBJECT.name or ""),  # Ｄａｎａ Ｏｒｔｉｚ
        _fullwidth((SUBJECT.email or "").upper()),  # ＤＡＮＡ．ＯＲＴＩＺ＠...
        "\uff0b\uff11 555 \uff10\uff11\uff14\uff12",  # ＋１ 555 ０１４２: the phone, half in full width
    ],
)
def test_an_identifier_in_full_width_is_residue(built: Built, words: str) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    assert run_probes(built.store_dir, SUBJECT, fp).all_clear  # the check can pass: a clean erasure
    _bystander_says(built, words)
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert not v.all_clear
    residue = {(p.tier, p.method): p.residue for p in v.probes if p.residue}
    # The folded probe finds it; the decoded views may too (a session file written with JSON escapes).
    assert residue.get(("bytes", "scan-folded:identifier")) == 1, residue
    assert set(residue) <= {("bytes", "scan-folded:identifier"), ("bytes", "scan-views:identifier")}, residue


def test_another_persons_full_width_name_is_not_residue(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    _bystander_says(built, _fullwidth(BYSTANDERS[1].name or ""))
    assert run_probes(built.store_dir, SUBJECT, fp).all_clear
