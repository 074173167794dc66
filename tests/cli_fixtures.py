"""Running the real `erasure` entry point (`cli.main.main`) in this process, as a user's shell would:
its exit code, stdout and stderr. No subprocess per call, so a test can run it thousands of times."""

from __future__ import annotations

import hashlib
import io
import os
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

MARK = "zqxmark"
"""In every identifier (and every content) the generated tests make: no output may contain it."""


@dataclass(frozen=True)
class CliResult:
    """What `erasure ARGS` did: exit code, stdout, stderr."""

    code: int
    out: str
    err: str


def erasure(*args: str) -> CliResult:
    """`erasure ARGS` through the entry point: every exit goes through `SystemExit`, and any other
    exception (a traceback for the user) propagates to the test."""
    from cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main(list(args))
    except SystemExit as exc:
        code = exc.code
    assert isinstance(code, int) or code is None, code
    return CliResult(code or 0, out.getvalue(), err.getvalue())


def snapshot(root: Path) -> dict[str, str | None]:
    """Every folder (None), file (the sha256 of its bytes) and symlink ("-> target") under `root`:
    equal snapshots mean nothing under `root` was written, created or removed."""
    out: dict[str, str | None] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = f"-> {os.readlink(p)}" if p.is_symlink() else None
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = (
                f"-> {os.readlink(p)}" if p.is_symlink() else hashlib.sha256(p.read_bytes()).hexdigest()
            )
    return out


@st.composite
def subjects(draw: st.DrawFn) -> dict[str, str]:
    """A generated subject whose every identifier carries `MARK`; email, name and phone optional."""
    n = draw(st.integers(0, 10_000))
    out = {"id": f"{MARK}-{n}"}
    if draw(st.booleans()):
        out["email"] = f"{MARK}.{n}@example.org"
    if draw(st.booleans()):
        out["name"] = f"{MARK.title()} {draw(st.sampled_from(['Example', 'Ng', 'de la Cruz', 'Ōno']))}"
    if draw(st.booleans()):
        out["phone"] = f"+44 20 {draw(st.integers(1000, 9999))} {n:04d}"
    return out
