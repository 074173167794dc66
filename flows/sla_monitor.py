"""The `sla-monitor` flow (hourly in `prefect.yaml`): every open request against its legal deadline.

Each run reads `erasure.sla` rows and
- publishes a keyed table artifact `erasure-sla` and a keyed markdown artifact `erasure-sla-report`
  (the Artifacts page of the Prefect UI keeps their history);
- emits the Prefect events `erasure.request.deadline.at-risk` and `erasure.request.deadline.breached`,
  one per request, on the resource `erasure.request.<request_id>` (automations can catch them);
- writes the Prometheus textfile (`service.metrics`).
Rows, artifacts, events and metrics hold request ids, dates and flags: never the subject.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.events import emit_event

from erasure import request_records
from erasure.clocks import ClockPolicy, LegalBasis, iso_utc
from erasure.engine_db import Engine
from erasure.exception_kinds import KINDS
from erasure.sla import DEFAULT_AT_RISK_DAYS, SlaRow, sla_rows, state_counts, summarise, to_markdown
from erasure.states import RequestState
from flows.parameters import described
from service.home import home
from service.metrics import default_textfile, write_textfile

TABLE_KEY = "erasure-sla"
MARKDOWN_KEY = "erasure-sla-report"
EVENT_AT_RISK = "erasure.request.deadline.at-risk"
EVENT_BREACHED = "erasure.request.deadline.breached"
TABLE_COLUMNS = ("request_id", "law", "state", "deadline", "days_left", "status", "needs")
"""The table artifact's columns, few and short so the table fits a 1280 px screen: `status` flags what
needs someone and `needs` names who (`erasure sla --json` has every field)."""


def resource_id(request_id: str) -> str:
    """The Prefect resource id of a request in events."""
    return f"erasure.request.{request_id}"


def _minute(iso: str) -> str:
    return iso[:16].replace("T", " ")


def needs(r: SlaRow, kinds: Collection[str]) -> str:
    """Who must act on the request now (empty: nobody yet): residue or another exception the operator
    clears -> operator; a pack awaiting attestation -> DPO; a breached deadline -> both."""
    who: list[str] = []
    operator = [k for k in sorted(kinds) if k in KINDS and KINDS[k].who == "operator"]
    if r.state in (RequestState.exception, RequestState.failed, RequestState.reopened, RequestState.rejected):
        who.append("operator" + (f" ({', '.join(operator)})" if operator else f" ({r.state.value})"))
    elif operator:
        who.append(f"operator ({', '.join(operator)})")
    if r.state is RequestState.awaiting_attestation:
        who.append("DPO (attest)")
    if r.breached:
        who += [w for w in ("operator", "DPO") if not any(x.startswith(w) for x in who)]
    return " + ".join(who)


def table_rows(rows: Sequence[SlaRow], kinds: Mapping[str, Collection[str]] | None = None) -> list[dict[str, Any]]:
    """The table artifact's rows (`TABLE_COLUMNS`), the deadline to the minute in UTC; `kinds`: each
    request's open exception kinds. A request that needs someone never reads `ok`."""
    out = []
    for r in rows:
        who = needs(r, (kinds or {}).get(r.request_id, ()))
        status = "BREACHED" if r.breached else "at risk" if r.at_risk else "needs action" if who else "ok"
        state = r.state.value + (" (paused)" if r.paused else "") + (" (extended)" if r.extended else "")
        if "residue" in (kinds or {}).get(r.request_id, ()):
            state = "residue"
        out.append(
            {
                "request_id": r.request_id,
                "law": r.legal_basis.value,
                "state": state,
                "deadline": _minute(iso_utc(r.deadline)),
                "days_left": r.days_left,
                "status": status,
                "needs": who,
            }
        )
    return out


def open_kinds(engine: Any, rows: Sequence[SlaRow]) -> dict[str, set[str]]:
    """Each listed request's open exception kinds."""
    return {
        r.request_id: {e.kind for e in request_records.exceptions(engine, r.request_id, open_only=True)} for r in rows
    }


def emit_deadline_events(rows: Sequence[SlaRow]) -> dict[str, int]:
    """One event per at-risk or breached request; returns how many of each were emitted."""
    sent = {EVENT_AT_RISK: 0, EVENT_BREACHED: 0}
    for r in rows:
        if not (r.at_risk or r.breached):
            continue
        name = EVENT_BREACHED if r.breached else EVENT_AT_RISK
        d = r.as_dict()
        emit_event(
            event=name,
            resource={
                "prefect.resource.id": resource_id(r.request_id),
                "prefect.resource.name": r.request_id,
                "erasure.legal-basis": r.legal_basis.value,
                "erasure.state": r.state.value,
            },
            payload={
                k: d[k]
                for k in (
                    "request_id",
                    "legal_basis",
                    "state",
                    "deadline",
                    "target",
                    "days_left",
                    "seconds_left",
                    "extended",
                    "paused",
                )
            },
        )
        sent[name] += 1
    return sent


@flow(name="sla-monitor", persist_result=False)
def sla_monitor(
    at_risk_days: Annotated[
        int,
        described(
            ge=0,
            le=365,
            description="Flag a request as at risk when this many calendar days or fewer are left "
            "before its legal deadline.",
        ),
    ] = DEFAULT_AT_RISK_DAYS,
    legal_bases: Annotated[
        list[LegalBasis] | None, described(description="Only requests under these laws; empty: every law.")
    ] = None,
    emit_events: Annotated[
        bool, described(description="Emit erasure.request.deadline.at-risk / .breached events for automations.")
    ] = True,
    metrics_textfile: Annotated[
        str | None,
        described(description="Write the Prometheus textfile here; empty: metrics/erasure_sla.prom in ERASURE_HOME."),
    ] = None,
) -> dict[str, Any]:
    """List every open erasure request against its legal deadline: table and markdown artifacts,
    deadline events, Prometheus metrics."""
    log = get_run_logger()
    h = home()
    now = datetime.now(UTC)
    with Engine.session(h.engine_db) as engine:  # the flow's engine
        with engine.lent() as conn:
            rows = sla_rows(
                conn, now=now, policy=ClockPolicy.from_env(), at_risk_days=at_risk_days, legal_bases=legal_bases
            )
            counts = state_counts(conn)
            kinds = open_kinds(conn, rows)
        s = summarise(rows)
        create_table_artifact(
            key=TABLE_KEY,
            table=table_rows(rows, kinds),
            description=f"Open erasure requests against their legal deadlines, {iso_utc(now)}: "
            f"{s.open} open, {s.breached} breached, {s.at_risk} at risk.",
        )
        create_markdown_artifact(
            key=MARKDOWN_KEY,
            markdown=to_markdown(rows, now=now, at_risk_days=at_risk_days),
            description="Erasure SLA report",
        )
        sent = emit_deadline_events(rows) if emit_events else {EVENT_AT_RISK: 0, EVENT_BREACHED: 0}
        textfile = Path(metrics_textfile) if metrics_textfile else default_textfile(h)
        write_textfile(textfile, rows, counts, now=now, at_risk_days=at_risk_days)
        log.info(
            "sla: %d open, %d breached, %d at risk; events %d at-risk, %d breached",
            s.open,
            s.breached,
            s.at_risk,
            sent[EVENT_AT_RISK],
            sent[EVENT_BREACHED],
        )
        from flows.restored import report

        backups = report(engine, h, emit=emit_events)  # hook (issue 26): restored stores, backups holding subjects
    return {
        "open": s.open,
        "at_risk": s.at_risk,
        "breached": s.breached,
        "paused": s.paused,
        "extended": s.extended,
        "events": sent,
        "metrics_textfile": str(textfile),
        **backups,
    }
