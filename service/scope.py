"""What a home's erasure covers, asked in one place: the reference store (our own nine tiers, with an
audit log and a tenant in its metadata) when targets.toml lists it, and every other target. The flows
and the CLI ask these functions and never branch on the kind themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.models import StepRecord
from erasure.targets import REFERENCE, Target, Targets
from memory.schema import meta, open_store
from service.home import targets_of


@dataclass(frozen=True)
class Scope:
    """The reference store (present or not) and the other targets of a home."""

    reference: bool
    others: tuple[Target, ...]
    tenant: str
    """The tenant targets.toml names (the reference store's own is `home_tenant`)."""
    per_subject: bool = False
    """Whether a window's requests run one by one (each a window of one): a target's probes count a
    bystander population the window's other subjects cannot be taken out of (another person's hits of
    the subject's shared identifiers), so an erasure and its probe there must not see another subject's
    erasure in between. A kind whose probe declares `window_baselines` takes a window whole."""


def scope_of(h: Home) -> Scope:
    """The scope of `h`'s erasures, from its targets (`targets.toml`, else the reference store alone)."""
    from probes.targets.probe import probe_for

    targets = targets_of(h)
    others = targets.external()
    return Scope(
        reference=targets.reference() is not None,
        others=others,
        tenant=targets.tenant,
        per_subject=any(not getattr(probe_for(t), "window_baselines", False) for t in others),
    )


def home_tenant(h: Home, targets: Targets | None = None) -> str:
    """The tenant a request must belong to: the reference store's, else the one targets.toml names
    (`targets`: the home's own by default)."""
    targets = targets or targets_of(h)
    if targets.reference() is None:
        return targets.tenant
    store = open_store(h.store_dir)
    try:
        return str(meta(store, "tenant_id"))
    finally:
        store.close()


def audit_public_pem(h: Home) -> bytes | None:
    """The reference store's audit checkpoint public key; None when the home keeps no audit log of ours."""
    from memory.audit import checkpoint_public_pem

    return checkpoint_public_pem(h.store_dir) if scope_of(h).reference else None


def step_records(engine: Engine, h: Home, request_id: str) -> dict[str, dict[str, StepRecord]]:
    """The request's step records by target name (the reference store first) and step; a target with
    none yet is listed empty."""
    scope = scope_of(h)
    with engine.lent() as conn:
        out: dict[str, dict[str, StepRecord]] = {}
        if scope.reference:
            out[REFERENCE] = {s.step: s for s in request_records.steps(conn, request_id)}
        for s in request_records.target_steps(conn, request_id):
            out.setdefault(str(s.target), {})[s.step] = s
    for t in scope.others:
        out.setdefault(t.name, {})
    return out
