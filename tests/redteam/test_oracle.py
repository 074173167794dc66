"""The red team's oracle (tests/oracle.py) is not blind: every planted spelling of every identifier, in
every encoding, in every container, is found in a folder; and a control text that spells nobody (only
near misses) is found in none of them. Also on the real frameworks' files: a LangGraph checkpoint
(msgpack, a message long enough to spill over SQLite overflow pages), a mem0-style pickle, a Chroma-style
SQLite row."""

from __future__ import annotations

import base64
import bz2
import gzip
import io
import json
import lzma
import pickle
import quopri
import sqlite3
import urllib.parse
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import budget
from tests.oracle import scan_bytes, scan_text, scan_tree
from tests.oracle_person import Person, canonical_forms, split_phone

JANE = Person(id="usr-jd-4471", email="jane.doe@mail.example", name="Jane Doe", phone="+44 20 7946 0001")
JUERGEN = Person(id="kunde-2231", email="j.mueller@post.example", name="Jürgen Weiß", phone="+49 30 1234 5678")

SPELLINGS: dict[str, list[tuple[Person, str, str]]] = {
    "id": [
        (JANE, "usr-jd-4471", "id"),
        (JANE, "USR_JD_4471", "id"),
        (JANE, "usr jd 4471", "id"),
        (JANE, "ｕｓｒ－ｊｄ－４４７１", "id"),
        (JANE, "usr\u2011jd\u20114471", "id"),
        (JUERGEN, "KUNDE-2231", "id"),
    ],
    "email": [
        (JANE, "jane.doe@mail.example", "email"),
        (JANE, "JANE.DOE@MAIL.EXAMPLE", "email"),
        (JANE, "jane.doe+newsletter@mail.example", "email"),
        (JANE, "jane.doe\u200b@mail.example", "email"),
        (JUERGEN, "J.Mueller@Post.Example", "email"),
    ],
    "name": [
        (JANE, "Jane Doe", "name"),
        (JANE, "Doe, Jane", "name"),
        (JANE, "JANE\tDOE", "name"),
        (JANE, "Jane\r\nDoe", "name"),
        (JANE, "Jane\u00a0Doe", "name"),
        (JANE, "Jane Do\u00ade", "name"),
        (JANE, "jane.doe", "name"),
        (JANE, "ticket-jane-doe-0042", "name"),
        (JANE, "Jane.Doe/inbox/77", "name"),
        (JANE, "Jane\u200bDoe", "name"),
        (JUERGEN, "Jürgen Weiß", "name"),
        (JUERGEN, "Juergen Weiss", "name"),
        (JUERGEN, "Jurgen Weiss", "name"),
        (JUERGEN, "WEISS, JÜRGEN", "name"),
        (JUERGEN, "Ju\u0308rgen Weiss", "name"),
    ],
    "phone": [
        (JANE, "+44 20 7946 0001", "phone"),
        (JANE, "0044 20 7946 0001", "phone"),
        (JANE, "+44\u201120\u20117946\u20110001", "phone"),
        (JANE, "+44 (0)20 7946 0001", "phone"),
        (JANE, "(020) 7946 0001", "phone"),
        (JANE, "020\u20137946\u20130001", "phone"),
        (JANE, "442079460001", "phone"),
        (JANE, "+44.20.7946.0001", "phone"),
        (JUERGEN, "0049 (30) 1234-5678", "phone"),
        (JUERGEN, "030 12345678", "phone"),
    ],
}
CONTROLS = [
    "Jane Dow",
    "John Doe",
    "Janet Doeringer",
    "janet.doe@mail.examples",
    "jane.do@mail.example",
    "usr-jd-4472",
    "usr-jd-44710",
    "+44 20 7946 0002",
    "0044 20 7946 00011",
    "Jürgen Weißmann",
    "kunde-22310",
    "j.muller@post.example",
    "+49 30 1234 5679",
    "Weiss Bier",
    "the doe and the jane",
]


def sentence(spelling: str) -> str:
    return f"Pasted tool result \U0001f9fe: customer {spelling} asked about invoice 2231/7 (see ticket)."


# --- encodings: the sentence as a document's bytes ------------------------------------------------


def _json_all(s: str) -> bytes:
    out = []
    for c in s:
        b = c.encode("utf-16-be")
        out += [f"\\u{int.from_bytes(b[i : i + 2], 'big'):04x}" for i in range(0, len(b), 2)]
    return ('{"tool_result": "' + "".join(out) + '"}').encode()


def _json_ascii(s: str) -> bytes:
    return (
        json.dumps({"result": s.replace("@", "\u0040")}, ensure_ascii=True)
        .replace("@", "\\u0040")
        .replace("/", "\\/")
        .encode()
    )


def _html(s: str) -> bytes:
    named = {"@": "&commat;", ".": "&period;", ",": "&comma;", "\u00a0": "&nbsp;", "\u00ad": "&shy;"}
    return "".join(named.get(c, f"&#{ord(c)};" if i % 2 else f"&#x{ord(c):x};") for i, c in enumerate(s)).encode()


def _qp(s: str) -> bytes:
    raw = s.encode("utf-8")
    parts = [f"={b:02X}" for b in raw]
    return (
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
        + "=\r\n".join("".join(parts[i : i + 7]) for i in range(0, len(parts), 7)).encode()
        + b"\r\n"
    )


def _qp_std(s: str) -> bytes:
    return quopri.encodestring(("x" * 70 + " " + s).encode("utf-8"), quotetabs=True)


def _b64(prefix: bytes, alphabet: str) -> Callable[[str], bytes]:
    def enc(s: str) -> bytes:
        data = prefix + s.encode("utf-8")
        b = base64.urlsafe_b64encode(data) if alphabet == "url" else base64.b64encode(data)
        return b"2026-12-02T10:00:00Z INFO payload=" + b + b" done\n"

    return enc


def _b64_glued(junk: str) -> Callable[[str], bytes]:
    def enc(s: str) -> bytes:
        return b"token:" + junk.encode() + base64.b64encode(s.encode("utf-8")).rstrip(b"=") + b"\n"

    return enc


ENCODINGS: dict[str, Callable[[str], bytes]] = {
    "raw": lambda s: s.encode("utf-8"),
    "json-all-escaped": _json_all,
    "json-ascii": _json_ascii,
    "percent": lambda s: ("https://crm.example/c?q=" + urllib.parse.quote(s, safe="")).encode(),
    "percent-plus": lambda s: ("q=" + urllib.parse.quote_plus(s)).encode(),
    "html-entities": _html,
    "quoted-printable": _qp,
    "quoted-printable-std": _qp_std,
    "base64": _b64(b"", "std"),
    "base64+1": _b64(b"\x01", "std"),
    "base64+2": _b64(b"\x01\x02", "std"),
    "base64url": _b64(b"", "url"),
    "base64url+1": _b64(b"!", "url"),
    "base64-glued-1": _b64_glued("a"),
    "base64-glued-2": _b64_glued("ab"),
    "base64-glued-3": _b64_glued("abc"),
    "utf-16-le": lambda s: s.encode("utf-16-le"),
    "utf-16-be": lambda s: s.encode("utf-16-be"),
    "utf-16-bom-odd": lambda s: b"\x07" + s.encode("utf-16"),
    "utf-32-le": lambda s: s.encode("utf-32-le"),
    "utf-32-be": lambda s: b"\x00\x01" + s.encode("utf-32-be"),
    "latin-1": lambda s: s.encode("latin-1", "replace"),
    "json-in-base64": lambda s: b"data=" + base64.b64encode(_json_all(s)),
}


# --- containers: the document's bytes as a file's bytes -------------------------------------------


def _zip(method: int) -> Callable[[bytes], bytes]:
    def make(data: bytes) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=method) as zf:
            zf.writestr("notes/readme.txt", b"nothing to see")
            zf.writestr("notes/customer.txt", data)
        return buf.getvalue()

    return make


def _pdf(data: bytes) -> bytes:
    stream = zlib.compress(b"BT /F1 12 Tf 72 712 Td (" + data + b") Tj ET")
    return (
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\n2 0 obj\n<< /Length "
        + str(len(stream)).encode()
        + b" /Filter /FlateDecode >>\nstream\n"
        + stream
        + b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
    )


def _pdf_raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = c.compress(data) + c.flush()
    return b"%PDF-1.7\n3 0 obj\n<< /Filter /FlateDecode >>\nstream\r\n" + stream + b"\r\nendstream\n"


def _sqlite(tmp: Path) -> Callable[[bytes], bytes]:
    def make(data: bytes) -> bytes:
        p = tmp / "cell.sqlite"
        p.unlink(missing_ok=True)
        conn = sqlite3.connect(p)
        conn.execute("CREATE TABLE t(k TEXT, v BLOB)")
        conn.execute("INSERT INTO t VALUES ('a', ?)", (b"x" * 9000 + data,))  # spills onto overflow pages
        conn.commit()
        conn.close()
        return p.read_bytes()

    return make


def _nested(data: bytes) -> bytes:
    """zip member holding a gzip file: two containers deep."""
    return _zip(zipfile.ZIP_DEFLATED)(gzip.compress(data))


CONTAINERS: dict[str, Callable[[bytes], bytes]] = {
    "file": lambda d: d,
    "gzip": gzip.compress,
    "zlib-inside-junk": lambda d: b"\x00junk\xff" + zlib.compress(d) + b"\xfftrailer",
    "pdf-flatedecode": _pdf,
    "pdf-raw-deflate": _pdf_raw_deflate,
    "zip-deflated": _zip(zipfile.ZIP_DEFLATED),
    "zip-stored": _zip(zipfile.ZIP_STORED),
    "zip-bz2": _zip(zipfile.ZIP_BZIP2),
    "zip-lzma": _zip(zipfile.ZIP_LZMA),
    "bz2": bz2.compress,
    "xz": lambda d: lzma.compress(d, format=lzma.FORMAT_XZ),
    "pickle-p0": lambda d: pickle.dumps(d.decode("latin-1"), protocol=0),  # bytes as str, losslessly
    "pickle-p4": lambda d: pickle.dumps({"payload": d}, protocol=4),
    "zip>gzip": _nested,
}


def _planted(kind: str) -> list[tuple[Person, str, str]]:
    return SPELLINGS[kind]


def test_canonical_form_folds_what_software_writes() -> None:
    assert canonical_forms("Ｊａｎｅ\u00a0Do\u00adE") == ("jane doe",)
    assert "juergen weiss" in canonical_forms("Jürgen Weiß")
    assert "jurgen weiss" in canonical_forms("Ju\u0308rgen WEISS")
    assert canonical_forms("a\u2014b\u2011c\u2212d") == ("a-b-c-d",)
    assert canonical_forms("\ufeffa \t\r\n b\u200d") == ("a b",)


def test_phones_split_into_country_code_and_national_number() -> None:
    assert split_phone("+44 20 7946 0001") == ("44", "2079460001")
    assert split_phone("+44 (0)20 7946 0001") == ("44", "2079460001")
    assert split_phone("0049 30 1234 5678") == ("49", "3012345678")
    assert split_phone("+1 555 0100") == ("1", "5550100")
    assert split_phone("+351 912 345 678") == ("351", "912345678")
    assert split_phone("020 7946 0001") == ("", "2079460001")


def _combinations(kind: str, tmp: Path) -> list[tuple[Person, str, str, str, str, bytes]]:
    """Every encoding x every container for the first spelling of each person and kind; every other
    spelling in every encoding as a plain file and in every container as raw UTF-8 (pairwise: each
    spelling, encoding and container is read; the full product of the first spellings shows that the
    views nest)."""
    out = []
    firsts: set[str] = set()
    containers = {**CONTAINERS, "sqlite": _sqlite(tmp)}
    for person, spelling, expect in _planted(kind):
        full = person.id not in firsts
        firsts.add(person.id)
        for enc_name, enc in ENCODINGS.items():
            if enc_name == "latin-1" and any(ord(c) > 0xFF for c in spelling):
                continue  # not representable in Latin-1
            for cont_name, cont in containers.items():
                if full or cont_name == "file" or enc_name == "raw":
                    out.append((person, spelling, expect, enc_name, cont_name, cont(enc(sentence(spelling)))))
    return out


@pytest.mark.slow  # every container, images read by OCR: about 10 s a kind
@pytest.mark.parametrize("kind", sorted(SPELLINGS))
def test_every_spelling_in_every_encoding_in_every_container_is_found(kind: str, tmp_path: Path) -> None:
    missed: list[str] = []
    folder = tmp_path / "f"
    folder.mkdir()
    combos = _combinations(kind, tmp_path)
    assert len(combos) > 200
    for i, (person, spelling, expect, enc_name, cont_name, data) in enumerate(combos):
        path = folder / f"{i}.bin"
        path.write_bytes(data)
        found = scan_tree(folder, person)
        if expect not in found.kinds() or found.files() != {f"{i}.bin"}:
            missed.append(f"{kind} {spelling!r} / {enc_name} / {cont_name}: {sorted(found.kinds())}")
        path.unlink()
    assert not missed, f"{len(missed)} blind spots:\n" + "\n".join(missed[:40])


@pytest.mark.slow  # every container, OCR included
def test_nothing_is_found_in_a_control_without_the_subject(tmp_path: Path) -> None:
    false_hits: list[str] = []
    containers = {**CONTAINERS, "sqlite": _sqlite(tmp_path)}
    for n, control in enumerate(CONTROLS):
        for enc_name, enc in ENCODINGS.items():
            if enc_name == "latin-1" and any(ord(c) > 0xFF for c in control):
                continue
            doc = enc(sentence(control))
            for cont_name, cont in containers.items():
                if n and cont_name != "file" and enc_name != "raw":
                    continue  # the full product for the first control, pairwise for the others
                found = scan_bytes(cont(doc), JANE, JUERGEN)
                if found:
                    false_hits.append(f"{control!r} / {enc_name} / {cont_name}: {found.summary(3)}")
    assert not false_hits, "\n".join(false_hits[:40])


def test_depth_four_nesting_is_read() -> None:
    """base64 of a JSON document whose string escapes the email, in a gzip member, in a zip: found."""
    inner = base64.b64encode(_json_all("reach me at jane.doe@mail.example")).decode()
    doc = json.dumps({"log": f"blob={inner}"}).encode()
    data = _zip(zipfile.ZIP_DEFLATED)(gzip.compress(doc))
    assert "email" in scan_bytes(data, JANE).kinds()


def test_html_entities_percent_and_json_escapes_in_one_email() -> None:
    for text in (
        "jane.doe&#x40;mail.example",
        "jane.doe&commat;mail.example",
        "jane.doe%40mail.example",
        "jane.doe\\u0040mail.example",
        "jane.doe=40mail.example",
        "jane%2Edoe%40mail%2Eexample",
        "jane.doe%2540mail.example",
    ):
        assert "email" in scan_text(text, JANE).kinds(), text


def test_a_folder_scan_names_files_and_skips_excluded_folders(tmp_path: Path) -> None:
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "vault.db").write_text("Jane Doe")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "a.txt").write_text("nothing")
    (tmp_path / "store" / "b.gz").write_bytes(gzip.compress("Doe, Jane".encode("utf-16")))
    found = scan_tree(tmp_path, JANE, exclude=["engine"])
    assert found.files() == {"store/b.gz"}
    assert scan_tree(tmp_path, JANE).files() == {"store/b.gz", "engine/vault.db"}


def test_a_langgraph_checkpoint_and_a_long_message_are_read(tmp_path: Path) -> None:
    """A real SqliteSaver checkpoint (msgpack in a BLOB) holding the name JSON-escaped and, in a long
    message, the email across SQLite overflow pages: both found through the database's own cells."""
    from tests.langgraph_sqlite_fixtures import chat_graph, open_saver, thread_config

    path = tmp_path / "checkpoints.sqlite"
    with open_saver(path) as saver:
        graph = chat_graph(saver)
        pasted = json.dumps({"tool": "crm", "contact": "Jane Doe"}).replace("Jane", "\\u004aane")
        graph.invoke({"messages": [("user", f"tool said {pasted}")]}, thread_config("t-1", "usr-other-1"))
        graph.invoke(
            {"messages": [("user", "lorem " * 2000 + " jane.doe@mail.example " + "ipsum " * 2000)]},
            thread_config("t-2", "usr-other-1"),
        )
    found = scan_tree(tmp_path, JANE)
    assert {"name", "email"} <= found.kinds(), found.summary()
    assert not scan_tree(tmp_path, JUERGEN)


def test_a_chroma_store_is_read(tmp_path: Path) -> None:
    """A real Chroma PersistentClient folder with a document under another user id: the percent-encoded
    email in it is found (SQLite cells, the queue, full-text index)."""
    from tests import chroma_fixtures

    c = chroma_fixtures.reopen(tmp_path / "chroma")
    try:
        col = c.get_or_create_collection("notes", embedding_function=chroma_fixtures.hash_embedding())
        col.add(
            ids=["n-1", "n-2"],
            documents=["link https://crm.example/c/jane.doe%40mail.example", "nothing about anybody"],
            metadatas=[{"user_id": "usr-bob-9"}, {"user_id": "usr-bob-9"}],
        )
    finally:
        c.close()
    assert "email" in scan_tree(tmp_path / "chroma", JANE).kinds()


def test_a_view_is_read_in_pieces_cut_at_junk_runs_and_nothing_is_lost() -> None:
    """Tokens parted by four control characters still match; a needle right beside a long junk run too."""
    assert "name" in scan_bytes(b"\x01\x02\x03\x04\x05\x06Jane\x01\x02\x03\x04Doe\x00\x00\x00\x00\x00", JANE).kinds()
    assert "email" in scan_bytes(b"\xff" * 9 + b"jane.doe%40mail.example" + b"\x00" * 9, JANE).kinds()
    assert not scan_bytes(b"Jane\x01\x02\x03\x04\x05Doe", JANE), "five junk characters part two tokens"


@settings(max_examples=budget.examples(60), deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([s for kind in SPELLINGS.values() for s in kind]),
            st.sampled_from(sorted(ENCODINGS)),
            st.binary(min_size=0, max_size=40),
        ).filter(lambda p: p[1] != "latin-1" or all(ord(c) <= 0xFF for c in p[0][1])),  # as `_cases` skips
        min_size=1,
        max_size=6,
    )
)
def test_needles_in_several_encodings_amid_binary_noise_are_all_found(
    pieces: list[tuple[tuple[Person, str, str], str, bytes]],
) -> None:
    """A blob such as a database page: several needles, each in its own encoding, between runs of binary
    noise: every one is found (the pieces are unescaped apart, never lost between them)."""
    blob = b"".join(
        noise + b"\x00" * 6 + ENCODINGS[enc](sentence(spelling)) + b"\x00" * 6
        for (_, spelling, _), enc, noise in pieces
    )
    found = scan_bytes(blob, JANE, JUERGEN)
    for (person, spelling, expect), enc, _ in pieces:
        got = {h.kind for h in found.hits if h.who == person.id}
        assert expect in got, (spelling, enc, sorted(got))
