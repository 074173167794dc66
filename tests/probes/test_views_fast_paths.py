"""The views' fast paths read what the old ones read (docs/benchmarks.md, 2026-12-05, branch h-views5).
Each generator checks one against the old code, kept here as its oracle:
- `has_wide_text` (one hyperscan pass) against `WIDE_TEXT.search` (Python's `re`, 57 ns a byte);
- `binary_format` (magics by first byte) against the loop over every magic;
- `_NO_CAPITALS` (a stretch found from its start only) against the old pattern's stretches;
- a base64 run read by `_base64_pieces`, which skips pieces and starts that decode to fewer than
  `MIN_BASE64 * 3 // 4` bytes, against the old reading of the same run (hits, payloads, declarations);
- `_b64decode` (binascii's decoder called directly) against `base64`'s functions, in that oracle;
- `probes.rule.words.skeleton`, which drops U+FFFD before transliterating, against the old one."""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

from anyascii import anyascii
from hypothesis import given, settings
from hypothesis import strategies as st

from probes import view_base64 as vb
from probes import view_payloads as vp
from probes.documents import formats
from probes.matcher import MIN_BASE64, WIDE_TEXT, Matcher, has_wide_text
from probes.rule import words
from tests import budget

WIDE_PIECES = [b"\x00", b"\x00\x00\x00", b"a", b"Z", b" ", b"~", b"\x7f", b"\x1f", b"\xff", b"ab", b"\x00a\x00b"]


@settings(max_examples=budget.examples(2000), deadline=None)
@given(st.lists(st.sampled_from(WIDE_PIECES), max_size=40))
def test_wide_text_is_found_where_the_regex_finds_it(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    assert has_wide_text(data) == bool(WIDE_TEXT.search(data))


def test_wide_text_in_a_long_window() -> None:
    text = "Farid Quillfeather".encode("utf-16-le")
    assert has_wide_text(b"\x01" * 5000 + text + b"\x02" * 5000)
    assert not has_wide_text(b"\x00\x01" * 5000)


def _old_binary_format(data: bytes) -> str | None:
    for magic, fmt in formats._MAGIC:
        if data.startswith(magic):
            return fmt
    if formats._gzip(data):
        return formats.GZIP
    if formats._bz2(data):
        return formats.BZ2
    if formats._tar(data):
        return formats.TAR
    if formats._image(data):
        return formats.IMAGE
    if formats._shm(data):
        return formats.SQLITE_SHM
    if formats._pickle(data):
        return formats.PICKLE
    if formats._zlib(data):
        return formats.ZLIB
    return None


MAGICS = [m for m, _f in formats._MAGIC] + [b"\x1f\x8b\x08\x00", b"BZh91AY&SY", b"\x80\x04", b"x\x9c", b"BM", b"RIFF"]


@settings(max_examples=budget.examples(2000), deadline=None)
@given(st.sampled_from([b"", *MAGICS]), st.integers(0, 8), st.binary(max_size=64))
def test_binary_format_by_first_byte_is_the_old_one(magic: bytes, cut: int, tail: bytes) -> None:
    data = magic[: len(magic) - cut] + tail if cut < len(magic) else tail
    assert formats.binary_format(data) == _old_binary_format(data)


OLD_NO_CAPITALS = re.compile(rb"[^A-Z]{%d,}" % vb.NO_CAPITALS)


STRETCH_PIECES = [b"a", b"0", b"Q", b"-", b"c0ec8e1f41e9506fa927ea1047a8ce06", b"Zz" * 20]


@settings(max_examples=budget.examples(1000), deadline=None)
@given(st.lists(st.sampled_from(STRETCH_PIECES), max_size=60))
def test_no_capital_stretches_are_the_old_ones(pieces: list[bytes]) -> None:
    core = b"".join(pieces)
    assert [m.span() for m in vp._NO_CAPITALS.finditer(core)] == [m.span() for m in OLD_NO_CAPITALS.finditer(core)]


# --- the old reading of a base64 run (before the skips), the oracle ---------------------------------------


def _old_b64decode(piece: bytes, urlsafe: bool) -> bytes | None:
    if len(piece) % 4 == 1:
        piece = piece[:-1]
    try:
        padded = piece + b"=" * (-len(piece) % 4)
        return base64.urlsafe_b64decode(padded) if urlsafe else base64.b64decode(padded)
    except (binascii.Error, ValueError):
        return None


def _old_pieces(scan: vp.FileScan, run: bytes, depth: int) -> None:
    core = run.rstrip(b"=")
    cuts = [(s.start(), s.end()) for s in OLD_NO_CAPITALS.finditer(core)]
    bounds = [0, *(x for cut in cuts for x in cut), len(core)]
    for begin, stop in zip(bounds[0::2], bounds[1::2], strict=True):
        if stop - begin < MIN_BASE64 - vb.GLUED:
            continue
        back = min(vb.GLUED, begin)
        piece = core[begin - back : min(len(core), stop + 3)]
        _old_piece(scan, piece, range(max(4, back + 1)), depth)


def _old_piece(scan: vp.FileScan, core: bytes, starts: range, depth: int) -> None:
    urlsafe = b"-" in core or b"_" in core
    best: tuple[float, int, bytes] | None = None
    others: list[bytes] = []
    for offset in starts:
        if len(core) - offset < MIN_BASE64 - vb.GLUED:
            break
        out = _old_b64decode(core[offset:], urlsafe)
        if out is None or len(out) < MIN_BASE64 * 3 // 4:
            continue
        if best is not None and offset % 4 == best[1] % 4:
            others.append(out)
            continue
        noise = (
            0.0 if vp._container_magic(out) or _old_binary_format(out) not in (None, formats.ZLIB) else vp._noise(out)
        )
        if noise <= vb.TEXT_NOISE and (best is None or noise < best[0]):
            best = (noise, offset, out)
            others = []
    if best is None:
        return
    offset, out = best[1], best[2]
    if scan.budget.take(len(out)):
        vp.read_payload(scan, out, depth + 1, whole_file=False, speculative=True)
    for other in others:
        scan.matcher.match_text(other[: vp.EDGE].decode("utf-8", "replace"), scan.hits)
    for short in (1, 2, 3):
        tail = _old_b64decode(core[offset : len(core) - short], urlsafe)
        if tail:
            scan.matcher.match_text(tail[-vp.EDGE :].decode("utf-8", "replace"), scan.hits)


NEEDLES = [
    ("identifier:id", "subj-0017"),
    ("identifier:email", "farid.q@mail.example"),
    ("identifier:name", "Farid Quillfeather"),
]
TEXTS = [b"Farid Quillfeather", b"farid.q@mail.example", b"subj-0017", b"hi", b"\x1f\x8b\x08\x00\x00", b"%PDF-1.4"]
GLUE = [b"", b"user-000645", b"c0ec8e1f41e9506fa927ea1047a8ce06", b"Thanks", b"ref-0004954", b"000000Z", b"x", b"Q9"]


@st.composite
def _runs(draw: st.DrawFn) -> bytes:
    text = b"".join(draw(st.lists(st.sampled_from(TEXTS), max_size=3)))
    lead = draw(st.integers(0, 2))
    encode = draw(st.sampled_from([base64.b64encode, base64.urlsafe_b64encode]))
    body = encode(bytes(lead) + text)
    body = body[: draw(st.integers(0, len(body)))]
    return draw(st.sampled_from(GLUE)) + body + draw(st.sampled_from(GLUE))


@settings(max_examples=budget.examples(1500), deadline=None)
@given(_runs())
def test_a_base64_run_is_read_as_the_old_reading_reads_it(run: bytes) -> None:
    new = vp.FileScan(Matcher(NEEDLES), {}, [])
    old = vp.FileScan(Matcher(NEEDLES), {}, [])
    vp._base64_pieces(new, run, 0)
    _old_pieces(old, run, 0)
    assert (new.hits, new.decoded, new.unscanned) == (old.hits, old.decoded, old.unscanned)


def test_the_positive_control_a_name_in_a_glued_run_is_found() -> None:
    scan = vp.FileScan(Matcher(NEEDLES), {}, [])
    vp._base64_pieces(scan, b"user-000645" + base64.b64encode(b"Dear Farid Quillfeather, hello") + b"Thanks", 0)
    assert 2 in scan.hits


def _old_skeleton(text: str) -> str:
    if text.isascii():
        return words._ASCII_DROP_RE.sub("", text).lower()
    t = unicodedata.normalize("NFKC", words._DROP_RE.sub("", text))
    return words._NOT_ALNUM_RE.sub("", words._NON_ASCII_RE.sub(lambda m: anyascii(m.group()), t).lower())


@settings(max_examples=budget.examples(3000), deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from("aZ9 -_'\ufffd\u00e9\u00df\u65e5\u0660\u200b\ufb01\u2460\u0301\x00\x80"), max_size=40
    )
)
def test_the_skeleton_drops_replacement_characters_as_the_old_one(text: str) -> None:
    assert words.skeleton(text) == _old_skeleton(text)


@settings(max_examples=budget.examples(1000), deadline=None)
@given(st.binary(max_size=200))
def test_the_skeleton_of_bytes_read_as_utf8_is_the_old_one(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    assert words.skeleton(text) == _old_skeleton(text)


@settings(max_examples=budget.examples(3000), deadline=None)
@given(st.binary(max_size=40).map(lambda b: base64.b64encode(b) + base64.urlsafe_b64encode(b)), st.integers(0, 80))
def test_b64decode_is_base64s(encoded: bytes, cut: int) -> None:
    piece = encoded.rstrip(b"=")[cut:]
    for urlsafe in (False, True):
        assert vp._b64decode(piece, urlsafe) == _old_b64decode(piece, urlsafe)
