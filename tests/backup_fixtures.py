"""Real backups of real stores (issue 26): SQLite's online backup API, `VACUUM INTO`, a tar of a folder,
a copy of files; and restoring them over the live store. Plus three subjects and a bystander for the
reference store, and the CLI steps (submit, run) the restore tests share."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from erasure.config import PROJECT_ROOT, Home
from erasure.subject import Subject

THREE = (
    Subject(id="bk-ines-1001", email="ines.varga@example.org", name="Ines Varga", phone="+44 20 7946 0311"),
    Subject(id="bk-omar-1002", email="omar.balogun@example.net", name="Omar Balogun", phone="+44 20 7946 0312"),
    Subject(id="bk-yuki-1003", email="yuki.tanabe@example.com", name="Yuki Tanabe", phone="+44 20 7946 0313"),
)
STAYS = Subject(id="bk-lena-2001", email="lena.holm@example.org", name="Lena Holm", phone="+44 20 7946 0399")


def reference_items(path: Path) -> Path:
    """A JSONL ingest file: two items of each of THREE and two of the bystander STAYS."""
    lines = []
    for who in (*THREE, STAYS):
        for i, topic in enumerate(("the kiln rental invoice", "the pottery class on Monday")):
            lines.append(
                {
                    "source": "chat",
                    "source_ref": f"conv-{who.id}-{i}",
                    "subject": who.model_dump(exclude_none=True),
                    "content": f"Hello, this is {who.name} ({who.email}): please sort out {topic}.",
                }
            )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def request_file(path: Path, request_id: str, subject: Subject, tenant: str = "default") -> Path:
    path.write_text(
        json.dumps(
            {
                "request_id": request_id,
                "tenant_id": tenant,
                "subject": subject.model_dump(exclude_none=True),
                "legal_basis": "GDPR",
                "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
                "requester_identity_proof_ref": f"idv/{request_id}",
                "reason": "Art.17 request via the portal",
            }
        )
    )
    return path


def sqlite_online_backup(db: Path, dest: Path) -> Path:
    """SQLite's online backup API (`sqlite3.Connection.backup`): a consistent copy of a live database."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(db)
    out = sqlite3.connect(dest)
    try:
        src.backup(out)
    finally:
        out.close()
        src.close()
    return dest


def vacuum_into(db: Path, dest: Path) -> Path:
    """`VACUUM INTO`: a compacted copy of a live database."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(db)
    try:
        src.execute("VACUUM INTO ?", (str(dest),))
    finally:
        src.close()
    return dest


def folder_backup(folder: Path, dest: Path, *, databases: tuple[str, ...] = (), vacuum: bool = False) -> Path:
    """A copy of a store folder whose SQLite databases (`databases`, relative) are taken with the online
    backup API (or `VACUUM INTO`) and whose other files are copied as they are."""
    skip = set(databases)

    def ignore(d: str, names: list[str]) -> set[str]:
        rel = Path(d).relative_to(folder)
        return {
            n
            for n in names
            if str(rel / n) in skip or any(str(rel / n) == s + x for s in skip for x in ("-wal", "-shm", "-journal"))
        }

    shutil.copytree(folder, dest, ignore=ignore)
    for rel in databases:
        (vacuum_into if vacuum else sqlite_online_backup)(folder / rel, dest / rel)
    return dest


def restore_folder(backup: Path, folder: Path) -> None:
    """Put a folder backup back in place of the live folder (what a restore from backup does)."""
    shutil.rmtree(folder)
    shutil.copytree(backup, folder)


def tar_folder(folder: Path, dest: Path) -> Path:
    """A tar of a folder (a Chroma directory), taken while nothing writes to it."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w") as tar:
        tar.add(folder, arcname=folder.name)
    return dest


def untar_folder(archive: Path, folder: Path) -> None:
    """Restore a tar taken by `tar_folder` in place of `folder`."""
    shutil.rmtree(folder)
    with tarfile.open(archive) as tar:
        tar.extractall(folder.parent, filter="data")


def verify_offline(pack: Path | str, home: Home, audit_key: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m proof.verify PACK` with the home's engine key, no DPO envelope required, and the
    store's audit key when given (`--no-audit-key` otherwise), as a regulator runs it."""
    audit = ["--audit-key", str(audit_key)] if audit_key is not None else ["--no-audit-key"]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.verify",
            str(pack),
            "--engine-key",
            str(home.keys_dir / "engine.pub.pem"),
            "--no-dpo",
            *audit,
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
