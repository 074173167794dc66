"""The `erasure-replay` flow: a store restored from a backup has every erasure the backup predates
applied again (`service.restore.replay`), each as a replay request run through the `erasure-request`
flow as a subflow, so the compliance team runs it from the UI as `erasure restore replay` does from a
terminal. Its one parameter is the target's name (configuration, never an identifier); its result and
table artifact hold request ids, outcomes, pack names and epochs only."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from prefect import State, flow, get_run_logger
from prefect.artifacts import create_table_artifact

from erasure.errors import ErasureError
from flows.ended import ended
from flows.erasure_request import erasure_request
from flows.parameters import described
from service.home import home, targets_of
from service.outcome import Outcome
from service.restore import replay

TargetName = Annotated[
    str,
    described(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        description="The restored target's name as targets.toml spells it (`reference` for the home's own store).",
    ),
]
TABLE_KEY = "erasure-replay"


@flow(name="erasure-replay", log_prints=False, validate_parameters=True)
def erasure_replay(target: TargetName = "reference") -> State:
    """Re-apply, on the restored `target`, every erasure newer than its epoch. Completed when every
    replay ended all clear (or the target was not restored); Failed, naming the replay, otherwise."""
    h = home()
    log = get_run_logger()

    def run(request_id: str) -> Any:  # the request flow as a subflow: its state, whatever it is
        return erasure_request(request_id, return_state=True)

    try:
        doc = replay(h, targets_of(h), target, run)
    except ErasureError as exc:  # a replay that did not end all clear: the store stays refused
        return ended(Outcome.replay_failed, str(exc), {"target": target})
    rows = [
        {
            "original request": r["original"],
            "replay request": r["replay"] or "",
            "outcome": r["outcome"],
            "pack": Path(r["pack"]).name if r["pack"] else "",
        }
        for r in doc["replayed"]
    ]
    summary: dict[str, Any] = {
        "target": doc["target"],
        "replayed": len(rows),
        "store_epoch": doc["store_epoch"],
        "ledger_epoch": doc["ledger_epoch"],
        "restored": doc["restored"],
        "replays": rows,
    }
    if rows:
        create_table_artifact(
            key=TABLE_KEY,
            table=rows,
            description=f"Replay on {doc['target']}: epoch {doc['store_epoch']} of {doc['ledger_epoch']}",
        )
    log.info(
        "target %s: %d replayed, epoch %s of %s", doc["target"], len(rows), doc["store_epoch"], doc["ledger_epoch"]
    )
    return ended(Outcome.all_clear if rows else Outcome.noop, f"{len(rows)} replayed on {doc['target']}", summary)
