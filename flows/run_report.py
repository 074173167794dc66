"""What the team sees of an `erasure-request` run in the Prefect UI, and what a Prefect automation can
act on.

When a run ends (the flow's completion and failure hooks call `publish`), under the request id only:
- a table artifact `erasure-run-<request id>`: per tier, status, count before, count after, residue the
  independent probes found (and the byte scan as its own row);
- a markdown artifact `erasure-run-<request id>-summary`: the verification verdict, open exceptions by
  kind, the proof pack's path, size and sha256, and what the DPO must do next;
- one or two events on the resource `erasure.request.<request id>`: `erasure.request.completed`,
  `erasure.request.awaiting-attestation`, `erasure.request.blocked`, `erasure.request.failed`.
Artifacts and events hold request ids, states, counts and digests: never an identifier or content
(invariant 6). Artifacts of reruns of one request stack up as versions of the same keys.

`create_dpo_automation` creates the automation that notifies the DPO (automations/notify-dpo.yaml).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path
from typing import Any

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError, NotFound
from erasure.exception_kinds import KINDS, explain
from erasure.request_ids import is_safe_token
from erasure.states import RequestState
from erasure.tiers import CASCADE_ORDER
from service.outcome import Outcome
from service.pack_files import newest_pack
from service.runs import verification_doc

EVENT_COMPLETED = "erasure.request.completed"
EVENT_AWAITING = "erasure.request.awaiting-attestation"
EVENT_BLOCKED = "erasure.request.blocked"
EVENT_FAILED = "erasure.request.failed"
EVENTS = (EVENT_COMPLETED, EVENT_AWAITING, EVENT_BLOCKED, EVENT_FAILED)
TABLE_COLUMNS = ("#", "tier", "status", "before", "after", "residue")


def artifact_key(request_id: str) -> str:
    """The table artifact's key: `erasure-run-<request id>`. Prefect keys take lowercase letters, digits
    and dashes only; a request id that needs changing to fit gets a short digest of itself appended, so
    two ids never share a key."""
    slug = re.sub(r"[^a-z0-9-]", "-", request_id.lower())
    if slug != request_id:
        slug += "-" + hashlib.sha256(request_id.encode()).hexdigest()[:8]
    return f"erasure-run-{slug}"


def summary_key(request_id: str) -> str:
    return artifact_key(request_id) + "-summary"


def resource_id(request_id: str) -> str:
    """The Prefect resource of a request in events (the same as the SLA monitor's)."""
    return f"erasure.request.{request_id}"


def tier_rows(engine: Engine, request_id: str, verification: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per tier: the step's status and counts (engine step records) and the probes' residue; the
    reference store's nine tiers first, then each other target's tiers as `<target>/<tier>`."""
    with engine.lent() as conn:
        recs = request_records.steps(conn, request_id)
    residue: Counter[tuple[str | None, str]] = Counter()
    probed: set[tuple[str | None, str]] = set()
    for p in (verification or {}).get("probes", []):
        key = (p.get("target"), str(p.get("tier")))
        residue[key] += int(p.get("residue") or 0)
        probed.add(key)
    reference = {r.step: r for r in recs if r.target is None}
    others = [r for r in recs if r.target is not None]
    order = {t.value: i for i, t in enumerate(CASCADE_ORDER, 1)}

    def row(n: int | str, target: str | None, tier: str, r: Any) -> dict[str, Any]:
        key = (target, tier)
        return {
            "#": n,
            "tier": tier if target is None else f"{target}/{tier}",
            "status": r.status.value if r else "not run",
            "before": "" if r is None or r.before_count is None else r.before_count,
            "after": "" if r is None or r.after_count is None else r.after_count,
            "residue": residue[key] if key in probed else "",
        }

    rows = [
        row(i, None, t.value, reference.get(t.value)) for i, t in enumerate(CASCADE_ORDER, 1) if reference or not others
    ]
    rows += [
        row(order.get(r.step, ""), r.target, r.step, r)
        for r in sorted(others, key=lambda r: (str(r.target), order.get(r.step, 99)))
    ]
    if (None, "bytes") in probed:
        rows.append(
            {
                "#": "",
                "tier": "bytes (every file)",
                "status": "scanned",
                "before": "",
                "after": "",
                "residue": residue[(None, "bytes")],
            }
        )
    return rows


def _pack(h: Home, request_id: str) -> dict[str, Any] | None:
    path = newest_pack(h, request_id)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return {"path": str(path), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _outcome(state: Any, request_state: RequestState | None) -> tuple[str, list[str]]:
    """(one word for the run, the events it emits)."""
    if state.is_completed():
        events = [EVENT_COMPLETED]
        if request_state is RequestState.awaiting_attestation:
            events.append(EVENT_AWAITING)
            return "awaiting attestation", events
        if request_state in (RequestState.sealed, RequestState.notified):
            return "sealed", events
        return "completed", events
    if state.name == Outcome.held.state_name:
        return "blocked", [EVENT_BLOCKED]
    return "failed", [EVENT_FAILED]


def next_steps(
    request_id: str, outcome: str, all_clear: bool | None, pack: dict[str, Any] | None, kinds: Counter[str]
) -> list[tuple[str, str]]:
    """Who does what next, as (heading, text): the operator's work apart from the DPO's."""
    operator = [f"- `{k}`: {KINDS[k].next_step}." for k in sorted(kinds) if k in KINDS and KINDS[k].who == "operator"]
    if outcome == "awaiting attestation":
        return [
            (
                "What the DPO must do next",
                f"Review the pack and the exceptions above, then sign the attestation with your own key, on "
                f"your own machine: `erasure attest {request_id} --dpo-key <your key>`. The requester is "
                f"notified only after that; `erasure export {request_id} --to <dir>` then gives the regulator "
                "the sealed pack.",
            ),
            *([("What the operator must do next", "\n".join(operator))] if operator else []),
        ]
    if outcome == "blocked":
        return [
            (
                "What the operator must do next",
                "Nothing was erased: a litigation hold covers the subject, so there is nothing for the DPO to "
                f"sign. When the case allows, release the hold (deployment `hold-release`, request id "
                f"`{request_id}`) and run the request again.",
            )
        ]
    if outcome == "sealed":
        return [
            (
                "Done",
                f"The DPO attested the pack and it is sealed. `erasure export {request_id} --to <dir>` gives "
                "the regulator the sealed pack, its keys and the offline verifier.",
            )
        ]
    if outcome == "completed":
        return [("Done", "Nothing new: the request had already completed.")]
    why = "the probes found residue" if all_clear is False else "the cascade did not complete"
    return [
        (
            "What the operator must do next",
            "\n".join(
                [
                    *operator,
                    f"- then run `erasure-request` for `{request_id}` again (every step is idempotent)"
                    + (" and see the run's logs" if all_clear is not False else "")
                    + ".",
                ]
            ),
        ),
        (
            "What the DPO must do next",
            f"Nothing yet: do not attest, {why}."
            + (" The pack written for this run says so tier by tier." if pack else ""),
        ),
    ]


def residue_locations(verification: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each place the probes found the subject: its target, tier and location (a file's label as in the
    scan manifest, else the probe that found it) and how much was found there."""
    if not verification:
        return []
    out = [
        {
            "target": str(f.get("target") or "reference store"),
            "tier": str(f.get("tier")),
            "location": f"file `{f['file']}`",
            "found": f.get("hits", ""),
        }
        for f in verification.get("residue_files", [])
        if isinstance(f, dict) and f.get("file")
    ]
    out += [
        {
            "target": str(p.get("target") or "reference store"),
            "tier": str(p.get("tier")),
            "location": f"probe `{p.get('method')}`",
            "found": int(p.get("residue") or 0),
        }
        for p in verification.get("probes", [])
        if int(p.get("residue") or 0) > 0
    ]
    return out


def summary_markdown(
    request_id: str,
    outcome: str,
    state: Any,
    request_state: RequestState | None,
    verification: dict[str, Any] | None,
    exceptions: Counter[str],
    pack: dict[str, Any] | None,
) -> str:
    all_clear = None if verification is None else bool(verification.get("all_clear"))
    verdict = (
        "not run"
        if verification is None
        else "**all clear**"
        if all_clear
        else "**residue found** in: " + ", ".join(f"`{t}`" for t in verification.get("failing_tiers", []))
        or "**not all clear**"
    )
    lines = [
        f"# Erasure request `{request_id}`: {outcome}",
        "",
        "| | |",
        "| --- | --- |",
        f"| flow run | {state.name}: {(state.message or '').replace('|', '/')} |",
        f"| request state | {request_state.value if request_state else 'unknown'} |",
        f"| verification | {verdict} |",
        "",
    ]
    places = residue_locations(verification)
    if places:
        lines += [
            "## Where the probes found the subject",
            "",
            "| target | tier | location | found |",
            "| --- | --- | --- | --- |",
            *(f"| {p['target']} | {p['tier']} | {p['location']} | {p['found']} |" for p in places),
            "",
        ]
    lines += ["## Open exceptions by kind", ""]
    if exceptions:
        lines += [
            "| kind | count | what it means | who acts |",
            "| --- | --- | --- | --- |",
            *(
                f"| {k} | {n} | {explain(k)} | {KINDS[k].who if k in KINDS else '?'} |"
                for k, n in sorted(exceptions.items())
            ),
            "",
        ]
    else:
        lines += ["None.", ""]
    lines += ["## Proof pack", ""]
    if pack:
        lines += [
            "| | |",
            "| --- | --- |",
            f"| path | `{pack['path']}` |",
            f"| size | {pack['bytes']:,} bytes |",
            f"| sha256 | `{pack['sha256']}` |",
            "",
        ]
    else:
        lines += ["No pack written.", ""]
    for heading, text in next_steps(request_id, outcome, all_clear, pack, exceptions):
        lines += [f"## {heading}", "", text, ""]
    return "\n".join(lines)


def report(engine: Engine, h: Home, request_id: str, state: Any) -> dict[str, Any]:
    """Everything `publish` puts in the UI, computed from the engine and the evidence folder."""
    request_state: RequestState | None
    with engine.lent() as conn:
        try:
            request_state = request_records.get(conn, request_id).state
        except NotFound:
            request_state = None
        kinds = Counter(e.kind for e in request_records.exceptions(conn, request_id, open_only=True))
    verification = verification_doc(h, request_id) or None
    pack = _pack(h, request_id)
    outcome, events = _outcome(state, request_state)
    return {
        "request_id": request_id,
        "outcome": outcome,
        "events": events,
        "request_state": request_state,
        "verification": verification,
        "exceptions": kinds,
        "pack": pack,
        "rows": tier_rows(engine, request_id, verification),
        "markdown": summary_markdown(request_id, outcome, state, request_state, verification, kinds, pack),
    }


def publish(flow: Any, flow_run: Any, state: Any) -> None:
    """State hook of the erasure-request flow (completion and failure): artifacts and events of the run."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact
    from prefect.events import emit_event

    from service.home import home

    request_id = (flow_run.parameters or {}).get("request_id")
    if not isinstance(request_id, str) or not is_safe_token(request_id):
        return  # refused before it started: nothing to report under
    try:
        h = home()
        with Engine.session(h.engine_db) as engine:  # after the flow's end: an entry point of its own
            rep = report(engine, h, request_id, state)
    except ErasureError:
        return  # no engine (or no such request): nothing to report
    rows = rep["rows"]
    create_table_artifact(
        key=artifact_key(request_id),
        table=rows,
        description=f"Erasure request {request_id}: {rep['outcome']}, per tier "
        "(status, count before, count after, residue found by the probes)",
    )
    create_markdown_artifact(
        key=summary_key(request_id),
        markdown=rep["markdown"],
        description=f"Erasure request {request_id}: {rep['outcome']}",
    )
    v = rep["verification"]
    payload = {
        "request_id": request_id,
        "outcome": rep["outcome"],
        "flow_state": state.name,
        "request_state": rep["request_state"].value if rep["request_state"] else None,
        "all_clear": None if v is None else bool(v.get("all_clear")),
        "exceptions": dict(rep["exceptions"]),
        "pack_sha256": rep["pack"]["sha256"] if rep["pack"] else None,
    }
    for event in rep["events"]:
        emit_event(
            event=event,
            resource={
                "prefect.resource.id": resource_id(request_id),
                "prefect.resource.name": request_id,
                "erasure.request-id": request_id,
            },
            payload=payload,
        )


def create_dpo_automation(api_url: str, definition: Path, webhook: str, *, block_name: str) -> dict[str, Any]:
    """Save a webhook notification block for the DPO and create (or replace) the automation of
    `definition` (a Prefect automation in YAML) with that block as its notification target."""
    import yaml
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client
    from prefect.events.schemas.automations import AutomationCore

    doc = yaml.safe_load(definition.read_text())
    block = CustomWebhookNotificationBlock(
        name="erasure DPO",
        url=webhook,
        method="POST",
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
        headers=None,
        cookies=None,
    )
    block_id = block.save(block_name, overwrite=True)
    for action in doc.get("actions", []):
        if action.get("type") == "send-notification":
            action["block_document_id"] = str(block_id)
    automation = AutomationCore.model_validate(doc)
    with get_client(sync_client=True) as client:
        for old in client.read_automations_by_name(automation.name):
            client.delete_automation(old.id)
        automation_id = client.create_automation(automation)
    return {
        "id": str(automation_id),
        "name": automation.name,
        "api_url": api_url,
        "block": block_name,
        "events": list(doc["trigger"].get("expect", [])),
    }
