"""Working-tier session files: `<store>/sessions/<session_id>.json`, beside `working_sessions` rows.

The file holds the same JSON state as the row (the agent runtime reads whichever is closer). Session
ids are opaque random tokens, never derived from the subject.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from erasure.files import inside_folder, private_dirs, write_private
from memory.schema import SESSIONS_DIR

_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{8,128}$")
RECENT_TURNS = 4
"""How many of an item's last turns a session keeps."""


def sessions_dir(store_dir: Path) -> Path:
    """The directory of session files (not created here)."""
    return Path(store_dir) / SESSIONS_DIR


def session_path(store_dir: Path, session_id: str) -> Path:
    """Where the file of `session_id` lives. Refuses ids that are not opaque tokens."""
    if not _SESSION_ID.match(session_id):
        raise ValueError("session ids are 8-128 characters of [A-Za-z0-9_-]")
    return sessions_dir(store_dir) / f"{session_id}.json"


def stored_session_path(store_dir: Path, session_id: str) -> Path:
    """Where the file of a session id read from the store's rows lives: `sessions/<id>.json`, which
    must lie inside the store's folder (`erasure.files.inside_folder`: a `sessions` folder linked out
    of it is refused too; `StoreError` naming the kind "session id"). Ids another program wrote need
    not be our tokens; they must stay inside."""
    return inside_folder(Path(store_dir), f"{SESSIONS_DIR}/{session_id}.json", "session id")


def session_state(source: str, source_ref: str, turns: list[str], updated_at: str) -> dict[str, Any]:
    """The state JSON of a session: where it came from and its last `RECENT_TURNS` turns."""
    return {
        "source": source,
        "source_ref": source_ref,
        "turns": turns[-RECENT_TURNS:],
        "scratch": {},
        "updated_at": updated_at,
    }


def state_json(state: dict[str, Any]) -> str:
    """The state as stored in the row and the file (sorted keys, UTF-8)."""
    return json.dumps(state, sort_keys=True, ensure_ascii=False)


def write_session(store_dir: Path, session_id: str, state_text: str, *, path: Path | None = None) -> Path:
    """Write the session file (created lazily with its directory); returns its path. `path`: where,
    when the caller already checked it (`stored_session_path`)."""
    path = path or session_path(store_dir, session_id)
    private_dirs(path.parent)
    write_private(path, state_text.encode("utf-8"))  # a session's turns are a person's words: 0600
    return path


def remove_session(store_dir: Path, session_id: str) -> bool:
    """Delete a session file; True if it existed."""
    try:
        session_path(store_dir, session_id).unlink()
    except FileNotFoundError:
        return False
    return True
