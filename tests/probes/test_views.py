"""The byte probe's decoded views (`probes.views`): every spelling and encoding the red team used, and a
generator that draws the whole class (identifier kind x spelling x encoding x container), checked
against what the test itself planted (the oracle is the plant: the views must find every planted
identifier of the subject, and nothing when only other people's identifiers were planted)."""

from __future__ import annotations

import base64
import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import quopri
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.views import Matcher, canonical, scan_views
from tests import budget

NAME, EMAIL, PHONE, PHONE_NATIONAL, SID = (
    "Jana Weißmüller",
    "jana.weiss@post.example",
    "+48 600 700 800",
    "0600700800",
    "cust-8841",
)
NEEDLES = [
    ("identifier", NAME),
    ("identifier", EMAIL),
    ("identifier", PHONE),
    ("identifier", PHONE_NATIONAL),
    ("identifier", SID),
]
OTHER = {"name": "Jan Weiss", "email": "jana.weiss@other.example", "phone": "+48 600 700 801", "id": "cust-8842"}
"""A bystander whose identifiers look like the subject's: none of them may be found."""


def _found(tmp: Path, files: dict[str, bytes]) -> set[int]:
    tmp.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    return scan_views(tmp, NEEDLES).found_indexes()


# --- spellings: each text is one way software or a person writes the subject ---------------------------------

SPELLINGS: dict[str, list[str]] = {
    "name": [
        "Weißmüller, Jana",
        "Jana Weissmüller",
        "Jana Weissmueller",
        "JANA WEISSMULLER",
        "Jana\tWeißmüller",
        "Jana\nWeißmüller",
        "Jana Weiß\u00admüller",
        "Jana\u00a0Weißmüller",
        "jana weiß\u200bmüller",
        "Ｊａｎａ Ｗｅｉßｍüｌｌｅｒ",
    ],
    "email": ["jana.weiss@post.example", "Jana.Weiss+news@post.example", "JANA.WEISS@POST.EXAMPLE"],
    "phone": [
        "0048 600 700 800",
        "+48 600\u2011700\u2011800",
        "+48 (600) 700-800",
        "600\u2013700\u2013800",
        "+48.600.700.800",
        "0048600700800",
    ],
    "id": ["cust-8841", "CUST-8841", "cust\u20118841", "cust 8841"],
}


def _json(text: str) -> bytes:
    return json.dumps({"tool_result": text}).encode()  # ensure_ascii: non-ASCII as \\uXXXX


def _json_all(text: str) -> bytes:
    return ('{"v": "' + "".join(f"\\u{ord(c):04x}" for c in text) + '"}').encode()


def _percent(text: str) -> bytes:
    return f"https://crm.example/view?q={quote(text, safe='')}&x=1".encode()


def _entities(text: str) -> bytes:
    return (
        "<p>" + "".join(f"&#{ord(c)};" if not c.isalnum() or not c.isascii() else c for c in text) + "</p>"
    ).encode()


def _hex_entities(text: str) -> bytes:
    return ("<p>" + "".join(f"&#x{ord(c):x};" for c in text) + "</p>").encode()


def _qp(text: str) -> bytes:
    return b"Subject: note\r\n\r\n" + quopri.encodestring(text.encode(), quotetabs=True)


def _b64(text: str) -> bytes:
    return b"2026-12-01 INFO body=" + base64.b64encode(f"to {text} ok".encode()) + b" end"


def _b64url(text: str) -> bytes:
    return b"token=" + base64.urlsafe_b64encode(f"[{text}]".encode()).rstrip(b"=") + b";"


def _utf16(text: str) -> bytes:
    return f"note: {text}\r\n".encode("utf-16")


def _utf16be(text: str) -> bytes:
    return f"note: {text} end".encode("utf-16-be")


def _utf32(text: str) -> bytes:
    return f"note: {text}".encode("utf-32")


ENCODINGS: dict[str, Callable[[str], bytes]] = {
    "raw": lambda t: f"said: {t}.".encode(),
    "json": _json,
    "json-all": _json_all,
    "percent": _percent,
    "entities": _entities,
    "hex-entities": _hex_entities,
    "quoted-printable": _qp,
    "base64": _b64,
    "base64url": _b64url,
    "utf-16": _utf16,
    "utf-16-be": _utf16be,
    "utf-32": _utf32,
}


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data)


def _zip(data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("notes/today.txt", data)
    return buf.getvalue()


def _pdf(data: bytes) -> bytes:
    body = zlib.compress(b"BT /F1 12 Tf <" + data + b"> Tj ET")
    return (
        b"%PDF-1.4\n1 0 obj\n<< /Length "
        + str(len(body)).encode()
        + b" /Filter /FlateDecode >>\nstream\n"
        + body
        + b"\nendstream\nendobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
    )


def _in_binary(data: bytes) -> bytes:
    return bytes(range(256)) * 8 + data + bytes(range(255, -1, -1)) * 8


CONTAINERS: dict[str, Callable[[bytes], bytes]] = {
    "file": lambda d: d,
    "gzip": _gzip,
    "zlib": zlib.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zip": _zip,
    "pdf": _pdf,
    "inside-binary": _in_binary,
    "gzip-in-base64": lambda d: _b64_bytes(_gzip(d)),
    "zip-in-gzip": lambda d: _gzip(_zip(d)),
    "base64-attachment": lambda d: _b64_bytes(d),
}


def _b64_bytes(data: bytes) -> bytes:
    return b'{"attachment": "' + base64.b64encode(data) + b'"}'


KIND_INDEX = {"name": 0, "email": 1, "phone": 2, "id": 4}


@pytest.mark.parametrize("kind", sorted(SPELLINGS))
def test_every_spelling_of_every_identifier_is_found(tmp_path: Path, kind: str) -> None:
    for k, text in enumerate(SPELLINGS[kind]):
        found = _found(tmp_path / str(k), {"note.txt": f"ticket: {text} (closed)".encode()})
        assert found & {KIND_INDEX[kind], 3 if kind == "phone" else -1}, (kind, text)


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_every_encoding_is_read(tmp_path: Path, encoding: str) -> None:
    for kind, texts in SPELLINGS.items():
        found = _found(tmp_path / kind, {"blob": ENCODINGS[encoding](texts[0])})
        assert KIND_INDEX[kind] in found | ({2} if 3 in found else set()), (encoding, kind)


@pytest.mark.parametrize("container", sorted(CONTAINERS))
def test_every_container_is_opened(tmp_path: Path, container: str) -> None:
    found = _found(tmp_path, {"attachment": CONTAINERS[container](f"from {EMAIL}, call {PHONE}".encode())})
    assert {1, 2} <= found, container


def test_a_bystander_who_looks_alike_is_not_found(tmp_path: Path) -> None:
    text = "; ".join(OTHER.values()) + "; Jana; Weiss; 600 700; post.example; jordan"
    files = {f"{enc}-{con}": CONTAINERS[con](ENCODINGS[enc](text)) for enc in ENCODINGS for con in ("file", "gzip")}
    assert _found(tmp_path, files) == set()


def test_phone_digits_inside_a_longer_number_are_not_the_phone(tmp_path: Path) -> None:
    assert _found(tmp_path, {"a": b"order 4860070080012 and 1600700800"}) == set()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x89PNG\r\n\x1a\n" + os.urandom(2000), "image-not-read"),
        (b"\xff\xd8\xff\xe0" + os.urandom(2000), "image-not-read"),
        (os.urandom(20000), "unidentified-format"),
        (b"\x1f\x8b\x08\x00" + os.urandom(500), "container-corrupt"),
    ],
)
def test_what_no_view_reads_is_listed_with_digest_size_and_reason(tmp_path: Path, data: bytes, reason: str) -> None:
    (tmp_path / "blobs").mkdir()
    (tmp_path / "blobs" / "x").write_bytes(data)
    report = scan_views(tmp_path, NEEDLES)
    import hashlib

    assert [(u.reason, u.size, u.sha256, u.folder) for u in report.unscanned] == [
        (reason, len(data), hashlib.sha256(data).hexdigest(), "blobs")
    ]
    assert "folder" not in report.unscanned[0].model_dump()  # a folder can be named after a person


def test_an_encrypted_zip_member_is_unscanned(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.txt", b"hello")
    data = bytearray(buf.getvalue())
    data[6] |= 1  # the local header's "encrypted" flag
    cd = data.rfind(b"PK\x01\x02")
    data[cd + 8] |= 1  # and the central directory's
    (tmp_path / "a.zip").write_bytes(bytes(data))
    assert [u.reason for u in scan_views(tmp_path, NEEDLES).unscanned] == ["encrypted-archive"]


def test_a_container_past_the_depth_limit_is_unscanned(tmp_path: Path) -> None:
    data = f"to {EMAIL}".encode()
    for _ in range(6):
        data = gzip.compress(data)
    (tmp_path / "deep.gz").write_bytes(data)
    report = scan_views(tmp_path, NEEDLES)
    assert 1 not in report.found
    assert [u.reason for u in report.unscanned] == ["container-too-deep"]


def test_plain_text_and_sqlite_files_are_not_unscanned(tmp_path: Path) -> None:
    from erasure.sqlite import connect

    conn = connect(tmp_path / "db.sqlite")
    conn.execute("CREATE TABLE t(x)")
    conn.execute("INSERT INTO t VALUES (?)", (os.urandom(100_000).hex(),))
    conn.close()
    (tmp_path / "t.txt").write_text("hello " * 5000)
    assert scan_views(tmp_path, NEEDLES).unscanned == []


def test_a_long_value_on_sqlite_overflow_pages_is_read_whole(tmp_path: Path) -> None:
    """A value longer than a page is cut by 4-byte page pointers: the bytes alone may split a name."""
    from erasure.sqlite import connect

    conn = connect(tmp_path / "db.sqlite")
    conn.execute("CREATE TABLE t(x)")
    filler = "lorem ipsum " * 700  # longer than a 4 KiB page: the value continues on overflow pages
    for shift in range(0, 40, 3):
        conn.execute("INSERT INTO t VALUES (?)", (filler[:shift] + json.dumps({"a": f"{filler}{NAME} {filler}"}),))
    conn.close()
    assert 0 in scan_views(tmp_path, NEEDLES).found


def test_canonical_form() -> None:
    assert canonical("Straße") == canonical("STRASSE") == "strasse"
    assert canonical("Mül\u00adler\u200b") == "muller"
    assert canonical("a\u2011b\u2014c  \t\n d") == "a-b-c d"
    assert canonical("\ufeffＡ") == "a"


@settings(
    max_examples=budget.examples(150),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    kind=st.sampled_from(sorted(SPELLINGS)),
    data=st.data(),
    encoding=st.sampled_from(sorted(ENCODINGS)),
    container=st.sampled_from(sorted(CONTAINERS)),
    planted=st.booleans(),
    prefix=st.text(max_size=30),
)
def test_generated_spelling_encoding_container(
    tmp_path: Path, kind: str, data: st.DataObject, encoding: str, container: str, planted: bool, prefix: str
) -> None:
    """Oracle: what was planted. The subject's identifier in any spelling x encoding x container is found;
    a look-alike bystander's is not (with the same surroundings)."""
    text = data.draw(st.sampled_from(SPELLINGS[kind])) if planted else OTHER[kind]
    payload = CONTAINERS[container](ENCODINGS[encoding](prefix.replace("\x00", "") + " " + text))
    folder = tmp_path / os.urandom(6).hex()
    found = _found(folder, {"item": payload})
    wanted = {KIND_INDEX[kind]} | ({3} if kind == "phone" else set())
    if planted:
        assert found & wanted, (kind, text, encoding, container)
    else:
        assert not found & wanted, (kind, text, encoding, container)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_wide_text_attached_in_base64_is_read(tmp_path: Path, encoding: str) -> None:
    """A UTF-16/32 text file pasted as a base64 attachment: decoded, it has a NUL in every other byte, and
    is text all the same."""
    found = _found(tmp_path, {"mail.json": _b64_bytes(ENCODINGS[encoding](f"from {EMAIL}, call {PHONE}"))})
    assert {1, 2} <= found, encoding


def test_base64_of_random_bytes_is_not_read_as_text(tmp_path: Path) -> None:
    """Base64 runs of binary noise (vectors, keys, digests in a store) are not text: no view decodes them
    further (decoded as UTF-8, noise is mostly U+FFFD, which is 'printable')."""
    rng = __import__("random").Random(5)
    noise = b"\n".join(b'{"vec": "' + base64.b64encode(rng.randbytes(384)) + b'"}' for _ in range(200))
    (tmp_path / "vectors.jsonl").write_bytes(noise)
    report = scan_views(tmp_path, [("identifier", EMAIL)])
    assert report.decoded == 0


def test_base64_glued_to_a_digest_in_a_record_is_read(tmp_path: Path) -> None:
    """A database record's fields have no separator: a hex digest, then a base64 field holding the
    subject, then an id, make one run of base64 letters; the base64 between them is read."""
    digest = hashlib.sha256(b"x").hexdigest().encode()
    for tail in (b"", b"chatref0017882user001098"):
        # The phone is not the field's last word: decoded at a guessed end, the next field's letters would be
        # glued to its digits, and a number glued to a letter is not a phone (docs/matching.md 5.2).
        record = b"\x00\x17" + digest + base64.b64encode(f"to {EMAIL} re: call {PHONE} today".encode()) + tail
        folder = tmp_path / str(len(tail))
        assert {1, 2} <= _found(folder, {"memory.db": record}), tail


_GLUE_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz-_"
_GLUE = st.text(alphabet=_GLUE_ALPHABET, max_size=3) | st.text(alphabet=_GLUE_ALPHABET, min_size=48, max_size=90)
"""Letters glued to a base64 value: up to 3 (its alignment is tried) or a digest-long field (cut off where
48 in a row hold no capital). Between 4 and 47 glued letters are a known limit (README)."""


@settings(
    max_examples=budget.examples(120),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    before=_GLUE,
    after=_GLUE,
    lead=st.sampled_from(["", "to ", "from: ", "note "]),
    trail=st.sampled_from(["", ".", " re: order", ", thanks"]),
    urlsafe=st.booleans(),
)
def test_generated_base64_glued_to_other_fields(
    tmp_path: Path, before: str, after: str, lead: str, trail: str, urlsafe: bool
) -> None:
    """Oracle: what was planted. The subject's email, base64-encoded (where in its text it stands: first,
    inside, last) and glued without a separator to other fields' letters and digits (a digest, an id)
    on either side, is found."""
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    value = encode(f"{lead}{EMAIL}{trail}".encode()).rstrip(b"=")
    record = b"\x0b\x00" + before.encode() + value + after.encode() + b"\x00\x01"
    assert 1 in _found(tmp_path / os.urandom(6).hex(), {"memory.db": record}), (before, lead, trail, after)


def test_a_matcher_asked_about_texts_in_turn_answers_for_each() -> None:
    """The canaries' choice asks one matcher about each bystander frame in turn: a frame that names the
    subject is named so even when an earlier frame named them too (only a verdict's scan stops looking for
    a needle once found)."""
    spelled = Matcher([("identifier", EMAIL)])
    answers = []
    for text in (f"mail {EMAIL} today", "nothing here", f"again: {EMAIL.upper()}"):
        hits: dict[int, int] = {}
        spelled.match_text(text, hits)
        answers.append(bool(hits))
    assert answers == [True, False, True]


WIDE: dict[str, Callable[[str], bytes]] = {
    "utf-16": lambda t: t.encode("utf-16"),
    "utf-16-le": lambda t: t.encode("utf-16-le"),
    "utf-16-be": lambda t: t.encode("utf-16-be"),
    "utf-32": lambda t: t.encode("utf-32"),
}
_NARROW = sorted(set(ENCODINGS) - {"utf-16", "utf-16-be", "utf-32"})


def test_base64_inside_a_utf16_attachment_is_read(tmp_path: Path) -> None:
    """A note saved as UTF-16 by a Windows tool, holding a log line with the phone in base64."""
    text = "Note 0: log payload=" + base64.b64encode(PHONE.encode()).decode() + " asked about the order."
    assert KIND_INDEX["phone"] in _found(tmp_path, {"note-utf16.txt": text.encode("utf-16")})


@settings(
    max_examples=budget.examples(80),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    kind=st.sampled_from(sorted(SPELLINGS)),
    pick=st.integers(0, 9),
    inner=st.sampled_from(_NARROW),
    wide=st.sampled_from(sorted(WIDE)),
    container=st.sampled_from(["file", "gzip", "zip", "base64-attachment"]),
)
def test_every_text_encoding_inside_wide_text_is_read(
    tmp_path_factory: pytest.TempPathFactory, kind: str, pick: int, inner: str, wide: str, container: str
) -> None:
    """Wide text (UTF-16/32, with or without a byte order mark) is a view like the others: what is
    escaped or base64-encoded inside it is decoded too, in any container."""
    spelling = SPELLINGS[kind][pick % len(SPELLINGS[kind])]
    data = CONTAINERS[container](WIDE[wide](ENCODINGS[inner](spelling).decode("utf-8")))
    found = _found(tmp_path_factory.mktemp("wide"), {"attachment.bin": data})
    assert KIND_INDEX[kind] in found or (kind == "phone" and 3 in found), (spelling, inner, wide, container)
