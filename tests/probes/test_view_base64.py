"""Base64 runs judged in bulk (`probes.view_base64.readable_runs`, docs/benchmarks.md 2026-12-06, branch
h-views6): a run it holds back must be one that `_base64_pieces` (unchanged, the oracle) reads on at no
start: no payload decoded, no needle found, nothing declared. The generators draw runs of the class the
judgement must let through (base64 of text with a needle in any case, diacritics, full-width or other
scripts, UTF-16 text, control-rich text near the noise limit, magics of containers and images, nested
base64, at any alignment, url-safe, glued to letters, digits, hex digests and `-` on either side) among
runs of noise (glued columns, random bytes), and the reading of whole texts with and without the
judgement must find, count and declare the same. Also: a trigger's run found with `run_start`'s first
slice inline (`_find_run`), and the generic triggers scanned in two databases (`matcher._generic_db`:
the base64 start apart), each against the old code."""

from __future__ import annotations

import base64
import gzip
import io
import random
import zlib

import hyperscan
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes import matcher
from probes import view_base64 as vb
from probes import view_payloads as vp
from probes.matcher import Matcher
from tests import budget

NEEDLES = [
    ("identifier:id", "subj-0017"),
    ("identifier:email", "farid.q@mail.example"),
    ("identifier:name", "Farid Quillfeather"),
    ("identifier:name", "Zoë Ångström"),
    ("identifier:phone", "+44 7700 900461"),
]


def _png() -> bytes:
    return b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(40))


TEXTS = [
    b"Farid Quillfeather",
    b"FARID QUILLFEATHER",
    b"farid.q@mail.example",
    b"subj-0017",
    "Zoë Ångström".encode(),
    "ZOË ÅNGSTRÖM".encode(),
    "Ｆａｒｉｄ Ｑｕｉｌｌｆｅａｔｈｅｒ".encode(),
    "Фарид Квиллфезер 日本語".encode(),
    "Farid Quillfeather".encode("utf-16-le"),
    "Zoë Ångström".encode("utf-16-be"),
    "Farid".encode("utf-32-le"),
    b"\xff\xfeF\x00a\x00",
    b"\x01\x02\x03 hello \x04\x05 there \x06",
    b"+44 7700 900461",
    b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff",
    gzip.compress(b"Farid Quillfeather"),
    zlib.compress(b"Farid Quillfeather"),
    b"%PDF-1.4\n",
    b"PK\x03\x04",
    b"BZh91AY&SY",
    b"\x80\x04\x95.",
    b"BM\x1e\x00\x00\x00",
    b"RIFF\x00\x00\x00\x00WEBP",
    _png(),
    b"dGV4dCBpbiB0ZXh0IEZhcmlkIFF1aWxsZmVhdGhlcg==",  # nested base64
    b"\xef\xbf\xbf\xef\xbf\xbe",  # the judgement's own separator
    b"\xe2\x82",  # an incomplete sequence
    b" ",
]
GLUE = [
    b"",
    b"user-000645",
    b"c0ec8e1f41e9506fa927ea1047a8ce06",
    b"Thanks",
    b"ref-0004954",
    b"000000Z",
    b"x",
    b"Q9",
    b"-",
    b"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz",
]


@st.composite
def _run(draw: st.DrawFn) -> bytes:
    """A base64-looking run: noise, or base64 of text (or of bytes drawn at random) cut anywhere."""
    kind = draw(st.sampled_from(["text", "bytes", "noise"]))
    if kind == "noise":
        return draw(st.text(alphabet="ABCxyz0189+/-_", min_size=1, max_size=90)).encode()
    if kind == "text":
        body = b"".join(draw(st.lists(st.sampled_from(TEXTS), min_size=1, max_size=4)))
    else:
        body = draw(st.binary(min_size=1, max_size=120))
    if draw(st.booleans()):
        body = body * draw(st.integers(1, 40))  # a long payload: judged whole past `LONG`
    encode = draw(st.sampled_from([base64.b64encode, base64.urlsafe_b64encode]))
    encoded = encode(bytes(draw(st.integers(0, 2))) + body)
    cut = draw(st.integers(0, 3))
    encoded = encoded[cut : draw(st.integers(cut, len(encoded)))]
    return draw(st.sampled_from(GLUE)) + encoded + draw(st.sampled_from(GLUE))


def _old(run: bytes) -> tuple[dict[int, int], int, list[tuple[str, bytes | None, int]]]:
    """What `_base64_pieces` finds, decodes and declares reading `run` on its own."""
    scan = vp.FileScan(Matcher(NEEDLES), {}, [])
    vp._base64_pieces(scan, run, 0)
    return scan.hits, scan.decoded, scan.unscanned


NOISE = [b"user-00%04demailref-%07d" % (i, 7 * i) for i in range(vb.FEW)]
"""Glued columns, so that every batch is judged (at least `FEW` runs)."""


@settings(max_examples=budget.examples(150), deadline=None)
@given(st.lists(_run(), min_size=1, max_size=30))
def test_a_run_held_back_is_one_the_old_reading_reads_on_at_no_start(runs: list[bytes]) -> None:
    batch = list(dict.fromkeys(runs + NOISE))
    readable = vb.readable_runs(batch)
    for run in batch:
        if run not in readable:
            assert _old(run) == ({}, 0, [])


def test_the_positive_controls() -> None:
    """A run of text, of a container and of wide text is let through; glued columns are held back."""
    columns = [b"user-00%04demailref-%07dThanks" % (i, 13 * i) for i in range(200)]
    text = b"user-000645" + base64.b64encode(b"Dear Farid Quillfeather, hello") + b"Thanks"
    wide = base64.b64encode("Farid Quillfeather".encode("utf-16-le"))
    packed = base64.b64encode(gzip.compress(b"Farid Quillfeather"))[1:]
    readable = vb.readable_runs([*columns, text, wide, packed])
    assert {text, wide, packed} <= readable
    assert len(readable & set(columns)) < 20
    assert _old(text)[0]  # the oracle finds the name


@st.composite
def _document(draw: st.DrawFn) -> bytes:
    """A text of runs among words and separators, as a database page or a log holds them."""
    runs = draw(st.lists(_run(), min_size=1, max_size=30)) + random.Random(draw(st.integers(0, 9))).sample(NOISE, 8)
    seps = [b" ", b"\x00", b'"', b"\n", b",", b"|", b"=", b"\x01\x02"]
    out = io.BytesIO()
    for run in runs:
        out.write(run + draw(st.sampled_from(seps)))
    return out.getvalue()


@settings(max_examples=budget.examples(150), deadline=None)
@given(_document(), st.booleans())
def test_a_text_is_read_as_without_the_judgement(data: bytes, once: bool) -> None:
    def read(judged: bool) -> tuple[dict[int, int], int, list[tuple[str, bytes | None, int]]]:
        with pytest.MonkeyPatch.context() as m:
            if not judged:
                m.setattr(vp, "readable_runs", set)  # every run read on: the reading before the judgement
            scan = vp.FileScan(Matcher(NEEDLES, once=once), {}, [])
            vp.read_triggered(scan, data, 0, match_windows=True)
        return scan.hits, scan.decoded, scan.unscanned

    assert read(True) == read(False)


RUN_PIECES = [b"A", b"z", b"0", b"-", b"_", b"=", b" ", b"\x00", b"Qm9i" * 40]
"""Base64 characters, padding, separators, and a long piece: a run may start more than 256 bytes back."""


@settings(max_examples=budget.examples(1000), deadline=None)
@given(st.lists(st.sampled_from(RUN_PIECES), min_size=1, max_size=80), st.data())
def test_a_run_is_found_as_run_start_finds_it(pieces: list[bytes], draw: st.DataObject) -> None:
    """`_find_run` (`run_start`'s first slice taken inline) against `run_start` and the run's pattern."""
    data = b"".join(pieces)
    end = draw.draw(st.integers(1, len(data)))
    m = vp._B64_RUN.match(data, vp.run_start(data, end - 1))
    assert vp._find_run(data, end) == ((None, end) if m is None else (m.group(0), m.end()))


TRIGGER_PIECES = [
    b"user-000645",
    b"Zm9vYmFyIEZhcmlkIFF1aWxsZmVhdGhlcg==",
    b"%41%42",
    b"4%2D5",
    b"&#70;&#97;",
    b"=46=61",
    b"\\u0046\\u0061",
    "Ｆａｒｉｄ".encode(),
    b"\x1f\x8b\x08\x00",
    b"BZh91AY&SY",
    b"\xfd7zXZ\x00",
    b"PK\x03\x04",
    b"stream\n",
    b"Farid Quillfeather",
    b"subj-0017",
    b" ",
    b"-",
]


@settings(max_examples=budget.examples(200), deadline=None)
@given(st.lists(st.sampled_from(TRIGGER_PIECES), max_size=40))
def test_the_generic_triggers_in_their_databases_are_those_of_one(pieces: list[bytes]) -> None:
    """`matcher._generic_db` scans the base64 start and the other scripts' digits apart from the other
    generic triggers: the same triggers (one database of them all, the oracle), and the same reading."""
    data = b"".join(pieces)
    one = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    names = matcher.GENERIC_NAMES
    one.compile(expressions=[matcher._GENERIC[n] for n in names], ids=list(range(len(names))), flags=[0] * len(names))

    def read(dbs: list[tuple[hyperscan.Database, hyperscan.Scratch]]) -> tuple[object, ...]:
        saved = list(matcher._GENERIC_DB)
        try:
            matcher._GENERIC_DB[:] = dbs
            m = Matcher(NEEDLES, once=True)
            scan = vp.FileScan(m, {}, [])
            vp.read_triggered(scan, data, 0, match_windows=True)
            return sorted(Matcher(NEEDLES).triggers(data)), scan.hits, scan.decoded, scan.unscanned
        finally:
            matcher._GENERIC_DB[:] = saved

    matcher._generic_db()
    assert len(matcher._GENERIC_DB) == 4
    assert read(list(matcher._GENERIC_DB)) == read([(one, hyperscan.Scratch(one))])
