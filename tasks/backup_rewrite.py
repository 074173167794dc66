"""Backups erased in place (`mode = "rewrite"` in a `[[targets.backups]]` table): the files of it.

For each backup of a rewrite folder (a SQLite file, a folder, or a tar of a folder):
1. `restore_copy`: restore it into a private work folder beside it (`.erasure-rewrite-<digest>/`, 0700),
   and describe the copy as the target itself with `option` pointing at the copy (the target's other
   file keys dropped, so nothing of the live store is touched), in a targets file of its own;
2. the caller re-applies, on the copy, every ledger entry newer than the copy's own erasure epoch (it
   is inside the copy's database, as in any restored store) with the same cascade, verification and
   signed pack as a replay (`service.restore.rewrite_backups`, `service.restore.replay_one`);
3. `replace`: the erased copy is written beside the backup (`.erasure-new-<name>`), fsynced, given the
   backup's original mtime (the backup time stays what it was), and renamed over it; a folder backup
   is swapped by two renames (the old one moved aside first, then removed);
4. `record`: the sidecar `.erasure-rewritten.json` in the backup folder keeps, per backup (by its
   ref), the original backup time, when it was rewritten, the epoch it now has, and the request ids
   whose erasures it now carries: the open `held_in_backup_until` exceptions of those requests end
   as `rewritten` (`tasks/backup_holds.py`), and their follow-up statement is then due.
Request ids, times and backup names only; the work folder is removed whatever happens.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

from erasure.backups import WORK_PREFIX, Backup, BackupSource, iso, list_backups, sources
from erasure.errors import ConfigError
from erasure.files import private_dirs
from erasure.target_kinds import spec_of
from erasure.targets import Target

SIDECAR = WORK_PREFIX + "rewritten.json"


@dataclass(frozen=True)
class Copy:
    """A backup restored into a work folder, and the target that names the copy."""

    backup: Backup
    path: Path
    """The backup itself (a file, a folder or a tar)."""
    work: Path
    restored: Path
    target: Target
    targets_file: Path

    @property
    def archive(self) -> bool:
        return self.path.is_file() and tarfile.is_tarfile(self.path)


def rewrite_sources(target: Target) -> list[tuple[BackupSource, Path]]:
    """The target's rewrite folders (with their source), `ConfigError` for a kind we cannot rewrite."""
    out = []
    for src in sources(target):
        if src.mode != "rewrite":
            continue
        keys = spec_of(target).backup_paths
        if not keys:
            raise ConfigError(
                f"targets: target {target.name!r}: backups of kind {target.kind!r} cannot be "
                "rewritten here (its spec names no backup paths): use mode = 'hold'"
            )
        if (src.option or keys[0]) not in keys:
            raise ConfigError(f"targets: target {target.name!r}: backups.option must be one of {', '.join(keys)}")
        assert src.folder is not None
        folder = Path(src.folder).expanduser()
        out.append((src, folder if folder.is_absolute() else target.base_dir / folder))
    return out


def backups_to_rewrite(target: Target) -> list[tuple[BackupSource, Path, Backup]]:
    """Every existing backup of the target's rewrite folders: (source, its path, the backup)."""
    out = []
    for src, folder in rewrite_sources(target):
        mine = {b.name: b for b in list_backups(target)}
        for p in sorted(folder.glob(src.pattern)):
            if p.name in mine and not p.name.startswith(WORK_PREFIX):
                out.append((src, p, mine[p.name]))
    return out


def restore_copy(target: Target, src: BackupSource, path: Path, backup: Backup, tenant: str) -> Copy:
    """Restore `path` (file, folder or tar) into a private work folder beside it; see the module's docstring."""
    work = path.parent / f"{WORK_PREFIX}rewrite-{backup.ref.rsplit(':', 1)[-1]}"
    shutil.rmtree(work, ignore_errors=True)
    private_dirs(work)
    if path.is_dir():
        restored = work / path.name
        shutil.copytree(path, restored, symlinks=True)
    elif tarfile.is_tarfile(path):
        unpacked = work / "unpacked"
        with tarfile.open(path) as tar:
            tar.extractall(unpacked, filter="data")
        tops = list(unpacked.iterdir())
        restored = tops[0] if len(tops) == 1 and tops[0].is_dir() else unpacked
    else:
        restored = work / path.name
        shutil.copy2(path, restored)
    keys = spec_of(target).backup_paths
    option = src.option or keys[0]
    opts = {k: v for k, v in target.options().items() if k not in keys and k != "backups"}
    opts[option] = str(restored)
    copy_target = Target.model_validate({**opts, "name": target.name, "kind": target.kind, "base_dir": work})
    lines = [
        f"tenant = {json.dumps(tenant)}",
        "[[targets]]",
        f"name = {json.dumps(target.name)}",
        f"kind = {json.dumps(target.kind)}",
    ]
    lines += [
        f"{k} = {json.dumps(v)}"
        for k, v in opts.items()
        if isinstance(v, str | int | bool) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
    ]
    targets_file = work / "targets.toml"
    targets_file.write_text("\n".join(lines) + "\n")
    return Copy(backup, path, work, restored, copy_target, targets_file)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            _fsync(Path(dirpath) / name)
        _fsync(Path(dirpath))


def _single_file(db: Path) -> None:
    """Leave a SQLite copy as one file: its WAL checkpointed into it and the journal mode DELETE."""
    conn = apsw.Connection(str(db))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()


def replace(copy: Copy) -> None:
    """Put the erased copy in place of the backup: written beside it, fsynced, with the backup's original
    mtime, then renamed over it (a folder: the old one moved aside, the new one renamed in, the old removed)."""
    st = copy.path.stat()
    new = copy.path.parent / f"{WORK_PREFIX}new-{copy.path.name}"
    shutil.rmtree(new, ignore_errors=True) if new.is_dir() else new.unlink(missing_ok=True)
    if copy.archive:
        with tarfile.open(new, "w") as tar:
            one = copy.restored != copy.work / "unpacked"  # the tar held one folder: put it back as it was
            for p in [copy.restored] if one else sorted(copy.restored.iterdir()):
                tar.add(p, arcname=p.name)
        _fsync(new)
    elif copy.path.is_dir():
        shutil.copytree(copy.restored, new, symlinks=True)
        _fsync_tree(new)
    else:
        _single_file(copy.restored)
        shutil.copyfile(copy.restored, new)
        os.chmod(new, st.st_mode & 0o777)
        _fsync(new)
    os.utime(new, (st.st_atime, st.st_mtime))
    if copy.path.is_dir():
        old = copy.path.parent / f"{WORK_PREFIX}old-{copy.path.name}"
        os.rename(copy.path, old)
        os.rename(new, copy.path)
        shutil.rmtree(old)
    else:
        os.replace(new, copy.path)
    _fsync(copy.path.parent)


def record(copy: Copy, epoch: int, applied: list[str]) -> None:
    """Note in the folder's sidecar that the backup was rewritten (original backup time kept)."""
    side = copy.path.parent / SIDECAR
    doc: dict[str, Any] = json.loads(side.read_text()) if side.exists() else {}
    was = doc.get(copy.backup.ref, {})
    doc[copy.backup.ref] = {
        "name": copy.backup.name,
        "taken_at": was.get("taken_at", iso(copy.backup.taken_at)),
        "rewritten_at": iso(datetime.now(UTC)),
        "epoch": epoch,
        "applied": sorted({*was.get("applied", []), *applied}),
    }
    fd, tmp = tempfile.mkstemp(dir=side.parent, prefix=WORK_PREFIX + "sidecar-")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, side)


def rewritten(target: Target) -> dict[str, set[str]]:
    """Per backup ref of the target's rewrite folders: the request ids whose erasures it now carries."""
    out: dict[str, set[str]] = {}
    for _src, folder in rewrite_sources(target):
        side = folder / SIDECAR
        if side.exists():
            for ref, row in json.loads(side.read_text()).items():
                out.setdefault(ref, set()).update(row.get("applied", []))
    return out
