"""Taking the subject's fingerprint before the cascade: a window of one subject (`probes.window`).

The fingerprint itself and its sealing are `probes.fingerprint_model`; its names are exported here too,
where the flows and the tests find them."""

from __future__ import annotations

from pathlib import Path

from erasure.subject import Subject
from probes.fingerprint_model import BYSTANDER_STATE, Fingerprint, FingerprintError, destroy, sealed_pair_exists
from probes.model import DEFAULT_HTTP_TIMEOUT
from probes.window import take_window

__all__ = ["BYSTANDER_STATE", "Fingerprint", "FingerprintError", "destroy", "sealed_pair_exists", "take_fingerprint"]


def take_fingerprint(store_dir: Path, subject: Subject, *, http_timeout: float = DEFAULT_HTTP_TIMEOUT) -> Fingerprint:
    """Resolve the subject's keys, harvest the needles and measure the baseline, before the cascade: a
    window of one subject (`probes.window.take_window`). The baseline includes one byte scan, so it
    says how many needle groups and canaries the scan could see before anything was erased.
    Subprocessors are asked over HTTP (bystanders' counts) with `http_timeout`."""
    return take_window(store_dir, [subject], http_timeout=http_timeout)[0]
