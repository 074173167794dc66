"""The one cascade driver: a window of requests (a single request is a window of one, by this code).

Per request: its own preflight, footprint, nine step records, verification.json and signed pack. Once
for the window: the fingerprint's store facts and byte scan, the byte-hygiene scrub, the verification's
byte scan and tier probes. A held request is skipped and reported (`blocked`, with the items held); a
request whose stage cannot finish leaves the window there (state `exception`, a rerun resumes it), the
others go on. Other targets are erased for the whole window too, a served one (a Chroma server) with
its server stopped once for all the window's erasures and once for all its verifications; their
bystander baselines leave out the window's other subjects (`service.verification.window_baselines`).
A home with a target whose probes count bystanders only per subject (`Scope.per_subject`: LangGraph,
mem0) erases its requests one by one, each a window of one, so an erasure and its probe there never see
another subject's erasure in between.

The stages come from the caller (`service.stages.Stages`): Prefect tasks in the flows, plain functions
without Prefect. How each request ended is an `Outcome`, which decides its state (here) and the exit
code (the CLI).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import TypeVar

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import Conflict, user_reason
from erasure.models import StepRecord, StepStatus
from erasure.states import RequestState
from erasure.tiers import CASCADE_ORDER
from proof.history import start_run
from service.home import engine_key_present
from service.locks import request_lock, store_lock
from service.outcome import Outcome, Result
from service.scope import scope_of
from service.stages import Failure, Stages
from service.verification import Verdict, judge
from tasks import epochs, runner
from tasks.preflight import Action, Preflight

T = TypeVar("T")
ALL_CLEAR_MESSAGE = "erased, verified all clear, awaiting DPO attestation"


def pending(engine: Engine) -> list[str]:
    """Every submitted request, and every one left `running` (a run that died: one that is still alive
    holds the request's lock, and the window skips it)."""
    with engine.lent() as conn:
        return [
            r.request_id for r in request_records.list_requests(conn, [RequestState.submitted, RequestState.running])
        ]


def record(engine: Engine, results: Mapping[str, Result], *, also: Iterable[str] = ()) -> None:
    """Set each request's state as its outcome says (with the detail); `also`: set these `running`."""
    with engine.lent() as conn:
        for rid in also:
            request_records.set_state(conn, rid, RequestState.running)
        for rid, result in results.items():
            if result.outcome.state is not None:
                request_records.set_state(conn, rid, result.outcome.state, result.detail)


def run_requests(engine: Engine, h: Home, request_ids: list[str], stages: Stages) -> dict[str, Result]:
    """Run these requests as one window (or one by one, see the module): preflight, hold, cascade,
    verification and packs, on the run's engine (the caller's `Engine.session`, which the stages'
    tasks borrow). Returns each request's `Result`, in the order given."""
    engine_key_present(h)
    results: dict[str, Result] = {}
    with contextlib.ExitStack() as locks:
        runnable: list[str] = []
        for rid in request_ids:
            try:
                locks.enter_context(request_lock(h, rid))
                runnable.append(rid)
            except Conflict as exc:
                results[rid] = Result(Outcome.skipped, str(exc))
        checked = stages.preflight(runnable) if runnable else {}
        go = [rid for rid in runnable if _before_the_cascade(rid, checked[rid], results)]
        held = {
            rid: pf.holds for rid, pf in checked.items() if isinstance(pf, Preflight) and pf.action is Action.blocked
        }
        if held:  # hold wins: nothing is erased, and the state says how much is held
            counted = stages.footprint(list(held))
            for rid, holds in held.items():
                found = counted.get(rid)
                results[rid] = Result(
                    Outcome.held,
                    (
                        f"litigation hold: {sum(found.values())} item(s) held under {holds} hold(s); nothing erased"
                        if isinstance(found, dict)
                        else f"litigation hold: {holds} hold(s) on the subject; nothing erased"
                    ),
                )
        record(engine, results)
        windows = [[rid] for rid in go] if scope_of(h).per_subject else [go]
        for window in (w for w in windows if w):
            results |= erase_window(h, engine, window, stages, lock=lambda: _store_held(h, stages))
    return {rid: results[rid] for rid in request_ids}


def _before_the_cascade(rid: str, pf: Preflight | Failure, results: dict[str, Result]) -> bool:
    """Whether the preflight lets the request run; otherwise its result (held: counted by the caller)."""
    if isinstance(pf, Failure):
        results[rid] = Result(Outcome.refused, pf.reason)
    elif pf.action is Action.noop:
        results[rid] = Result(Outcome.noop, f"already completed ({pf.state}): nothing to do")
    elif pf.action is Action.conflict:
        results[rid] = Result(Outcome.conflict, pf.detail)
    return pf.action is Action.run if isinstance(pf, Preflight) else False


@contextlib.contextmanager
def _store_held(h: Home, stages: Stages) -> Iterator[None]:
    """The store's writer slot and its lock, together."""
    with stages.writer(), store_lock(h):
        yield


def erase_window(
    h: Home,
    engine: Engine,
    request_ids: list[str],
    stages: Stages,
    lock: Callable[[], AbstractContextManager[object]] | None = None,
) -> dict[str, Result]:
    """The subprocessors' HTTP calls first, with the store not locked (a processor may be slow, and no
    erasure of the store waits on that); then fingerprint, footprints, the nine steps (step 8 only
    drops the local records of processors whose receipts say done), one scrub, every other target and
    the store's part of the verification, for requests that passed their preflight, under `lock()`
    (the store's writer slot and lock; without one, the caller holds them); then, with the store
    released, the processors' lookups and each request's verdict (the ledger entry of an all-clear
    one under `lock()` again, briefly) and the packs: a processor or a timestamp authority may be
    slow, and no erasure of the store waits on that. A request leaves the window at its first stage
    that does not finish (recorded); the others go on."""
    results: dict[str, Result] = {}
    active = list(request_ids)
    exceptions: set[str] = set()

    def drop(got: Mapping[str, object], what: str) -> None:
        """Requests whose stage failed leave the window with their reason."""
        nonlocal active
        for rid in active:
            r = got.get(rid, Failure("no result"))
            if isinstance(r, Failure):
                why = (
                    f"{what} did not finish: {r.reason}"
                    if r.ours and what.startswith("target ")
                    else f"{what} did not finish: rerun the request to resume it ({r.reason})"
                )
                results[rid] = Result(Outcome.failed, why[:300])
        active = [rid for rid in active if rid not in results]

    def whole(call: Callable[[list[str]], T], what: str) -> T | None:
        """A stage for the window as a whole: an error fails every request still in it."""
        try:
            return call(active)
        except Exception as exc:
            drop(dict.fromkeys(active, Failure(user_reason(exc))), what)
            return None

    record(engine, {}, also=request_ids)
    try:
        for rid in request_ids:  # a reopened request's rerun writes its files in a run folder of its own
            start_run(h.evidence_dir(rid))
        if scope_of(h).reference:  # step 8's HTTP, with no lock of the store held (issue 34)
            drop(stages.subprocessors(active), "subprocessor calls")
        with lock() if lock is not None else contextlib.nullcontext():
            whole(stages.fingerprint, "fingerprint")
            scope = scope_of(h)
            if active and scope.reference:
                with runner.shared_mentions(active, h):  # the store's texts read once for every step of every request
                    drop(stages.footprint(active), "footprint")
                    for tier in CASCADE_ORDER:
                        if not active:
                            break
                        got = stages.step(tier.value, active)
                        exceptions |= {
                            rid
                            for rid, r in got.items()
                            if isinstance(r, StepRecord) and r.status is StepStatus.exception
                        }
                        drop(got, f"step {tier.value}")
                if active:
                    whole(stages.scrub, "byte hygiene")
            for target in scope.others:
                if not active:
                    break
                erased = stages.target(target.name, active)
                exceptions |= {rid for rid, r in erased.items() if not isinstance(r, Failure) and r["mentions"]}
                drop(erased, f"target {target.name}")
            whole(stages.probe, "verification")  # the store's part of it, under the lock
        # The processors asked, with the store released (issue 34), then each request judged whole.
        verdicts = whole(stages.verify, "verification") or {}
        verified = [rid for rid in active if not isinstance(verdicts.get(rid), Failure)]
        cleared = [
            rid
            for rid, v in verdicts.items()
            if rid in verified and not isinstance(v, Failure) and judge(v)[0] is Outcome.all_clear
        ]
        if cleared:  # the ledger of erasures (issue 26) reads the store's epochs: under its lock, again
            with lock() if lock is not None else contextlib.nullcontext():
                for rid in cleared:
                    epochs.record_completed(rid, h)
        packs = stages.packs(verified) if verified else {}  # the store released: a TSA may be slow
        for rid in active:
            results[rid] = _judged(verdicts.get(rid, Failure("no verdict")), packs.get(rid), rid in exceptions)
    except Exception as exc:
        # Never leave a request `running`: the SLA monitor shows the recorded state.
        for rid in request_ids:
            results.setdefault(rid, Result(Outcome.failed, user_reason(exc)))
        record(engine, results)
        raise
    record(engine, results)
    return results


def _judged(verdict: Verdict | Failure, pack: str | Failure | None, exceptions: bool) -> Result:
    """A verified request's outcome: the verdict, and for all clear, its signed pack."""
    if isinstance(verdict, Failure):
        return Result(Outcome.failed, f"verification did not finish: {verdict.reason}")
    outcome, why = judge(verdict)
    written = pack if isinstance(pack, str) else None
    if outcome is not Outcome.all_clear:
        return Result(outcome, why, written)
    if written is None:  # it erased, and there is no signed pack to show for it: never exit 0
        reason = pack.reason if isinstance(pack, Failure) else "no pack"
        return Result(
            Outcome.no_pack, f"erased and verified, but the proof pack was not written: {reason}; rerun the request"
        )
    return Result(Outcome.all_clear, "erased with exceptions: see the pack" if exceptions else None, written)
