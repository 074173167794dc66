"""The `erasure-window` flow: several requests erased as one window, a thin shell over the one cascade
driver (`service.cascade`): one Prefect task per stage, each for every request of the window, so the
task count grows with the tiers, not with requests x tiers. Its only parameter is request ids (tokens,
never identifiers); none means every submitted request (and every one a dead run left running).

The `erasure-request` flow (`flows.erasure_request`) runs a window of one through the same tasks."""

from __future__ import annotations

from typing import Annotated

from prefect import State, flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from erasure.engine_db import Engine
from erasure.models import StepRecord
from erasure.request_ids import checked_request_id
from flows.ended import ended
from flows.parameters import RequestId, described
from flows.store_slot import store_writer
from service import cascade, stages
from service.home import home
from service.outcome import Outcome, Result, counts, window_outcome
from service.stages import Failure, Preflight, Stages, TargetErased
from service.verification import Verdict, seal_fingerprints

RequestIds = Annotated[
    list[RequestId] | None,
    described(
        max_length=1000,
        description="The request ids to run as one window (at most 1,000). Empty: every submitted request.",
    ),
]


@task(name="window-preflight", retries=0, cache_policy=NO_CACHE)
def window_preflight(request_ids: list[str]) -> dict[str, Preflight | Failure]:
    """Each request's preflight: run, noop (already done), conflict (aliases unconfirmed) or blocked."""
    return stages.preflight_all(home(), request_ids)


@task(name="window-fingerprint", retries=0, cache_policy=NO_CACHE)
def window_fingerprint(request_ids: list[str]) -> dict[str, str]:
    """The probes' fingerprints of every subject, sealed per request, taken together (one store-facts
    read, one byte scan, one bystander baseline); one sealed by an earlier run is kept."""
    h = home()
    with Engine.session(h.engine_db) as engine:  # the flow's: this thread runs with a copy of its context
        return seal_fingerprints(engine, h, request_ids)


@task(name="window-subprocessors", retries=0, cache_policy=NO_CACHE)
def window_subprocessors(request_ids: list[str]) -> dict[str, Failure | None]:
    """Step 8's HTTP calls (deletions, rectifications, receipts), before the store's writer slot and
    lock are taken: a slow processor keeps no other erasure of the store waiting."""
    return stages.subprocessors_all(home(), request_ids)


@task(name="window-footprint", retries=0, cache_policy=NO_CACHE)
def window_footprint(request_ids: list[str]) -> dict[str, dict[str, int] | Failure]:
    """Every request's footprint before its first deletion (counts per tier)."""
    return stages.footprint_all(home(), request_ids)


@task(name="window-step", task_run_name="step-{step}", retries=0, cache_policy=NO_CACHE)
def window_step(step: str, request_ids: list[str]) -> dict[str, StepRecord | Failure]:
    """One tier's step for every request of the window. Never cached: the runner is idempotent (a
    finished step that finds nothing left keeps its record), so a rerun re-resolves and re-erases."""
    got = stages.run_tier(home(), step, request_ids)
    log = get_run_logger()
    for rid, r in got.items():
        if isinstance(r, StepRecord):
            log.info("%s step %s: %s, before %s, after %s", rid, step, r.status.value, r.before_count, r.after_count)
    return got


@task(name="target", task_run_name="target-{target_name}", retries=0, cache_policy=NO_CACHE)
def window_target(target_name: str, request_ids: list[str]) -> dict[str, TargetErased | Failure]:
    """Erase every request's subject from one target of targets.toml (one step record per tier)."""
    got = stages.erase_target_all(home(), target_name, request_ids)
    for rid, r in got.items():
        if not isinstance(r, Failure):
            get_run_logger().info("%s target %s (%s): %s", rid, target_name, r["kind"], r["tiers"])
    return got


@task(name="byte-hygiene", retries=0, cache_policy=NO_CACHE)
def window_scrub(request_ids: list[str]) -> dict[str, object]:
    """Per request the epilogue; one rebuild of the store's pages for the whole window."""
    return stages.scrub_all(home(), request_ids)


@task(name="window-store-probes", retries=0, cache_policy=NO_CACHE)
def window_probe(request_ids: list[str]) -> dict[str, str]:
    """The store's part of the verification, under the store's lock; kept in this process for the
    verification, which asks the processors after the lock is released."""
    h = home()
    with Engine.session(h.engine_db) as engine:
        return stages.probe_all(engine, h, request_ids)


@task(name="window-verification", retries=0, cache_policy=NO_CACHE)
def window_verification(request_ids: list[str]) -> dict[str, Verdict | Failure]:
    """The independent probes for every request at once; each request's verification.json."""
    h = home()
    with Engine.session(h.engine_db) as engine:
        return stages.verify_all(engine, h, request_ids)


@task(name="proof-packs", retries=0, cache_policy=NO_CACHE)
def window_packs(request_ids: list[str]) -> dict[str, str | Failure]:
    """Each request's engine-signed pack."""
    h = home()
    with Engine.session(h.engine_db) as engine:
        return stages.packs_all(engine, h, request_ids)


WINDOW = Stages(
    preflight=window_preflight,
    fingerprint=window_fingerprint,
    footprint=window_footprint,
    step=window_step,
    target=window_target,
    scrub=window_scrub,
    probe=window_probe,
    verify=window_verification,
    packs=window_packs,
    subprocessors=window_subprocessors,
    writer=lambda: store_writer(home()),
)


@flow(name="erasure-window", persist_result=False, log_prints=False)
def erasure_window(request_ids: RequestIds = None) -> State:
    """Erase several requests as one window (none given: every submitted request, and every one a dead
    run left running), verify each independently, write each one's signed pack. Held requests are
    skipped and reported."""
    h = home()
    with Engine.session(h.engine_db) as engine:  # the run's engine: its tasks borrow it
        ids = list(dict.fromkeys(checked_request_id(r) for r in request_ids or [])) or cascade.pending(engine)
        if not ids:
            return ended(Outcome.noop, "no request to run", {"requests": {}})
        results = cascade.run_requests(engine, h, ids, WINDOW)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts(results).items()))
    get_run_logger().info("window of %d request(s): %s", len(ids), summary)
    data = {"requests": {rid: r.to_json() for rid, r in results.items()}, "counts": counts(results)}
    return ended(window_outcome(r.outcome for r in results.values()), f"window: {summary}", data)


def _window(request_ids: list[str]) -> dict[str, Result]:
    """The window's erasure of requests that passed their preflight (`cascade.erase_window`), without
    the flow's locks: crash drills run it in a process they kill."""
    h = home()
    with Engine.session(h.engine_db) as engine:  # this entry point's engine (crash drills run it alone)
        return cascade.erase_window(h, engine, request_ids, WINDOW)
