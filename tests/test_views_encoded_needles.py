"""The decoded views find an identifier in every character-mapping encoding by encoding the needle (one
hyperscan pass over the raw bytes), and in base64 by decoding every run in bulk: checked against an
oracle written apart, which decodes the haystack with the standard library (`urllib.parse.unquote`,
`json`, `html.unescape`, `quopri`, `base64` at each offset of each run) and searches it."""

from __future__ import annotations

import base64
import html
import json
import quopri
import re
import string
import tempfile
from pathlib import Path
from urllib.parse import unquote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.views import scan_views

LOCAL = st.text(string.ascii_lowercase + string.digits, min_size=3, max_size=10)
DOMAIN = st.text(string.ascii_lowercase, min_size=3, max_size=8)
ENCODINGS = ("raw", "percent", "json", "html", "quoted-printable", "base64", "base64url")
NAMED = {"@": "&commat;", ".": "&period;", "-": "&hyphen;"}


def _escape_some(draw: st.DrawFn, text: str, encoding: str) -> str:
    """`text` with a drawn subset of its characters escaped, each in one of the encoding's forms."""
    out = []
    for c in text:
        if not draw(st.booleans()):
            out.append(c)
            continue
        point = ord(c)
        if encoding == "percent":
            out.append(draw(st.sampled_from([f"%{point:02X}", f"%{point:02x}"])))
        elif encoding == "json":
            out.append(draw(st.sampled_from([f"\\u{point:04x}", f"\\u{point:04X}"])))
        elif encoding == "html":
            forms = [f"&#{point};", f"&#x{point:x};", f"&#X{point:X};", f"&#x{point:04x};"]
            out.append(draw(st.sampled_from(forms + ([NAMED[c]] if c in NAMED else []))))
        else:  # quoted-printable
            out.append(f"={point:02X}")
    return "".join(out)


@st.composite
def haystacks(draw: st.DrawFn) -> tuple[str, bytes]:
    """(the needle, a file): the needle or a near miss of it (one character changed), in a line of text,
    in one encoding (escapes partial and mixed in form), between random bytes."""
    needle = f"{draw(LOCAL)}@{draw(DOMAIN)}.example"
    planted = needle
    if not draw(st.booleans()):
        at = draw(st.integers(0, len(needle.split("@")[0]) - 1))
        planted = needle[:at] + ("x" if needle[at] != "x" else "y") + needle[at + 1 :]
    encoding = draw(st.sampled_from(ENCODINGS))
    line = f"{draw(st.text(string.ascii_letters + ' ', max_size=8))} to: {planted} ok"
    if encoding.startswith("base64"):
        raw = line.encode()
        body = base64.urlsafe_b64encode(raw) if encoding == "base64url" else base64.b64encode(raw)
    elif encoding == "raw":
        body = line.encode()
    else:
        body = _escape_some(draw, line, encoding).encode()
    noise = st.binary(max_size=200)
    return needle, draw(noise) + b"\n" + body + b"\n" + draw(noise)


_RUN = re.compile(rb"[A-Za-z0-9+/_\-]{8,}={0,2}")
_JSON_RUN = re.compile(r"(?:\\u[0-9a-fA-F]{4})+")


def _oracle(data: bytes, needle: str) -> bool:
    """Decode the haystack every way the standard library knows, then search it."""
    text = data.decode("latin-1")
    views = [text, unquote(text), html.unescape(text), _JSON_RUN.sub(lambda m: json.loads(f'"{m.group(0)}"'), text)]
    views.append(quopri.decodestring(data).decode("latin-1"))
    for run in _RUN.findall(data):
        core = run.rstrip(b"=").replace(b"-", b"+").replace(b"_", b"/")
        for offset in range(3):
            piece = core[offset:]
            piece = piece[: len(piece) - len(piece) % 4 if len(piece) % 4 == 1 else len(piece)]
            try:
                views.append(base64.b64decode(piece + b"=" * (-len(piece) % 4)).decode("latin-1"))
            except ValueError:
                continue
    pattern = re.compile(r"(?<![\w.+\-])" + re.escape(needle) + r"(?![\w\-])", re.IGNORECASE)
    return any(pattern.search(v) for v in views)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=haystacks())
def test_one_pass_finds_an_encoded_identifier_exactly_when_the_decoding_oracle_does(
    tmp_path: Path, case: tuple[str, bytes]
) -> None:
    needle, data = case
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    (folder / "blob").write_bytes(data)
    found = bool(scan_views(folder, [("identifier", needle)]).found)
    assert found == _oracle(data, needle), (needle, data)


def test_an_escaped_needle_is_found_without_a_generic_escape_trigger(tmp_path: Path) -> None:
    """A JSON string that escapes only the `@` and one letter, and a page of other escapes around it: the
    needle's own escaped spelling opens the window (there is no trigger on escapes as such)."""
    noise = "".join(f"\\u{ord(c):04x}" for c in "unrelated words") * 50
    (tmp_path / "a.json").write_text('{"x": "' + noise + ' mail: j\\u0061ne.doe\\u0040post.example"}')
    assert scan_views(tmp_path, [("identifier", "jane.doe@post.example")]).found == {0: 1}


def test_base64_at_every_alignment_inside_other_text(tmp_path: Path) -> None:
    for k in range(3):
        body = base64.b64encode(("x" * k + " jane.doe@post.example ").encode()).decode()
        (tmp_path / f"{k}.log").write_text(f"INFO payload={body} done")
    report = scan_views(tmp_path, [("identifier", "jane.doe@post.example")])
    assert report.found == {0: 1}  # once: a needle found is not looked for again


def test_a_namesakes_given_name_or_another_id_sharing_a_word_opens_no_window() -> None:
    """Every hit of a name holds its family name and its given name, every hit of an id all its words in
    order: a namesake's given name, or `user-000123` for the id `subj-zz-000123`, is no trigger (on the
    100k store these opened 44,000 windows for a person the store did not hold)."""
    from probes.matcher import GENERIC_NAMES, Matcher

    matcher = Matcher([("identifier", "Farid Quillfeather"), ("identifier", "subj-zz-000123")])

    def needle_hits(data: bytes) -> list[int]:
        return [p for p, _e in matcher.triggers(data) if p >= len(GENERIC_NAMES)]

    assert needle_hits(b"farid.wenquibra@example.org; Farid Wenquibra; user-000123; zz 000123") == []
    assert needle_hits(b"Quillfeather") and needle_hits(b"SUBJ_ZZ_000123") and needle_hits(b"subj%2Dzz%2D000123")
