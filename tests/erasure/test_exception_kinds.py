"""Every exception kind the code can open has a one-sentence explanation (erasure.exception_kinds), and
it is shown wherever exceptions are: attestation.txt, the run summary, the DPO's form (issue 35).

The kinds the code can open are found apart from the table: by reading the sources (every call that
opens an exception, its kind argument resolved from literals, module constants and loops over tuples)."""

from __future__ import annotations

import ast
from collections import Counter

import pytest

from erasure import request_records
from erasure.config import PROJECT_ROOT, Home
from erasure.engine import open_engine
from erasure.exception_kinds import KINDS

#: Calls that open an exception, and where their kind argument is (position, keyword).
OPENERS = {
    "open_exception": (3, "kind"),
    "ExceptionSpec": (0, "kind"),
    "reported": (0, "kind"),
    "_sync_exceptions": (2, "kind"),
}
PACKAGES = ("erasure", "memory", "tasks", "service", "probes", "flows", "cli")


def _constants(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
        if isinstance(node, ast.ImportFrom) and node.module == "erasure.exception_kinds":
            import erasure.exception_kinds as ek

            out.update({a.asname or a.name: getattr(ek, a.name) for a in node.names})
    return out


def _loop_values(tree: ast.Module, name: str, at: ast.AST) -> set[str] | None:
    """The strings a loop variable `name` takes, when a `for` over a tuple of literal tuples binds it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and any(n is at for n in ast.walk(node)):
            tgt = node.target
            names = [tgt] if isinstance(tgt, ast.Name) else list(tgt.elts) if isinstance(tgt, ast.Tuple) else []
            pos = next((i for i, n in enumerate(names) if isinstance(n, ast.Name) and n.id == name), None)
            if pos is None or not isinstance(node.iter, ast.Tuple | ast.List):
                continue
            vals = set()
            for el in node.iter.elts:
                item = el.elts[pos] if isinstance(el, ast.Tuple) else el
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    vals.add(item.value)
            return vals
    return None


def _inside_opener(tree: ast.Module, at: ast.AST) -> bool:
    return any(
        isinstance(f, ast.FunctionDef) and f.name in OPENERS and any(n is at for n in ast.walk(f))
        for f in ast.walk(tree)
    )


def emitted_kinds() -> tuple[set[str], list[str]]:
    """(the kinds the sources open, the call sites whose kind could not be read)."""
    kinds: set[str] = set()
    unread: list[str] = []
    for pkg in PACKAGES:
        for path in sorted((PROJECT_ROOT / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text())
            consts = _constants(tree)
            for call in ast.walk(tree):
                if not isinstance(call, ast.Call):
                    continue
                fn = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
                if fn not in OPENERS:
                    continue
                pos, kw = OPENERS[fn]
                arg = next((k.value for k in call.keywords if k.arg == kw), None)
                if arg is None and len(call.args) > pos:
                    arg = call.args[pos]
                if arg is None:
                    continue
                where = f"{path.relative_to(PROJECT_ROOT)}:{call.lineno}"
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    kinds.add(arg.value)
                elif isinstance(arg, ast.Name) and arg.id in consts:
                    kinds.add(consts[arg.id])
                elif isinstance(arg, ast.Name) and (vals := _loop_values(tree, arg.id, call)):
                    kinds |= vals
                elif isinstance(arg, ast.Name) and arg.id == "kind" and _inside_opener(tree, call):
                    continue  # an opener passing its own `kind` on (its callers are read)
                elif isinstance(arg, ast.Attribute) and arg.attr == "kind":
                    continue  # a spec's kind passed on (its ExceptionSpec(...) is read)
                else:
                    unread.append(where)
    return kinds, unread


def test_every_kind_the_code_can_open_has_an_explanation() -> None:
    kinds, unread = emitted_kinds()
    assert not unread, f"kinds that cannot be read from the sources: {unread}"
    assert {"residue", "model_trained_on_subject", "mention_in_others_content", "unscanned_content"} <= kinds
    assert kinds <= set(KINDS), f"kinds without an explanation: {sorted(kinds - set(KINDS))}"
    for kind, k in KINDS.items():
        assert k.meaning.endswith(".") and k.meaning.count(". ") == 0, kind  # one sentence
        assert k.who in ("operator", "DPO", "nobody") and k.next_step, kind


def test_an_unexplained_kind_cannot_be_opened(home: Home) -> None:
    engine = open_engine(home.engine_db)
    try:
        with pytest.raises(ValueError, match="no explanation"):
            request_records.open_exception(engine, "req-x", "bytes", "some_new_kind", "k")
    finally:
        engine.close()


def test_attestation_txt_explains_each_exception() -> None:
    from proof.attestation import render

    tiers = {"fine_tune": {"status": "erasedWithExceptions", "before": 4, "after": 0, "residue": 0}}
    predicate = {
        "request_id": "req-1",
        "legal_basis": "Art.17(1)(a)",
        "received_at": "-",
        "verified_at": "-",
        "status": "erasedWithExceptions",
        "all_clear": True,
        "tiers": tiers,
        "out_of_scope": [],
        "engine_keyid": "k",
        "exceptions": [{"tier": "fine_tune", "kind": "model_trained_on_subject", "item_key": "m1"}],
    }
    text = render(predicate, tool_version="t")
    assert KINDS["model_trained_on_subject"].meaning in text


def test_the_summary_explains_each_kind_and_names_who_acts() -> None:
    from prefect.states import Completed

    from erasure.states import RequestState
    from flows.run_report import summary_markdown

    md = summary_markdown(
        "req-1",
        "awaiting attestation",
        Completed(),
        RequestState.awaiting_attestation,
        {"all_clear": True},
        Counter({"model_trained_on_subject": 1}),
        None,
    )
    assert KINDS["model_trained_on_subject"].meaning in md
    operator = md[md.index("## What the operator must do next") :]
    assert KINDS["model_trained_on_subject"].next_step in operator
