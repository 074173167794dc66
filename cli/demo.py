"""`make demo`: the whole path of one request on the embedded default store.

Builds a demo store (with three local subprocessors on 127.0.0.1), creates the engine and DPO keys,
submits a GDPR request for one demo subject, runs the erasure-request flow (cascade, independent
verification, engine-signed pack), has the DPO attest, and verifies the sealed pack offline with
`python -m proof.verify`. Rerunnable: the demo's store, engine and evidence are rebuilt each time.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from cli.pack import print_summary
from cli.run import run_flow, verification_table
from cli.shell import console, home_of
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError
from service import demo, runs
from service.demo import FRAMES, REQUEST_ID, SUBJECTS
from service.outcome import Outcome
from service.pack_files import newest_pack, review_pack
from service.signoff import seal


def main() -> int:
    h = home_of(None)
    demo.reset(h)
    with Engine.session(h.engine_db) as engine:  # the command's engine, passed down
        return _show(h, engine)


def _show(h: Home, engine: Engine) -> int:
    console.rule("1. the agent-memory store")
    services = demo.start_processors(h)
    try:
        columns = (
            TextColumn("building demo store"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} frames"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console) as bar:
            task = bar.add_task("build", total=FRAMES)
            result = demo.build_store(
                h, services, on_progress=lambda done, total: bar.update(task, completed=done, total=total)
            )
        console.print(
            f"{result.frames} frames, {result.people} people ({SUBJECTS} demo subjects), "
            f"{len(services)} subprocessors on 127.0.0.1, in {result.elapsed:.1f} s"
        )

        console.rule("2. keys")
        console.print(f"engine and DPO keys in {demo.make_keys(h)} (ECDSA P-256)")

        console.rule("3. the request")
        sub = demo.submit(engine, result.subjects[0])
        console.print(f"{REQUEST_ID}: GDPR, legal deadline {_utc(sub.deadline)}, our target {_utc(sub.target)}")

        console.rule("4. erasure-request flow: cascade, verification, engine-signed pack")
        state = run_flow(engine, h, REQUEST_ID)
        ver = runs.verification_doc(h, REQUEST_ID)
        console.print()
        console.print(verification_table(ver))
        console.print(
            "independent probes: "
            + ("no residue of the subject found" if ver["all_clear"] else "RESIDUE found")
            + (
                f"; {len(ver.get('exceptions', []))} exception(s), explained with the pack below"
                if ver.get("exceptions")
                else ""
            )
        )
        from flows.ended import outcome_of

        outcome = outcome_of(state) or Outcome.failed
        if outcome.exit_code:
            console.print(f"[red]flow ended {state.name}: {state.message}[/red]")
            return outcome.exit_code
    finally:
        for s in services:
            s.stop()

    console.rule("5. the DPO reviews the engine-signed pack, then attests it")
    pack = newest_pack(h, REQUEST_ID)
    engine_pub, dpo_pub = h.keys_dir / "engine.pub.pem", h.keys_dir / "dpo.pub.pem"
    print_summary(review_pack(pack, engine_key=engine_pub))
    sealed = seal(engine, h, REQUEST_ID, h.keys_dir / "dpo.pem")
    console.print()
    console.print(
        f"the DPO attested: sealed pack {pack} ({sealed['status']})"
        + (f"; requester notified ({sealed['outbox']})" if sealed["outbox"] else "")
    )

    console.rule("6. offline verification, as the regulator does it")
    audit_pub = demo.pin_audit_key(h)  # what `erasure keys audit --out` writes: the regulator pins it
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.verify",
            str(pack),
            "--engine-key",
            str(engine_pub),
            "--dpo-key",
            str(dpo_pub),
            "--audit-key",
            str(audit_pub),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    console.print(out.stdout.strip() or out.stderr.strip(), markup=False, highlight=False)
    console.rule("next")
    console.print(
        "Start the compliance team's console (the Prefect UI and the request desk) with"
        " `.venv/bin/erasure server start`: it prints the address to open and where its credential is."
        f" The regulator's folder: `.venv/bin/erasure export {REQUEST_ID} --to DIR`.",
        markup=False,
        highlight=False,
    )
    return out.returncode


def _utc(when: datetime) -> str:
    """A time to the second, in UTC (a deadline's end of day reads 23:59:59, not 23:59:59.999999)."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ErasureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
