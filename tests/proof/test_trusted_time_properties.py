"""Tampered RFC 3161 tokens, generated: a bit flipped in the imprint, the genTime, the signed
messageDigest or the TSA's signature of a real token (OpenSSL's TSA) is refused by our verifier AND by
the oracle, `openssl ts -verify`, written apart from our DER reader; a bit flipped anywhere is never
accepted by us when openssl refuses it, and never breaks our check with anything but a TimestampError.

The regions are found by byte patterns of the DER (not by our reader), so a reader that misplaces a
field cannot also misplace the test."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proof.tsa import TimestampAuthority
from proof.verify.errors import TimestampError
from proof.verify.timestamp import check_token, load_roots
from tests import budget
from tests.tsa_fixtures import TestTsa, openssl_ts_verify

SIGNATURE = b"\x30\x44" + bytes(range(70))  # what the token stamps: an envelope's signature bytes
MESSAGE_DIGEST_ATTR = bytes.fromhex("06092a864886f70d010904") + b"\x31\x22\x04\x20"


@dataclass(frozen=True)
class Stamped:
    token: bytes
    root: Path
    work: Path
    regions: dict[str, tuple[int, int]]


def _regions(token: bytes) -> dict[str, tuple[int, int]]:
    imprint = token.index(hashlib.sha256(SIGNATURE).digest())
    gen = re.search(rb"\x18\x0f(\d{14}Z)", token)
    assert gen is not None
    md = token.index(MESSAGE_DIGEST_ATTR) + len(MESSAGE_DIGEST_ATTR)
    sig = next(
        len(token) - k for k in range(64, 75) if token[-k - 2] == 0x04 and token[-k - 1] == k and token[-k] == 0x30
    )
    return {
        "imprint": (imprint, imprint + 32),
        "genTime": (gen.start(1), gen.end(1)),
        "messageDigest": (md, md + 32),
        "signature": (sig, len(token)),
    }


@pytest.fixture(scope="module")
def stamped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stamped]:
    tsa = TestTsa.start(tmp_path_factory.mktemp("tsa"), "oracle")
    try:
        token = TimestampAuthority(tsa.url, tsa.root.read_bytes()).timestamp(SIGNATURE)
        yield Stamped(token, tsa.root, tmp_path_factory.mktemp("oracle"), _regions(token))
    finally:
        tsa.stop()


def _ours(token: bytes, root: Path) -> bool:
    try:
        check_token(token, SIGNATURE, load_roots(root.read_bytes()), "t")
    except TimestampError:
        return False
    return True


def _flip(token: bytes, at: int, bit: int) -> bytes:
    out = bytearray(token)
    out[at] ^= 1 << bit
    return bytes(out)


def test_the_untampered_token_passes_both(stamped: Stamped) -> None:
    assert _ours(stamped.token, stamped.root)
    assert openssl_ts_verify(stamped.token, SIGNATURE, stamped.root, stamped.work)


@settings(max_examples=budget.examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    region=st.sampled_from(["imprint", "genTime", "messageDigest", "signature"]),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    bit=st.integers(min_value=0, max_value=7),
)
def test_a_bit_flipped_in_a_signed_field_is_refused_by_us_and_by_openssl(
    stamped: Stamped, region: str, where: float, bit: int
) -> None:
    start, end = stamped.regions[region]
    tampered = _flip(stamped.token, start + int(where * (end - start)), bit)
    assert not _ours(tampered, stamped.root)
    assert not openssl_ts_verify(tampered, SIGNATURE, stamped.root, stamped.work)


@settings(max_examples=budget.examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(min_value=0, max_value=1, exclude_max=True), bit=st.integers(min_value=0, max_value=7))
def test_a_bit_flipped_anywhere_is_never_accepted_by_us_when_openssl_refuses_it(
    stamped: Stamped, where: float, bit: int
) -> None:
    tampered = _flip(stamped.token, int(where * len(stamped.token)), bit)
    ours = _ours(tampered, stamped.root)  # raises anything but TimestampError: the test fails
    if ours:
        assert openssl_ts_verify(tampered, SIGNATURE, stamped.root, stamped.work)


@pytest.mark.parametrize("rsa_key", [False, True], ids=["ecdsa-tsa", "rsa-tsa"])
def test_every_single_bit_flip_we_accept_openssl_accepts_too(tmp_path: Path, rsa_key: bool) -> None:
    """All 8 x len(token) one-bit flips of a real token, exhaustively (a few seconds): whatever our
    check accepts, `openssl ts -verify` accepts (this sweep found the NULL parameters, the SignerInfo
    version and the certificates off the chain that our first reader let through)."""
    tsa = TestTsa.start(tmp_path / "tsa", "sweep", rsa_key=rsa_key)
    try:
        token = TimestampAuthority(tsa.url, tsa.root.read_bytes()).timestamp(SIGNATURE)
    finally:
        tsa.stop()
    accepted = [(at, bit) for at in range(len(token)) for bit in range(8) if _ours(_flip(token, at, bit), tsa.root)]
    disagree = [
        (at, bit) for at, bit in accepted if not openssl_ts_verify(_flip(token, at, bit), SIGNATURE, tsa.root, tmp_path)
    ]
    assert disagree == []
    # every flip is refused but one: PKIStatus granted (0) -> grantedWithMods (1), which no one signs
    assert accepted == [(8, 0)]
