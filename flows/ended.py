"""How every flow run ends: the one place a Prefect state is built, from an `Outcome` (its type and
name), and the one reader of a finished run's data. A run that did not end all clear ends in a Failed
state whose message is a sentence and whose data is a `RunEnded` carrying the run's result.

Prefect raises a failed run's exception at the end of a deployed run (`python -m prefect.engine`) and
logs it with its traceback, twice. For a `RunEnded` the state already says everything, so the filter
below logs that one line without the traceback: no run ends its log in a traceback."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from prefect import State
from prefect.states import Completed, Failed

from service.outcome import Outcome, RunEnded


def ended(outcome: Outcome, message: str | None, data: Mapping[str, Any] | None = None) -> State:
    """The state a run that ended in `outcome` ends in: its type and name are the outcome's, `message`
    one sentence (no identifier), `data` (ids and counts) for its readers, carrying `outcome` too."""
    doc = {**(data or {}), "outcome": outcome.value}
    if outcome.completed:
        return Completed(name=outcome.state_name, message=message, data=doc)
    text = message or outcome.value
    return Failed(name=outcome.state_name, message=text, data=RunEnded(text, doc))


def outcome_of(state: Any) -> Outcome | None:
    """The outcome a finished flow run's state names in its data (None: it names none, or crashed)."""
    return Outcome.of(state_data(state))


def state_data(state: Any) -> Any:
    """What a finished flow run's state carries: a Completed run's result, a Failed run's `RunEnded`
    data; None when the run crashed or its result cannot be read."""
    if not (state.is_completed() or state.is_failed()):
        return None
    try:
        data = state.result(raise_on_failure=False)
    except Exception:  # a result that cannot be read is no result
        return None
    return data.data if isinstance(data, RunEnded) else data


class _RunEndedWithoutTraceback(logging.Filter):
    """Logs an engine's "exited with unexpected exception" for a `RunEnded` as its sentence alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, RunEnded):
            record.msg, record.args, record.exc_info, record.exc_text = f"run ended: {exc}", (), None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


for _name in ("prefect.flow_runs", "prefect.engine"):
    logging.getLogger(_name).addFilter(_RunEndedWithoutTraceback())
