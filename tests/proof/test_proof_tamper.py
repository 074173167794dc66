"""Attacks on a proof pack's archive, one test per attack, each rejected by the named check of proof.verify:
changed bytes, files added, removed or renamed, hostile tar and gzip forms.

Baseline: a real, attested pack (ECDSA P-256 engine key, Ed25519 DPO key), `tests.tamper_fixtures`.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from proof import verify
from proof.verify import archive
from tests.proof_fixtures import (
    END_OF_ARCHIVE,
    finish_tar,
    gz,
    json_edit,
    pack_entries,
    raw_tar,
    repack,
    tar_blocks,
    tar_member,
)
from tests.tamper_fixtures import DPO_ENV, ENGINE_ENV, Pack, bump_first_digit, pack_fixture  # noqa: F401  (the fixture)

# --- single changed bytes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("request.json", "subjects"),
        ("steps.jsonl", "subjects"),
        ("verification.json", "subjects"),
        ("subprocessor-receipts.jsonl", "subjects"),
        ("audit-log-redaction.json", "subjects"),
        ("attestation.txt", "subjects"),
        ("manifest.json", "subjects"),
        ("SHA256SUMS", "subjects"),
        (ENGINE_ENV, "signature"),
        (DPO_ENV, "signature"),
    ],
)
def test_changed_byte_in_file(pack: Pack, name: str, check: str) -> None:
    files = {**pack.files, name: bump_first_digit(pack.files[name])}
    assert files[name] != pack.files[name]
    assert pack.check_of(repack(pack.top, files)) == check


# --- files added, removed, renamed ---------------------------------------------------------------


def test_file_added(pack: Pack) -> None:
    files = {**pack.files, "notes.txt": b"nothing to see\n"}
    assert pack.check_of(repack(pack.top, files), why="unexpected file notes.txt") == "archive"


def test_file_added_under_signatures(pack: Pack) -> None:
    extra = {**pack.files, "signatures/other.intoto.json": pack.files[ENGINE_ENV]}
    assert pack.check_of(repack(pack.top, extra), why="unexpected file signatures/other") == "archive"


def test_file_removed(pack: Pack) -> None:
    files = {k: v for k, v in pack.files.items() if k != "verification.json"}
    assert pack.check_of(repack(pack.top, files), why="missing file verification.json") == "archive"


def test_file_renamed(pack: Pack) -> None:
    files = {k: v for k, v in pack.files.items() if k != "steps.jsonl"}
    files["steps.json"] = pack.files["steps.jsonl"]
    assert pack.check_of(repack(pack.top, files), why="missing file steps.jsonl") == "archive"


def test_dpo_attestation_removed_when_required(pack: Pack) -> None:
    files = {k: v for k, v in pack.files.items() if k != DPO_ENV}
    assert pack.check_of(repack(pack.top, files), why="missing file signatures/dpo") == "archive"


# --- hostile archive entries ---------------------------------------------------------------------


def _with(pack: Pack, *extra: tarfile.TarInfo | tuple[str, bytes]) -> bytes:
    return raw_tar([*pack_entries(pack.top, pack.files), *extra])


def test_tar_with_dotdot_path(pack: Pack) -> None:
    assert pack.check_of(_with(pack, (f"{pack.top}/../../evil.sh", b"echo owned\n")), why="'..'") == "archive"


def test_tar_with_absolute_path(pack: Pack) -> None:
    assert pack.check_of(_with(pack, ("/tmp/evil.sh", b"echo owned\n")), why="absolute path") == "archive"


def test_tar_with_symlink(pack: Pack) -> None:
    link = tarfile.TarInfo(f"{pack.top}/notes.txt")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    assert pack.check_of(_with(pack, link), why="symlink") == "archive"


def test_tar_with_hard_link(pack: Pack) -> None:
    link = tarfile.TarInfo(f"{pack.top}/notes.txt")
    link.type, link.linkname = tarfile.LNKTYPE, f"{pack.top}/request.json"
    assert pack.check_of(_with(pack, link), why="hard link") == "archive"


def test_tar_with_device(pack: Pack) -> None:
    dev = tarfile.TarInfo(f"{pack.top}/null")
    dev.type, dev.devmajor, dev.devminor = tarfile.CHRTYPE, 1, 3
    assert pack.check_of(_with(pack, dev), why="device") == "archive"


def test_tar_with_fifo(pack: Pack) -> None:
    fifo = tarfile.TarInfo(f"{pack.top}/pipe")
    fifo.type = tarfile.FIFOTYPE
    assert pack.check_of(_with(pack, fifo), why="fifo") == "archive"


def test_tar_with_second_top_directory(pack: Pack) -> None:
    assert pack.check_of(_with(pack, ("other-request/request.json", b"{}")), why="top-level directory") == "archive"


def test_tar_with_duplicate_entry_overriding_a_file(pack: Pack) -> None:
    assert pack.check_of(_with(pack, (f"{pack.top}/verification.json", b"{}")), why="duplicate") == "archive"


def test_tar_with_oversized_file(pack: Pack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "MAX_FILE_BYTES", max(len(v) for v in pack.files.values()) - 1)
    assert pack.check_of(pack.path.read_bytes(), why="larger than") == "archive"


def test_tar_with_too_many_entries(pack: Pack) -> None:
    many = [(f"{pack.top}/junk/{i}", b"") for i in range(archive.MAX_ENTRIES + 1)]
    assert pack.check_of(_with(pack, *many), why="entries") == "archive"


def test_tar_with_decompression_bomb_in_a_pax_header(pack: Pack) -> None:
    """Refused at its header, before a byte of the 2 MiB is unpacked."""
    bomb = tarfile.TarInfo(f"{pack.top}/notes.txt")
    bomb.pax_headers = {"comment": "A" * (2 * 1024 * 1024)}  # 2 MiB of header, a few KiB gzipped
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(bomb, io.BytesIO(b""))
    data = gz(raw.getvalue())
    assert len(data) < 64 * 1024
    assert pack.check_of(data, why="pax") == "archive"


def test_not_a_gzip(pack: Pack) -> None:
    assert pack.check_of(b"PK\x03\x04 this is a zip, not a pack", why="not a readable tar.gz") == "archive"


def test_truncated_pack(pack: Pack) -> None:
    data = pack.path.read_bytes()
    assert pack.check_of(data[: len(data) // 2], why="not a readable tar.gz") == "archive"


def test_top_directory_renamed(pack: Pack) -> None:
    assert pack.check_of(repack("req-9999", pack.files), why="top directory") == "archive"


# --- the archive format: exactly one gzip member holding exactly one well-formed tar stream ----------


def _tampered_verification(pack: Pack) -> bytes:
    return json_edit(pack.files["verification.json"], lambda d: d.update(all_clear=False))


def _bad_checksum(header_and_data: bytes) -> bytes:
    return header_and_data[:148] + b"0000000\0" + header_and_data[156:]


def test_tar_that_gnu_tar_extracts_differently(pack: Pack, tmp_path: Path) -> None:
    """A genuine stream, a header with a bad checksum, then a tampered file: Python's tarfile stops at
    the bad header (so the genuine files verified), GNU tar skips it and overwrites the genuine file."""
    genuine = tar_blocks(pack.top, pack.files)
    tampered = _tampered_verification(pack)
    hostile = gz(
        finish_tar(
            genuine
            + _bad_checksum(tar_member(f"{pack.top}/notes.txt", b"x"))
            + tar_member(f"{pack.top}/verification.json", tampered)
        )
    )
    if shutil.which("tar"):
        (tmp_path / "hostile.tar.gz").write_bytes(hostile)
        subprocess.run(["tar", "-xzf", "hostile.tar.gz"], cwd=tmp_path, capture_output=True, check=False)
        assert (tmp_path / pack.top / "verification.json").read_bytes() == tampered  # what GNU tar leaves
    assert pack.check_of(hostile, why="checksum") == "archive"


def test_tar_with_a_member_after_the_end_of_archive(pack: Pack) -> None:
    genuine = finish_tar(tar_blocks(pack.top, pack.files))
    hostile = genuine + tar_member(f"{pack.top}/verification.json", _tampered_verification(pack)) + END_OF_ARCHIVE
    assert pack.check_of(gz(hostile), why="after the end of the archive") == "archive"


def test_tar_with_bytes_after_the_end_of_archive(pack: Pack) -> None:
    genuine = finish_tar(tar_blocks(pack.top, pack.files))
    assert pack.check_of(gz(genuine + b"\x01"), why="after the end of the archive") == "archive"


def test_tar_with_zero_padding_after_the_end_of_archive_verifies(pack: Pack) -> None:
    genuine = finish_tar(tar_blocks(pack.top, pack.files))
    verify.verify_bytes(gz(genuine + b"\0" * 20480), pack.keys.engine_pem, pack.keys.dpo_pem)


def test_tar_without_an_end_of_archive(pack: Pack) -> None:
    assert pack.check_of(gz(tar_blocks(pack.top, pack.files)), why="end-of-archive") == "archive"


def test_tar_with_a_lone_zero_block_between_members(pack: Pack) -> None:
    blocks = tar_blocks(pack.top, pack.files)
    hostile = finish_tar(blocks + b"\0" * 512 + tar_member(f"{pack.top}/notes.txt", b"x"))
    assert pack.check_of(gz(hostile), why="zero block") == "archive"


def test_tar_with_data_hidden_in_block_padding(pack: Pack) -> None:
    member = tar_member(f"{pack.top}/zz-notes.txt", b"x")
    hostile = finish_tar(tar_blocks(pack.top, pack.files) + member[:513] + b"hidden" + member[519:])
    assert pack.check_of(gz(hostile), why="padding") == "archive"


def test_gzip_with_a_second_member(pack: Pack) -> None:
    second = gz(finish_tar(tar_member(f"{pack.top}/verification.json", _tampered_verification(pack))))
    assert pack.check_of(pack.path.read_bytes() + second, why="after the gzip member") == "archive"


def test_gzip_with_trailing_bytes(pack: Pack) -> None:
    assert pack.check_of(pack.path.read_bytes() + b"\0\0\0\0", why="after the gzip member") == "archive"


def test_gzip_with_a_wrong_crc(pack: Pack) -> None:
    data = bytearray(pack.path.read_bytes())
    data[-8] ^= 0xFF
    assert pack.check_of(bytes(data), why="CRC") == "archive"


def test_tar_with_a_pax_extended_header(pack: Pack) -> None:
    member = tar_member(f"{pack.top}/notes.txt", b"x", fmt=tarfile.PAX_FORMAT, pax={"comment": "hi"})
    hostile = finish_tar(tar_blocks(pack.top, pack.files) + member)
    assert pack.check_of(gz(hostile), why="pax") == "archive"


def test_tar_with_a_pax_sparse_size_of_40k_digits(pack: Pack) -> None:
    """CVE-2024-6232: this Python's tarfile spent 37 s in its pax header regex on such a header."""
    member = tar_member(
        f"{pack.top}/notes.txt",
        b"",
        fmt=tarfile.PAX_FORMAT,
        pax={"GNU.sparse.size": "9" * 40_000, "GNU.sparse.map": "0," * 20_000},
    )
    hostile = gz(finish_tar(member))
    started = time.monotonic()
    assert pack.check_of(hostile, why="pax") == "archive"
    assert time.monotonic() - started < 2


def test_tar_with_a_gnu_long_name(pack: Pack) -> None:
    deep = f"{pack.top}/" + "d/" * 20_000 + "f.json"
    member = tar_member(deep, b"{}", fmt=tarfile.GNU_FORMAT)
    assert pack.check_of(gz(finish_tar(member)), why="ustar") == "archive"


def test_tar_with_a_gnu_header(pack: Pack) -> None:
    assert pack.check_of(raw_tar(pack_entries(pack.top, pack.files), fmt=tarfile.GNU_FORMAT), why="ustar") == "archive"


def test_tar_nested_deeper_than_the_pack_layout(pack: Pack) -> None:
    hostile = finish_tar(tar_blocks(pack.top, pack.files) + tar_member(f"{pack.top}/a/b/c.json", b"{}"))
    assert pack.check_of(gz(hostile), why="deep") == "archive"


def test_tar_with_a_binary_size_field(pack: Pack) -> None:
    member = bytearray(tar_member(f"{pack.top}/zz-notes.txt", b"x"))
    member[124:136] = b"\x80" + b"\0" * 10 + b"\x01"  # GNU base-256: 1 byte
    chk = sum(member[:148]) + 8 * 32 + sum(member[156:512])
    member[148:156] = b"%06o\0 " % chk
    hostile = finish_tar(tar_blocks(pack.top, pack.files) + bytes(member))
    assert pack.check_of(gz(hostile), why="octal") == "archive"


def test_tar_with_a_name_outside_the_pack_alphabet(pack: Pack) -> None:
    hostile = finish_tar(tar_blocks(pack.top, pack.files) + tar_member(f"{pack.top}/verificat\u0456on.json", b"{}"))
    assert pack.check_of(gz(hostile), why="character") == "archive"


def test_tar_with_a_file_larger_than_the_limit_is_refused_before_reading(pack: Pack) -> None:
    member = bytearray(tar_member(f"{pack.top}/request.json", b""))
    member[124:136] = b"%011o\0" % (7 * 1024 * 1024 * 1024)  # 7 GiB announced, nothing behind it
    chk = sum(member[:148]) + 8 * 32 + sum(member[156:512])
    member[148:156] = b"%06o\0 " % chk
    assert pack.check_of(gz(bytes(member)), why="larger than") == "archive"
