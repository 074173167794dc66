"""What the SLA monitor adds for issue 26: restored stores waiting for their replay, and backups that still
hold requests' subjects. A table artifact and one Prefect event per restored target
(`erasure.target.restored`) and per open backup expiry (`erasure.request.held-in-backup`); ids, counts
and times only."""

from __future__ import annotations

from typing import Any

from prefect.artifacts import create_table_artifact
from prefect.events import emit_event

from erasure.config import Home
from erasure.engine_db import Engine
from service.restore import restored_and_held

EVENT_RESTORED = "erasure.target.restored"
EVENT_HELD = "erasure.request.held-in-backup"
TABLE_KEY = "erasure-restored-and-backups"


def report(engine: Engine, h: Home, *, emit: bool = True) -> dict[str, Any]:
    """Hook of the SLA monitor: restored targets and open backup expiries, as an artifact and events."""
    restored, held = restored_and_held(engine, h)
    rows = [
        {
            "what": "restored store",
            "target": r["target"],
            "request_id": ", ".join(r["pending"]),
            "until": f"epoch {r['store_epoch']} of {r['ledger_epoch']}: run `erasure restore replay`",
        }
        for r in restored
    ]
    rows += [
        {"what": "held in backup", "target": x["target"], "request_id": x["request_id"], "until": x["expires_at"]}
        for x in held
    ]
    if rows:
        create_table_artifact(
            key=TABLE_KEY, table=rows, description="Restored stores waiting for their replay; backups holding subjects"
        )
    if emit:
        for r in restored:
            emit_event(
                event=EVENT_RESTORED,
                resource={"prefect.resource.id": f"erasure.target.{r['target']}"},
                payload={
                    "target": r["target"],
                    "store_epoch": r["store_epoch"],
                    "ledger_epoch": r["ledger_epoch"],
                    "to_replay": r["pending"],
                },
            )
        for x in held:
            emit_event(
                event=EVENT_HELD,
                resource={"prefect.resource.id": f"erasure.request.{x['request_id']}"},
                payload={"request_id": x["request_id"], "target": x["target"], "expires_at": x["expires_at"]},
            )
    return {"restored": [r["target"] for r in restored], "held_in_backup": len(held)}
