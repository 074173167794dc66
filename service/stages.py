"""The stages of an erasure, each for every request of a window at once (a single request is a window of
one). `service.cascade` drives them in order; the flows wrap each one in a Prefect task, and `direct`
binds them to a home for a run without Prefect.

A request's failure in a stage is returned as its `Failure` (its reason never holds an identifier); the
other requests of the window go on.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TypeVar

from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError, user_reason
from erasure.models import StepRecord
from erasure.tiers import Tier
from service.home import targets_of
from service.packs import write_engine_pack
from service.scope import scope_of
from service.verification import Verdict, keep_probes, seal_fingerprints, verdict_of, verify_requests
from tasks import runner
from tasks.preflight import Preflight as Preflight  # re-exported: the flows name the stages' results
from tasks.preflight import preflight
from tasks.targets.runner import TargetErased as TargetErased
from tasks.targets.runner import erase_target_window

T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """Why a stage did not finish for a request. `ours`: one of our errors, whose message says why (a
    rerun may not fix it); otherwise an unexpected error, named by its type only."""

    reason: str
    ours: bool = True


def each(request_ids: list[str], work: Callable[[str], T]) -> dict[str, T | Failure]:
    """`work(rid)` for every request; a failure is kept as its reason, the others go on."""
    out: dict[str, T | Failure] = {}
    for rid in request_ids:
        try:
            out[rid] = work(rid)
        except Exception as exc:  # one request's failure must not stop the window
            out[rid] = Failure(user_reason(exc), isinstance(exc, ErasureError))
    return out


def preflight_all(h: Home, request_ids: list[str]) -> dict[str, Preflight | Failure]:
    """Each request's preflight (`tasks.preflight`): run, noop, blocked, conflict; a refusal as Failure."""
    scope = scope_of(h)
    return each(
        request_ids,
        lambda rid: preflight(rid, h, reference=scope.reference, tenant=scope.tenant, targets=scope.others),
    )


def subprocessors_all(h: Home, request_ids: list[str]) -> dict[str, Failure | None]:
    """Step 8's HTTP calls for every request (`tasks.runner.call_subprocessors`), made before the store's
    lock and writer slot are taken: a slow processor keeps no other erasure of the store waiting."""
    return each(request_ids, lambda rid: runner.call_subprocessors(rid, h))


def footprint_all(h: Home, request_ids: list[str]) -> dict[str, dict[str, int] | Failure]:
    """Every request's footprint in the reference store before its first deletion (counts per tier)."""
    return each(request_ids, lambda rid: runner.prepare(rid, h))


def run_tier(h: Home, step: str, request_ids: list[str]) -> dict[str, StepRecord | Failure]:
    """One tier's step for every request, one after another (a record per request). A step that rewrites
    a whole (the fine-tune corpus) does it once, without every subject of the window: each request's
    count is taken before the first rewrite, so its record keeps what it had."""
    tier = Tier(step)
    with runner.window(request_ids):
        before: dict[str, int | Failure] = {}
        if getattr(runner.STEPS[tier], "window_shared", False) and len(request_ids) > 1:
            before = each(request_ids, lambda rid: runner.count_step(rid, tier, h))

        def one(rid: str) -> StepRecord:
            counted = before.get(rid)
            return StepRecord.model_validate(
                runner.run_step(rid, tier, h, before=counted if isinstance(counted, int) else None)
            )

        return each(request_ids, one)


def erase_target_all(h: Home, name: str, request_ids: list[str]) -> dict[str, TargetErased | Failure]:
    """Erase every request's subject from the target `name` (one step record per tier); a served target's
    server is stopped once for all of them (`erase_target_window`)."""
    target = targets_of(h).by_name(name)
    try:
        got = erase_target_window(request_ids, target, h)
    except Exception as exc:  # before anything was touched: the window as a whole
        return dict.fromkeys(request_ids, Failure(user_reason(exc), isinstance(exc, ErasureError)))
    return {
        rid: Failure(user_reason(r), isinstance(r, ErasureError)) if isinstance(r, Exception) else r
        for rid, r in got.items()
    }


def scrub_all(h: Home, request_ids: list[str]) -> dict[str, object]:
    """Per request the epilogue; one rebuild of the reference store's pages for the whole window."""
    return runner.scrub_window(request_ids, h)


def probe_all(engine: Engine, h: Home, request_ids: list[str]) -> dict[str, str]:
    """The store's part of every request's verification, read under the store's lock and kept in this
    process (`service.verification.keep_probes`) for `verify_all`, which asks the processors after."""
    keep_probes(engine, h, request_ids)
    return dict.fromkeys(request_ids, "probed")


def verify_all(engine: Engine, h: Home, request_ids: list[str]) -> dict[str, Verdict | Failure]:
    """The independent probes for every request at once; each request's verification.json."""
    return {rid: verdict_of(doc) for rid, doc in verify_requests(engine, h, request_ids).items()}


def packs_all(engine: Engine, h: Home, request_ids: list[str]) -> dict[str, str | Failure]:
    """Each request's engine-signed pack (its path); evidence missing or contradicting itself: Failure."""
    return each(request_ids, lambda rid: str(write_engine_pack(engine, h, rid)["pack"]))


@dataclass(frozen=True)
class Stages:
    """The stages the driver calls, each taking the window's request ids (and a step's or a target's
    name first). The flows give Prefect tasks; `direct` gives the functions above."""

    preflight: Callable[[list[str]], dict[str, Preflight | Failure]]
    fingerprint: Callable[[list[str]], dict[str, str]]
    footprint: Callable[[list[str]], dict[str, dict[str, int] | Failure]]
    step: Callable[[str, list[str]], dict[str, StepRecord | Failure]]
    target: Callable[[str, list[str]], dict[str, TargetErased | Failure]]
    scrub: Callable[[list[str]], dict[str, object]]
    probe: Callable[[list[str]], dict[str, str]]
    """The store's part of the verification, under the store's lock (`probe_all`)."""
    verify: Callable[[list[str]], dict[str, Verdict | Failure]]
    """The verification finished with the store released: the processors asked, each verdict."""
    packs: Callable[[list[str]], dict[str, str | Failure]]
    subprocessors: Callable[[list[str]], dict[str, Failure | None]]
    """Step 8's HTTP calls, before the store's lock is taken (`subprocessors_all`)."""
    writer: Callable[[], AbstractContextManager[object]] = nullcontext
    """One writer per store across machines (the flows: Prefect's global concurrency slot)."""


def direct(h: Home, engine: Engine) -> Stages:
    """The stages bound to `h` and its engine (the caller's), without Prefect (tests, benches, crash
    drills)."""
    return Stages(
        preflight=lambda ids: preflight_all(h, ids),
        fingerprint=lambda ids: seal_fingerprints(engine, h, ids),
        footprint=lambda ids: footprint_all(h, ids),
        step=lambda s, ids: run_tier(h, s, ids),
        target=lambda n, ids: erase_target_all(h, n, ids),
        scrub=lambda ids: scrub_all(h, ids),
        probe=lambda ids: probe_all(engine, h, ids),
        verify=lambda ids: verify_all(engine, h, ids),
        packs=lambda ids: packs_all(engine, h, ids),
        subprocessors=lambda ids: subprocessors_all(h, ids),
    )
