"""Issue 23 item 8: the sealed pack's digest was malleable without any key, and the requester's email
quoted it. An ECDSA signature re-encoded as (r, n - s), a changed tar mtime or uid, mode 4755 on a
member (setuid-root files when extracted as root), a gzip header mtime or OS byte, another deflate
level: all printed `OK`, each with a new sha256.

Rules: a pack is named by the digest of what is signed (the engine's statement), not by its
container bytes; signatures are low-s and high-s is refused; any member mode other than the writer's
and any tar or gzip header field the writer does not write is refused. Done when: a property test
mutates the container fields (gzip header, tar header fields, signature encodings) and every mutation
is refused or leaves the pack's name unchanged.

Every attack below is applied to a genuine pack; the pack's name is computed here apart from the
verifier (sha256 of the engine envelope's payload, read with tarfile and json)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import struct
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proof import verify
from proof.keys import load_private_key, sign
from proof.pack import attest, write_pack
from proof.review import summary
from tests import budget
from tests.proof_fixtures import Keys, make_evidence, make_keys

N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
"""The order of P-256 (FIPS 186-4 D.1.2.3), written here, not taken from the code under test."""
WRITER_GZIP_HEADER = bytes.fromhex("1f8b08000000000000ff")
"""deflate, no flags, mtime 0, XFL 0 (level 6), OS 255 (unknown): what Python's GzipFile writes."""
BLOCK = 512


# --- a genuine pack, and the name computed apart ---------------------------------------------------


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return make_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def engine_only(tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> bytes:
    return write_pack(make_evidence(tmp_path_factory.mktemp("e")), keys.engine).read_bytes()


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> bytes:
    pack = write_pack(make_evidence(tmp_path_factory.mktemp("s")), keys.engine)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub, attested_at="2024-02-02T10:00:00Z")
    return pack.read_bytes()


def members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        out = {}
        for m in tar.getmembers():
            if m.isfile():
                fh = tar.extractfile(m)
                assert fh is not None
                out[m.name.split("/", 1)[1]] = fh.read()
        return out


def name_of(data: bytes) -> str:
    """The pack's name by the rule: sha256 of the engine's signed statement (the envelope's payload)."""
    env = json.loads(members(data)["signatures/engine.intoto.json"])
    return hashlib.sha256(base64.b64decode(env["payload"])).hexdigest()


def outcome(data: bytes, keys: Keys, *, dpo: bool) -> str:
    """`refused` or the name the verifier reports for a pack that passed."""
    try:
        result = verify.verify_bytes(data, keys.engine_pem, keys.dpo_pem if dpo else None, require_dpo=dpo)
    except verify.PackError:
        return "refused"
    return result.pack_name


# --- container surgery -----------------------------------------------------------------------------


def gzip_member(
    tar: bytes,
    *,
    header: bytes = WRITER_GZIP_HEADER,
    level: int = 6,
    wbits: int = -15,
    strategy: int = zlib.Z_DEFAULT_STRATEGY,
) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, wbits, 9, strategy)
    return header + c.compress(tar) + c.flush() + struct.pack("<II", zlib.crc32(tar), len(tar) & 0xFFFFFFFF)


def headers(tar: bytes) -> list[int]:
    """Offsets of every tar header."""
    out, pos = [], 0
    while tar[pos : pos + BLOCK].strip(b"\0"):
        out.append(pos)
        size = int(tar[pos + 124 : pos + 135], 8)
        pos += BLOCK + -(-size // BLOCK) * BLOCK
    return out


def set_field(tar: bytes, at: int, start: int, width: int, value: bytes) -> bytes:
    """Write `value` (padded with NULs to `width`) into the header at `at`, and fix its checksum."""
    block = bytearray(tar[at : at + BLOCK])
    block[start : start + width] = value.ljust(width, b"\0")[:width]
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return tar[:at] + bytes(block) + tar[at + BLOCK :]


def octal(n: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, n)


def retar(data: bytes, change: Callable[[bytes], bytes]) -> bytes:
    return gzip_member(change(gzip.decompress(data)))


def first_file(tar: bytes) -> int:
    return next(at for at in headers(tar) if tar[at + 156 : at + 157] in (b"0", b"\0"))


def high_s(sig: bytes) -> bytes:
    r, s = decode_dss_signature(sig)
    return encode_dss_signature(r, N - s)


def with_envelope(data: bytes, name: str, change: Callable[[dict[str, object]], None]) -> bytes:
    """The pack with one envelope's JSON changed (re-serialised as the writer does), tar rebuilt."""
    from proof.tarball import tar_gz_bytes

    files = members(data)
    env = json.loads(files[name])
    change(env)
    files[name] = (json.dumps(env, sort_keys=True, indent=2) + "\n").encode()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        top = tar.getmembers()[0].name.split("/")[0]
    return tar_gz_bytes(top, files)


def resigned_high_s(name: str) -> Callable[[dict[str, object]], None]:
    def change(env: dict[str, object]) -> None:
        sigs = env["signatures"]
        assert isinstance(sigs, list)
        sigs[0]["sig"] = base64.b64encode(high_s(base64.b64decode(sigs[0]["sig"]))).decode()

    return change


# --- the attacks, each on its own ------------------------------------------------------------------


def high_s_engine_signature(data: bytes) -> bytes:
    return with_envelope(data, "signatures/engine.intoto.json", resigned_high_s("engine"))


def high_s_dpo_signature(data: bytes) -> bytes:
    return with_envelope(data, "signatures/dpo.intoto.json", resigned_high_s("dpo"))


def tar_mtime_changed(data: bytes) -> bytes:
    return retar(data, lambda t: set_field(t, first_file(t), 136, 12, octal(1_700_000_000, 12)))


def tar_uid_changed(data: bytes) -> bytes:
    return retar(data, lambda t: set_field(t, first_file(t), 108, 8, octal(1000, 8)))


def tar_gid_changed(data: bytes) -> bytes:
    return retar(data, lambda t: set_field(t, first_file(t), 116, 8, octal(1000, 8)))


def tar_uname_root(data: bytes) -> bytes:
    return retar(data, lambda t: set_field(t, first_file(t), 265, 32, b"root"))


def tar_gname_wheel(data: bytes) -> bytes:
    return retar(data, lambda t: set_field(t, first_file(t), 297, 32, b"wheel"))


def setuid_mode_4755(data: bytes) -> bytes:
    return retar(data, lambda t: set_field(t, first_file(t), 100, 8, octal(0o4755, 8)))


def directory_mode_0777(data: bytes) -> bytes:
    return retar(data, lambda t: set_field(t, headers(t)[0], 100, 8, octal(0o777, 8)))


def gzip_header_mtime(data: bytes) -> bytes:
    return data[:4] + struct.pack("<I", 1_700_000_000) + data[8:]


def gzip_os_byte_unix(data: bytes) -> bytes:
    return data[:9] + b"\x03" + data[10:]


def gzip_xfl_byte(data: bytes) -> bytes:
    return data[:8] + b"\x02" + data[9:]


ATTACKS_REFUSED = {
    f.__name__: f
    for f in (
        high_s_dpo_signature,
        tar_mtime_changed,
        tar_uid_changed,
        tar_gid_changed,
        tar_uname_root,
        tar_gname_wheel,
        setuid_mode_4755,
        directory_mode_0777,
        gzip_header_mtime,
        gzip_os_byte_unix,
        gzip_xfl_byte,
    )
}


@pytest.mark.parametrize("attack", ATTACKS_REFUSED.values(), ids=ATTACKS_REFUSED.keys())
def test_a_container_attack_on_a_sealed_pack_is_refused(
    sealed: bytes, keys: Keys, attack: Callable[[bytes], bytes]
) -> None:
    assert outcome(sealed, keys, dpo=True) == name_of(sealed)  # the genuine pack passes, by its name
    forged = attack(sealed)
    assert forged != sealed
    assert outcome(forged, keys, dpo=True) == "refused"


def test_a_high_s_engine_signature_is_refused(engine_only: bytes, keys: Keys) -> None:
    forged = high_s_engine_signature(engine_only)
    assert forged != engine_only
    with pytest.raises(verify.SignatureError, match="high-s"):
        verify.verify_bytes(forged, keys.engine_pem, None, require_dpo=False)


def test_another_deflate_level_keeps_the_name(sealed: bytes, keys: Keys) -> None:
    """The deflate level cannot be seen in the header (XFL aside): the bytes change, the name does not."""
    tar = gzip.decompress(sealed)
    other = gzip_member(tar, level=1)
    assert other != sealed
    assert outcome(other, keys, dpo=True) == name_of(sealed)


def test_the_name_survives_attestation_and_is_what_summary_and_the_cli_show(tmp_path: Path, keys: Keys) -> None:
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    before = name_of(pack.read_bytes())
    assert summary(pack, engine_pub=keys.engine_pub)["pack_name"] == before
    attest(pack, keys.dpo, engine_pub=keys.engine_pub)
    assert name_of(pack.read_bytes()) == before
    assert summary(pack, engine_pub=keys.engine_pub, dpo_pub=keys.dpo_pub)["pack_name"] == before
    assert "pack_sha256" not in summary(pack)


def test_the_writer_signs_low_s(tmp_path: Path, keys: Keys) -> None:
    key = load_private_key(keys.engine)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    for i in range(64):  # about half of raw ECDSA signatures are high-s
        _r, s = decode_dss_signature(sign(key, b"message %d" % i))
        assert 0 < s <= N // 2, i


# --- the property: every container mutation is refused or keeps the name ----------------------------

TAR_FIELDS = {
    "mode": (100, 8),
    "uid": (108, 8),
    "gid": (116, 8),
    "mtime": (136, 12),
    "uname": (265, 32),
    "gname": (297, 32),
    "devmajor": (329, 8),
    "devminor": (337, 8),
    "padding": (500, 12),
}


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, Callable[[bytes], bytes]]:
    kind = draw(st.sampled_from(["gzip-header", "tar-field", "deflate", "signature", "trailing-zeros"]))
    if kind == "gzip-header":
        pos = draw(st.integers(3, 9))
        value = draw(st.integers(0, 255))
        return f"gzip byte {pos} = {value}", lambda d: d[:pos] + bytes([value]) + d[pos + 1 :]
    if kind == "tar-field":
        fname = draw(st.sampled_from(sorted(TAR_FIELDS)))
        start, width = TAR_FIELDS[fname]
        index = draw(st.integers(0, 20))
        if fname in ("uname", "gname", "padding"):
            raw = draw(st.binary(min_size=0, max_size=width))
        else:
            raw = octal(draw(st.integers(0, 8 ** (width - 1) - 1)), width)

        def tar_change(d: bytes) -> bytes:
            def edit(t: bytes) -> bytes:
                hs = headers(t)
                return set_field(t, hs[index % len(hs)], start, width, raw)

            return retar(d, edit)

        return f"tar {fname} of header {index} = {raw!r}", tar_change
    if kind == "deflate":
        level = draw(st.integers(0, 9))
        strategy = draw(
            st.sampled_from([zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY, zlib.Z_RLE, zlib.Z_FIXED])
        )
        return (
            f"deflate level {level} strategy {strategy}",
            lambda d: gzip_member(gzip.decompress(d), level=level, strategy=strategy),
        )
    if kind == "trailing-zeros":
        extra = draw(st.integers(1, 4)) * BLOCK
        return f"{extra} more zero bytes after the archive", lambda d: gzip_member(gzip.decompress(d) + b"\0" * extra)
    which = draw(st.sampled_from(["signatures/engine.intoto.json", "signatures/dpo.intoto.json"]))
    how = draw(st.sampled_from(["high-s", "padded base64", "long-form DER length"]))

    def sig_change(env: dict[str, object]) -> None:
        sigs = env["signatures"]
        assert isinstance(sigs, list)
        raw = base64.b64decode(sigs[0]["sig"])
        if how == "high-s":
            sigs[0]["sig"] = base64.b64encode(high_s(raw)).decode()
        elif how == "padded base64":
            text = base64.b64encode(raw).decode()
            if text.endswith("="):  # the unused bits of the last character set: the same bytes decoded
                alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                core = text.rstrip("=")
                last = alphabet[alphabet.index(core[-1]) | 1]
                sigs[0]["sig"] = core[:-1] + last + text[len(core) :]
        else:  # SEQUENCE with a long-form length byte: BER, not DER
            assert raw[0] == 0x30 and raw[1] < 0x80
            sigs[0]["sig"] = base64.b64encode(b"\x30\x81" + raw[1:2] + raw[2:]).decode()

    return f"{how} {which}", lambda d: with_envelope(d, which, sig_change)


@settings(max_examples=budget.examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=mutations())
def test_every_container_mutation_is_refused_or_keeps_the_name(
    sealed: bytes, keys: Keys, mutation: tuple[str, Callable[[bytes], bytes]]
) -> None:
    what, change = mutation
    forged = change(sealed)
    got = outcome(forged, keys, dpo=True)
    assert got in ("refused", name_of(sealed)), what
