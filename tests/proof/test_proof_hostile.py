"""Hostile input against the offline verifier as a regulator runs it (`python -m proof.verify` in a
process of its own): every input ends in exactly one `FAIL: <check>: <why>` line on stdout and exit 1,
never a traceback; memory and time stay bounded (peak RSS of the process measured); nothing taken from
a pack reaches the terminal unescaped, here and in `erasure pack`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app as erasure_app
from cli.pack import app as pack_app
from erasure.errors import ConfigError
from proof.pack import attest, write_pack
from tests.proof_fixtures import (
    Keys,
    finish_tar,
    gz,
    json_edit,
    make_evidence,
    make_keys,
    read_members,
    repack,
    reseal,
    tar_blocks,
    tar_member,
)

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
PEAK_LIMIT_KIB = 256 * 1024
ENGINE_ENV, DPO_ENV = "signatures/engine.intoto.json", "signatures/dpo.intoto.json"

# Public keys on curves `cryptography` cannot load (it raises UnsupportedAlgorithm, not ValueError),
# made with `openssl ecparam -name secp112r1 -genkey` and `openssl genpkey -algorithm SM2`.
SECP112R1_PUB = b"""-----BEGIN PUBLIC KEY-----
MDIwEAYHKoZIzj0CAQYFK4EEAAYDHgAEASpeveRg9Gj2tjvgoL8pQ1Hctbx+OTk+
8OApiQ==
-----END PUBLIC KEY-----
"""
SM2_PUB = b"""-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoEcz1UBgi0DQgAEJO+WkrrFv5JfLsBgAkaeYeKWMDN5
5+lZWFjr7keRJo1UYD1Jr37NHvO2Vb5ZUsBfpZYLu8HBePIBuIleCtcV8Q==
-----END PUBLIC KEY-----
"""
TERMINAL_TRICK = "\x1b[2K\rOK\x1b[8m"  # erase the line, carriage return, "OK", then hide what follows
# Peak RSS of the verifier's own process: VmHWM of its memory map (getrusage's ru_maxrss would also
# count the pytest process it was spawned from: Linux carries the old map's high-water mark over exec).
_MEASURE = (
    "import re, resource, sys\n"
    "from proof import verify\n"
    "rc = verify.main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "try:\n"
    "    with open('/proc/self/status') as fh:\n"
    "        peak = int(re.search(r'VmHWM:\\s+(\\d+) kB', fh.read()).group(1))\n"
    "except OSError:\n"
    "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "print('MAXRSS', peak, file=sys.stderr)\n"
    "sys.exit(rc)\n"
)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    peak_kib: int


def run_verifier(
    pack: Path | str,
    keys: Keys,
    *,
    engine: Path | str | None = None,
    dpo: Path | str | None = None,
    no_dpo: bool = False,
    encoding: str | None = None,
    timeout: float = 60,
) -> Run:
    """`python -m proof.verify` in its own process, and its own peak RSS (KiB)."""
    args = [str(pack), "--engine-key", str(engine or keys.engine_pub), "--audit-key", str(keys.audit_pub)]
    args += ["--no-dpo"] if no_dpo else ["--dpo-key", str(dpo or keys.dpo_pub)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONIOENCODING")}
    if encoding:
        env["PYTHONIOENCODING"] = encoding
    res = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args], cwd=ROOT, env=env, capture_output=True, timeout=timeout
    )
    stdout = res.stdout.decode("ascii", "backslashreplace")
    stderr = res.stderr.decode("utf-8", "backslashreplace")
    m = re.search(r"MAXRSS (\d+)", stderr)
    return Run(res.returncode, stdout, stderr, int(m.group(1)) if m else -1)


def assert_one_fail_line(run: Run, check: str, why: str = "") -> str:
    """Exactly one line, `FAIL: <check>: <why>`, exit 1, no traceback, nothing a terminal would act on."""
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert run.stdout.endswith("\n") and run.stdout.count("\n") == 1, run.stdout
    line = run.stdout[:-1]
    assert line.startswith(f"FAIL: {check}: "), line
    assert why in line, line
    assert all(0x20 <= ord(c) < 0x7F for c in line), f"unescaped character in {line!r}"
    assert "broke this check" not in line, line  # a named refusal, not the safety net
    return line


@dataclass
class Genuine:
    keys: Keys
    path: Path
    top: str
    files: dict[str, bytes]
    tmp: Path

    def write(self, name: str, data: bytes) -> Path:
        out = self.tmp / name
        out.write_bytes(data)
        return out


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Genuine:
    tmp = tmp_path_factory.mktemp("hostile")
    keys = make_keys(tmp / "keys", "ecdsa-p256", dpo_algorithm="ed25519")
    path = write_pack(make_evidence(tmp, scenario="exceptions"), keys.engine)
    attest(path, keys.dpo, engine_pub=keys.engine_pub, attested_at="2024-02-02T10:00:00Z")
    top, files = read_members(path)
    return Genuine(keys, path, top, files, tmp)


def test_the_genuine_pack_verifies_in_little_memory(genuine: Genuine) -> None:
    run = run_verifier(genuine.path, genuine.keys)
    assert (run.returncode, run.stdout.split(":")[0]) == (0, "OK"), run.stderr
    assert 0 < run.peak_kib < PEAK_LIMIT_KIB


# --- 2. resources: limits checked before allocation, peak memory under 256 MiB ------------------


def _gzip_stream(path: Path, parts: list[bytes | tuple[int, int]]) -> Path:
    """Write one gzip member of `parts`: bytes, or (byte value, count) runs produced a MiB at a time."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with path.open("wb") as out:
        for part in parts:
            if isinstance(part, bytes):
                out.write(comp.compress(part))
                continue
            value, count = part
            chunk = bytes([value]) * MIB
            while count > 0:
                out.write(comp.compress(chunk[:count]))
                count -= MIB
        out.write(comp.flush())
    with path.open("r+b") as out:  # the writer's XFL and OS bytes (zlib writes level 9's and Unix's)
        out.seek(8)
        out.write(b"\x00\xff")
    return path


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.uname, info.gname = size, 0o644, "", ""
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict")


def test_gzip_bomb_of_one_large_member(genuine: Genuine) -> None:
    """300 MiB of zeros in a 300 KiB pack, announced as the audit-log evidence (once the one file that
    could be large): refused at its header, never unpacked."""
    size = 300 * MIB
    bomb = _gzip_stream(
        genuine.tmp / "bomb.tar.gz",
        [_header(f"{genuine.top}/audit-log-redaction.json", size), (0, size), b"\0" * 10240],
    )
    assert bomb.stat().st_size < MIB
    run = run_verifier(bomb, genuine.keys)
    assert_one_fail_line(run, "archive", "larger than")
    assert run.peak_kib < PEAK_LIMIT_KIB, f"peak {run.peak_kib // 1024} MiB"


def test_gzip_bomb_of_padding_after_the_end(genuine: Genuine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A genuine stream followed by zero padding without end: refused at the cap on unpacked bytes."""
    from proof import verify
    from proof.verify import archive

    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 4 * MIB)
    data = gz(tar_blocks(genuine.top, genuine.files) + b"\0" * (8 * MIB))
    with pytest.raises(verify.ArchiveError, match="unpacks to more than"):
        verify.verify_bytes(data, genuine.keys.engine_pem, genuine.keys.dpo_pem)


def test_json_that_expands_in_memory(genuine: Genuine) -> None:
    """18 MiB of `[],` is 6 million list objects once parsed (about 450 MiB)."""
    manifest = b"[" + b"[]," * (6 * MIB) + b"[]]"
    bomb = genuine.write("expand.tar.gz", repack(genuine.top, {**genuine.files, "manifest.json": manifest}))
    run = run_verifier(bomb, genuine.keys)
    assert_one_fail_line(run, "archive", "manifest.json")
    assert run.peak_kib < PEAK_LIMIT_KIB, f"peak {run.peak_kib // 1024} MiB"


def test_one_file_nested_20000_folders_deep(genuine: Genuine) -> None:
    deep = f"{genuine.top}/" + "d/" * 20_000 + "f.json"
    members = b"".join(
        tar_member(deep.replace("f.json", f"f{i}.json"), b"{}", fmt=tarfile.GNU_FORMAT) for i in range(20)
    )
    bomb = genuine.write("deep.tar.gz", gz(finish_tar(members)))
    run = run_verifier(bomb, genuine.keys, timeout=120)
    assert_one_fail_line(run, "archive")
    assert run.peak_kib < PEAK_LIMIT_KIB, f"peak {run.peak_kib // 1024} MiB"


def test_the_zero_device_as_the_pack(genuine: Genuine) -> None:
    run = run_verifier("/dev/zero", genuine.keys)
    assert_one_fail_line(run, "archive")
    assert run.peak_kib < PEAK_LIMIT_KIB


@pytest.mark.parametrize("role", ["engine", "dpo"])
def test_the_zero_device_as_a_key(genuine: Genuine, role: str) -> None:
    run = run_verifier(genuine.path, genuine.keys, **{role: "/dev/zero"})  # type: ignore[arg-type]
    assert_one_fail_line(run, "keys")
    assert run.peak_kib < PEAK_LIMIT_KIB


# --- 3. tracebacks instead of FAIL ------------------------------------------------------------------


def test_manifest_of_100k_nested_brackets(genuine: Genuine) -> None:
    bomb = genuine.write(
        "nested-manifest.tar.gz", repack(genuine.top, {**genuine.files, "manifest.json": b"[" * 100_000})
    )
    assert_one_fail_line(run_verifier(bomb, genuine.keys), "archive", "manifest.json")


def test_envelope_of_100k_nested_brackets(genuine: Genuine) -> None:
    bomb = genuine.write("nested-envelope.tar.gz", repack(genuine.top, {**genuine.files, ENGINE_ENV: b"[" * 100_000}))
    assert_one_fail_line(run_verifier(bomb, genuine.keys), "signature", "engine.intoto.json")


def test_payload_type_with_a_lone_surrogate(genuine: Genuine) -> None:
    env = json.loads(genuine.files[ENGINE_ENV])
    env["payloadType"] = "application/vnd.in-toto+json\ud800"
    files = {**genuine.files, ENGINE_ENV: json.dumps(env).encode()}  # ASCII, with a \ud800 escape
    bomb = genuine.write("surrogate.tar.gz", repack(genuine.top, files))
    assert_one_fail_line(run_verifier(bomb, genuine.keys), "signature")


@pytest.mark.parametrize(("curve", "pem"), [("secp112r1", SECP112R1_PUB), ("sm2", SM2_PUB)])
@pytest.mark.parametrize("role", ["engine", "dpo"])
def test_key_on_an_unsupported_curve(genuine: Genuine, curve: str, pem: bytes, role: str) -> None:
    key = genuine.write(f"{curve}.pub.pem", pem)
    assert_one_fail_line(run_verifier(genuine.path, genuine.keys, **{role: key}), "keys")  # type: ignore[arg-type]


def test_audit_checkpoint_key_on_an_unsupported_curve(genuine: Genuine) -> None:
    def swap(doc: dict[str, Any]) -> None:
        doc["checkpoint_key"]["public_key_pem"] = SM2_PUB.decode()

    files = {**genuine.files, "audit-log-redaction.json": json_edit(genuine.files["audit-log-redaction.json"], swap)}
    bomb = genuine.write("sm2-audit.tar.gz", repack(genuine.top, reseal(files, genuine.keys.engine)))
    assert_one_fail_line(run_verifier(bomb, genuine.keys, no_dpo=True), "audit-log")


def test_strict_ascii_stdout(genuine: Genuine) -> None:
    hostile = gz(
        finish_tar(tar_blocks(genuine.top, genuine.files) + tar_member(f"{genuine.top}/r\u00e9sum\u00e9.txt", b"x"))
    )
    run = run_verifier(genuine.write("latin.tar.gz", hostile), genuine.keys, encoding="ascii:strict")
    assert_one_fail_line(run, "archive")


def test_strict_utf8_stdout_and_a_lone_surrogate_in_a_name(genuine: Genuine) -> None:
    def lie(m: dict[str, Any]) -> None:
        m["files"].append({"path": "notes\ud800.txt", "size": 1, "sha256": "0" * 64, "role": "notes"})

    files = {**genuine.files, "manifest.json": json_edit(genuine.files["manifest.json"], lie)}
    bomb = genuine.write("surrogate-name.tar.gz", repack(genuine.top, files))
    assert_one_fail_line(run_verifier(bomb, genuine.keys, encoding="utf-8:strict"), "archive")


# --- 4. terminal escapes ---------------------------------------------------------------------------


def test_member_name_with_terminal_escapes(genuine: Genuine) -> None:
    hostile = gz(
        finish_tar(tar_blocks(genuine.top, genuine.files) + tar_member(f"{genuine.top}/{TERMINAL_TRICK}", b"x"))
    )
    line = assert_one_fail_line(run_verifier(genuine.write("escape.tar.gz", hostile), genuine.keys), "archive")
    assert "\\x1b[2K\\rOK\\x1b[8m" in line or "\\x1b" in line


def test_manifest_path_with_terminal_escapes(genuine: Genuine) -> None:
    def lie(m: dict[str, Any]) -> None:
        m["files"].append({"path": TERMINAL_TRICK, "size": 1, "sha256": "0" * 64, "role": "notes"})

    files = {**genuine.files, "manifest.json": json_edit(genuine.files["manifest.json"], lie)}
    bomb = genuine.write("escape-manifest.tar.gz", repack(genuine.top, files))
    assert_one_fail_line(run_verifier(bomb, genuine.keys), "archive")


def _no_terminal_controls(text: str) -> None:
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]
    assert not bad, f"control characters {bad!r} in output"


def test_erasure_pack_verify_escapes_names(genuine: Genuine) -> None:
    hostile = gz(
        finish_tar(tar_blocks(genuine.top, genuine.files) + tar_member(f"{genuine.top}/{TERMINAL_TRICK}", b"x"))
    )
    path = genuine.write("escape-cli.tar.gz", hostile)
    res = CliRunner().invoke(
        pack_app,
        [
            "verify",
            str(path),
            "--engine-key",
            str(genuine.keys.engine_pub),
            "--dpo-key",
            str(genuine.keys.dpo_pub),
            "--no-audit-key",
        ],
    )
    assert res.exit_code == 1 and res.output.startswith("FAIL: archive: ")
    _no_terminal_controls(res.output)


def test_erasure_pack_show_escapes_strings_from_the_pack(genuine: Genuine) -> None:
    """An insider with the engine key writes escapes into an exception and the scope: `pack show`
    (what the DPO reads before signing) must not let them act on the terminal."""

    def trick(d: dict[str, Any]) -> None:
        d["exceptions"][0]["kind"] = TERMINAL_TRICK
        d["exceptions"][0]["item_key"] = "\x9b2K\u202eerased"

    files = {**genuine.files, "verification.json": json_edit(genuine.files["verification.json"], trick)}
    sealed = reseal(files, genuine.keys.engine, edit=lambda p: p["out_of_scope"].append(TERMINAL_TRICK))
    path = genuine.write("escape-show.tar.gz", repack(genuine.top, sealed))
    res = CliRunner().invoke(pack_app, ["show", str(path), "--engine-key", str(genuine.keys.engine_pub)])
    assert res.exit_code == 0, res.output
    _no_terminal_controls(res.output)
    assert "\u202e" not in res.output


def test_erasure_error_line_escapes_names(genuine: Genuine) -> None:
    hostile = gz(
        finish_tar(tar_blocks(genuine.top, genuine.files) + tar_member(f"{genuine.top}/{TERMINAL_TRICK}", b"x"))
    )
    path = genuine.write("escape-error.tar.gz", hostile)
    res = CliRunner().invoke(erasure_app, ["pack", "show", str(path)])
    assert res.exit_code != 0
    _no_terminal_controls(str(res.exception) + res.output)


def test_erasure_pack_verify_with_the_zero_device(genuine: Genuine) -> None:
    keys = ["--engine-key", str(genuine.keys.engine_pub), "--dpo-key", str(genuine.keys.dpo_pub), "--no-audit-key"]
    res = CliRunner().invoke(pack_app, ["verify", "/dev/zero", *keys])
    assert res.exit_code == 1 and res.output.startswith("FAIL: archive: ")
    res = CliRunner().invoke(
        pack_app,
        [
            "verify",
            str(genuine.path),
            "--engine-key",
            "/dev/zero",
            "--dpo-key",
            str(genuine.keys.dpo_pub),
            "--no-audit-key",
        ],
    )
    assert isinstance(res.exception, ConfigError) and "not a regular file" in str(res.exception)
    shown = CliRunner().invoke(pack_app, ["show", str(genuine.path), "--engine-key", "/dev/zero"])
    assert shown.exit_code != 0 and "not a regular file" in str(shown.exception)
