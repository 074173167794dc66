"""One Outcome for every way a run ends (issue 36): every flow's Prefect state and every command's exit
code come from `service.outcome.Outcome`, and the README's table of outcomes says what each gives.

Statically: no module of `flows/`, `cli/` or `service/` builds a Prefect state but `flows/ended.py`
(the one place, from an Outcome), none names a state by a string of its own, none raises an outcome's
error class itself or exits with a code of its own, and every flow in prefect.yaml either ends through
`ended` or returns a plain value. Behaviourally: each member's Prefect state (type and name), exit code
and request state are the README table's, and a state built by `ended` reads back as its outcome."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
import yaml
from prefect import State

from erasure.states import RequestState
from flows.ended import ended, outcome_of
from service.outcome import Outcome, window_error, window_outcome

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("flows", "cli", "service")
STATE_BUILDER = Path("flows/ended.py")
OUTCOME_MODULE = Path("service/outcome.py")
ERROR_TO_EXIT = Path("cli/main.py")  # `ErasureError` -> its exit code, once
# Exits that are no run's outcome: a process supervisor says whether its processes stayed up, and
# `pack verify` is the offline verifier's FAIL line (a file checked, nothing run).
OWN_EXITS = {
    Path("cli/pack.py"),
    Path("cli/server.py"),
    Path("cli/serve.py"),
    Path("cli/prefect_worker.py"),
    Path("service/metrics.py"),
}
STATE_CLASSES = {"Completed", "Failed", "Crashed", "Cancelled", "Cancelling", "Pending", "Running", "Paused"}
OUTCOME_ERRORS = {"VerificationFailed", "BystandersLost", "RunFailed", "ReplayFailed"}


def _modules() -> list[Path]:
    return sorted(p.relative_to(ROOT) for d in SCANNED for p in (ROOT / d).rglob("*.py"))


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _int_literal(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)


def _findings(rel: Path, source: str | None = None) -> list[str]:
    """What in this module (or `source`, as if it were there) decides a state or an exit code on its own."""
    tree = ast.parse((ROOT / rel).read_text() if source is None else source)
    out: list[str] = []
    names = {o.state_name for o in Outcome} - {"Completed", "Failed"}
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.ImportFrom) and node.module == "prefect.states" and rel != STATE_BUILDER:
            out.append(f"{where}: imports prefect.states (build a state with flows.ended.ended)")
        if isinstance(node, ast.Call):
            called = _name(node.func)
            if called in STATE_CLASSES and rel != STATE_BUILDER:
                out.append(f"{where}: builds a {called} state")
            if called in OUTCOME_ERRORS and rel != OUTCOME_MODULE:
                out.append(f"{where}: raises {called} itself (use Outcome.raise_error)")
            code = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "code"), None)
            if called in ("Exit", "SystemExit", "exit") and rel not in OWN_EXITS and _int_literal(code):
                out.append(f"{where}: exits with a code of its own")
        if (
            isinstance(node, ast.Return)
            and _int_literal(node.value)
            and getattr(node.value, "value", 0) != 0
            and rel not in OWN_EXITS | {ERROR_TO_EXIT, OUTCOME_MODULE}
        ):
            out.append(f"{where}: returns an exit code of its own")
        if isinstance(node, ast.Constant) and node.value in names and rel != OUTCOME_MODULE:
            out.append(f"{where}: names the state {node.value!r} by its string")
    return out


def test_no_flow_command_or_service_decides_a_state_or_exit_code_of_its_own() -> None:
    modules = _modules()
    assert len(modules) > 40 and STATE_BUILDER in modules and ERROR_TO_EXIT in modules
    found = [f for rel in modules for f in _findings(rel)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    ("source", "finding"),
    [
        ('from prefect.states import Failed\nFailed(name="Residue")\n', "builds a Failed state"),
        ("import typer\nraise typer.Exit(code=7)\n", "exits with a code of its own"),
        ("import typer\nraise typer.Exit(1)\n", "exits with a code of its own"),
        ("import sys\nsys.exit(10)\n", "exits with a code of its own"),
        ("raise SystemExit(10)\n", "exits with a code of its own"),
        ("from erasure.errors import VerificationFailed\nraise VerificationFailed('x')\n", "raises VerificationFailed"),
        ('if state.name == "Reopened": pass\n', "names the state 'Reopened'"),
        ("def main() -> int:\n    return 7\n", "returns an exit code of its own"),
    ],
)
def test_the_scan_catches_each_way_of_deciding_alone(source: str, finding: str) -> None:
    """The check can fail: each way a module could decide a state or exit code itself is found."""
    got = _findings(Path("cli/some_command.py"), source)
    assert any(finding in f for f in got), got


def _deployed_flows() -> list[tuple[str, str]]:
    doc = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    return [(d["name"], d["entrypoint"]) for d in doc["deployments"]]


@pytest.mark.parametrize(("deployment", "entrypoint"), _deployed_flows(), ids=lambda v: str(v))
def test_every_deployed_flow_ends_through_the_outcome(deployment: str, entrypoint: str) -> None:
    """A flow returns a plain value (Prefect: Completed) or its State, built by `ended` from an Outcome."""
    module_name, fn_name = entrypoint.split(":")
    module = importlib.import_module(module_name)
    fn = getattr(module, fn_name).fn
    rel = Path(inspect.getfile(module)).resolve().relative_to(ROOT)
    assert rel in _modules() and _findings(rel) == [], (deployment, rel)
    if inspect.signature(fn).return_annotation in (State, "State"):
        body = ast.parse(inspect.getsource(module))
        calls = {_name(n.func) for n in ast.walk(body) if isinstance(n, ast.Call)}
        assert "ended" in calls or "flow_state" in calls or "_signed_off" in calls, deployment


def test_commands_that_run_a_flow_take_their_exit_code_from_the_outcome() -> None:
    """Every command that runs a flow in this process ends by an Outcome's error (or the service's,
    which raises one), never by a code of its own."""
    runners = [
        p
        for p in _modules()
        if p.parts[0] == "cli" and ("return_state=True" in (src := (ROOT / p).read_text()) or "run_flow(" in src)
    ]
    assert {Path("cli/run.py"), Path("cli/window.py"), Path("cli/reverify.py"), Path("cli/restore.py")} <= set(runners)
    for p in runners:
        src = (ROOT / p).read_text()
        assert re.search(r"raise_error\(|window_error\(|outcome_of\(|\.exit_code|service\.restore|restore\.", src), p


def _readme_table() -> dict[str, tuple[str, str, int, str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str, int, str]] = {}
    for line in section.splitlines():
        m = re.match(r"\| `(\w+)` \| (Completed|Failed) `(\w+)` \| (\d+) \| ([^|]+) \|", line)
        if m:
            rows[m[1]] = (m[2], m[3], int(m[4]), m[5].strip())
    return rows


def test_readme_lists_every_outcome() -> None:
    assert set(_readme_table()) == {o.value for o in Outcome}


@pytest.mark.parametrize("outcome", list(Outcome), ids=lambda o: o.value)
def test_each_outcome_gives_the_readme_state_exit_code_and_request_state(outcome: Outcome) -> None:
    kind, name, code, request_state = _readme_table()[outcome.value]
    assert outcome.state_name == name
    assert outcome.exit_code == code
    assert outcome.state == (None if request_state == "(unchanged)" else RequestState(request_state))
    state = ended(outcome, "one sentence", {"request_id": "req-1"})
    assert (state.is_completed(), state.is_failed()) == (kind == "Completed", kind == "Failed")
    assert state.name == name and state.message == "one sentence"
    assert outcome_of(state) is outcome
    err = outcome.error("why")
    assert (err is None) == (code == 0) and (err is None or (err.exit_code, str(err)) == (code, "why"))


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([], Outcome.noop),
        ([Outcome.all_clear, Outcome.held, Outcome.noop], Outcome.all_clear),
        ([Outcome.failed, Outcome.bystanders_lost, Outcome.residue], Outcome.residue),
        ([Outcome.failed, Outcome.bystanders_lost], Outcome.bystanders_lost),
        ([Outcome.all_clear, Outcome.no_pack], Outcome.failed),
    ],
)
def test_a_window_ends_as_its_worst_request(outcomes: list[Outcome], expected: Outcome) -> None:
    assert window_outcome(outcomes) is expected
    err = window_error(outcomes)
    assert (0 if err is None else err.exit_code) == expected.exit_code


def test_the_verification_subflow_leaves_the_request_state_to_its_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_harness: None
) -> None:
    """Nothing erased yet, so the probes find the subject. As another flow's subflow (how the
    erasure-request flow runs it) the verification flow returns `residue` and writes no request state:
    the cascade driver is the one writer. Run on its own (its deployment) it is its request's driver
    and records the outcome's state."""
    from prefect import flow

    from erasure import request_records
    from erasure.config import Home
    from erasure.engine import open_engine
    from flows.verification import verification
    from tests.cascade_fixtures import build_store, submit

    h = Home.resolve(tmp_path / "home", tmp_path / "evidence").ensure()
    monkeypatch.setenv("ERASURE_HOME", str(h.root))
    monkeypatch.setenv("ERASURE_EVIDENCE", str(h.evidence_root))
    build_store(h, tmp_path / "build")
    submit(h, "req-verify-1")

    def request_state() -> RequestState:
        engine = open_engine(h.engine_db)
        try:
            return request_records.get(engine, "req-verify-1").state
        finally:
            engine.close()

    @flow(name="a-driver-of-verification", persist_result=False)
    def driver() -> tuple[Outcome | None, str | None]:
        state = verification("req-verify-1", return_state=True)
        return outcome_of(state), state.name

    assert driver() == (Outcome.residue, "Residue")
    assert request_state() is RequestState.submitted
    alone = verification("req-verify-1", return_state=True)
    assert outcome_of(alone) is Outcome.residue and alone.name == "Residue", alone
    assert request_state() is Outcome.residue.state is RequestState.exception
