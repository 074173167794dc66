"""Paths that come from a store's rows (issue 23, item 3): a blob key or a session id that climbs out
with `../`, or an `ft_corpora.path` that is absolute, must not make an erasure remove (or read) a file
outside the store's folder.

The store is built with the project's own builders (`tests.cascade_fixtures`: real ingest, a real
trained model), then its rows are tampered with plain SQL, as an attacker with write access to the
agent's database would. A victim file outside the store, owned by another OS user (`nobody`) when the
tests run as root, must keep its bytes. The erasure is the real `erasure request run` (in this
process, on the session's Prefect test server): it must not exit 0, its one error line names the
row's kind (never its value), and nothing of the subject is deleted (every path is checked while the
footprint is resolved, before the first deletion).

The rule itself (`erasure.files.inside_folder`) is checked over the class of traversal forms by a
hypothesis property against an oracle written here, apart from it."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.config import Home
from erasure.errors import StoreError
from erasure.files import inside_folder
from tests import budget
from tests.cascade_fixtures import SUBJECT, build_store, owned_counts, submit
from tests.cli_fixtures import erasure

NOBODY = 65534
CLIMB = "../" * 12


# --- the victim and the attacks -------------------------------------------------------------------


def _victim(tmp: Path, name: str) -> Path:
    """A file of another user outside the store (owned by `nobody` when we are root)."""
    folder = tmp / "other-user"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_bytes(b"another user's data, not the store's: " + os.urandom(16).hex().encode())
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
        os.chown(path, NOBODY, NOBODY)
    return path


def _state(path: Path) -> tuple[str, int, int]:
    st = os.lstat(path)
    return hashlib.sha256(path.read_bytes()).hexdigest(), st.st_size, st.st_ino


def _db(home: Home) -> sqlite3.Connection:
    return sqlite3.connect(home.store_dir / "memory.db")  # foreign keys off: the attacker's own SQL


def blob_key_climbing_out(home: Home, tmp: Path) -> Path:
    """The subject's blob key becomes `../` x 12 + the victim's path: `<root>/<key[:2]>/<key>` is the
    victim."""
    victim = _victim(tmp, "blob-victim.bin")
    key = CLIMB + str(victim).lstrip("/")
    with _db(home) as db:
        (old,) = db.execute("SELECT blob_key FROM blobs WHERE subject_id = ?", (SUBJECT.id,)).fetchone()
        db.execute("UPDATE blobs SET blob_key = ? WHERE blob_key = ?", (key, old))
        db.execute("UPDATE blob_locations SET blob_key = ? WHERE blob_key = ?", (key, old))
    return victim


def session_id_climbing_out(home: Home, tmp: Path) -> Path:
    """The subject's session id becomes `../` x 12 + the victim's path without `.json`: the step's
    `sessions/<id>.json` is the victim."""
    victim = _victim(tmp, "session-victim.json")
    sid = CLIMB + str(victim.with_suffix("")).lstrip("/")
    with _db(home) as db:
        db.execute(
            "UPDATE working_sessions SET session_id = ? WHERE rowid = (SELECT min(rowid) FROM"
            " working_sessions WHERE subject_id = ?)",
            (sid, SUBJECT.id),
        )
    return victim


def corpus_path_absolute(home: Home, tmp: Path) -> Path:
    """The frozen first version's `ft_corpora.path` (it holds the subject's example; the erasure removes
    its bytes) becomes the victim's absolute path."""
    victim = _victim(tmp, "corpus-victim.jsonl")
    with _db(home) as db:
        db.execute("UPDATE ft_corpora SET path = ? WHERE version = 1", (str(victim),))
    return victim


ATTACKS: dict[str, tuple[Callable[[Home, Path], Path], str]] = {
    "blob key climbing out": (blob_key_climbing_out, "blob key"),
    "session id climbing out": (session_id_climbing_out, "session id"),
    "corpus path absolute": (corpus_path_absolute, "corpus path"),
}


@pytest.fixture
def crafted(home: Home, tmp_path: Path, prefect_harness: None) -> Home:
    from proof.keys import generate_keypair

    build_store(home, tmp_path)
    submit(home)
    generate_keypair("engine", home.keys_dir)
    return home


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_crafted_reference_store_deletes_nothing_outside_it(crafted: Home, tmp_path: Path, attack: str) -> None:
    tamper, kind = ATTACKS[attack]
    victim = tamper(crafted, tmp_path)
    before, owned = _state(victim), owned_counts(crafted, SUBJECT)

    res = erasure("request", "run", "req-ann-1", "--home", str(crafted.root))

    assert victim.exists() and _state(victim) == before, "a file outside the store was changed or removed"
    assert res.code != 0, res
    last = res.err.strip().splitlines()[-1]  # Prefect's own task log may come first (and its traceback)
    assert last.startswith("error: ") and kind in last and "outside" in last, res.err[-3000:]
    assert str(victim) not in res.err + res.out and victim.name not in res.err + res.out
    assert owned_counts(crafted, SUBJECT) == owned, "the step deleted before every path was checked"


# --- the rule, over the class of traversal forms ---------------------------------------------------


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """root/ with a folder `real`, a link `in-link` -> root/real, a link `out-link` -> a folder outside,
    `abs-in` -> root/real by absolute path, a dangling link, and a loop; `outside/` beside it."""
    base = tmp_path_factory.mktemp("paths")
    root, outside = base / "root", base / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (root / "in-link").symlink_to("real")
    (root / "abs-in").symlink_to(root / "real")
    (root / "out-link").symlink_to(outside)
    (root / "up-link").symlink_to("..")
    (root / "dangling").symlink_to("no-such-thing")
    (root / "loop-a").symlink_to("loop-b")
    (root / "loop-b").symlink_to("loop-a")
    return root


NAMES = [
    "a",
    "real",
    "in-link",
    "abs-in",
    "out-link",
    "up-link",
    "dangling",
    "loop-a",
    "..",
    ".",
    "",
    "...",
    "..\\..",
    "%2e%2e",
    "..%2f..",
    "a..b",
    " ..",
    ".. ",
    "x.json",
]
FOLDERS_INSIDE = {"real", "in-link", "abs-in"}
LEADS_OUT = {"out-link", "up-link", "loop-a"}
"""At the root: the names that are folders inside it, and the links that lead out of it (or loop)."""


def oracle_refuses(relative: str) -> bool:
    """Written apart from `inside_folder`: by the components as strings and what this test made each
    name at the root be. Refused: an absolute path, a `..` component, nothing but `.` and empty parts
    (the root itself), or a link out of the root (or a loop) reached from the root. `real` is empty,
    so any name under it, or under a missing name, is a missing name inside."""
    if relative.startswith("/") or "\x00" in relative:
        return True
    parts = relative.split("/")
    if ".." in parts:
        return True
    named = [p for p in parts if p not in ("", ".")]
    if not named:
        return True
    return named[0] in LEADS_OUT


paths = st.one_of(
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=6).map("/".join),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map(lambda p: "/" + "/".join(p)),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map(lambda p: CLIMB + "/".join(p)),
    st.text(alphabet="./\\a%2e", min_size=1, max_size=12),
)


@settings(max_examples=budget.examples(400), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(relative=paths, kind=st.sampled_from(["blob key", "session id", "corpus path", "chroma segment id"]))
def test_inside_folder_agrees_with_the_oracle(tree: Path, relative: str, kind: str) -> None:
    if oracle_refuses(relative):
        with pytest.raises(StoreError) as err:
            inside_folder(tree, relative, kind)
        with pytest.raises(StoreError) as same:
            inside_folder(tree, "/", kind)
        assert kind in str(err.value) and str(err.value) == str(same.value), "the message depends on the value"
    else:
        got = inside_folder(tree, relative, kind)
        assert got == tree / relative
        assert os.path.realpath(got).startswith(os.path.realpath(tree) + os.sep)


def test_inside_folder_accepts_a_root_given_through_a_link(tmp_path: Path) -> None:
    """The store's folder may itself be reached through a symlink (a home on another disk)."""
    (tmp_path / "disk" / "store" / "sessions").mkdir(parents=True)
    (tmp_path / "home").symlink_to(tmp_path / "disk")
    root = tmp_path / "home" / "store"
    assert inside_folder(root, "sessions/abc.json", "session id") == root / "sessions" / "abc.json"
