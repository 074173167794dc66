"""Proof-pack timings: build+sign, DPO attest, offline verify (median of N runs) on synthetic evidence.

    .venv/bin/python bench/proof.py [--runs 7] [--receipts 1000] [--audit-entries 5000]

Evidence: 9 step records, `--receipts` subprocessor receipts, an audit-log redaction document (v2) over
a log of `--audit-entries` entries, every 5th the subject's (built by tests/proof_fixtures.py). Keys:
ECDSA P-256 engine, and the DPO key of `--dpo-algorithm`. (bench/audit_evidence.py measures the audit
evidence against the size of the store's log.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proof import verify
from proof.pack import attest, write_pack
from tests.proof_fixtures import make_evidence, make_keys


def _median_ms(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times), max(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--receipts", type=int, default=1000)
    ap.add_argument("--audit-entries", type=int, default=5000)
    ap.add_argument("--dpo-algorithm", default="ed25519", choices=("ecdsa-p256", "ed25519"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        keys = make_keys(root / "keys", "ecdsa-p256", args.dpo_algorithm)
        ev = make_evidence(root, n_receipts=args.receipts, n_audit=args.audit_entries)
        evidence_bytes = sum(p.stat().st_size for p in ev.iterdir() if p.is_file())
        pack = write_pack(ev, keys.engine)
        rows = [("build + sign (write_pack)", _median_ms(lambda: write_pack(ev, keys.engine), args.runs))]
        base = pack.read_bytes()

        def do_attest() -> None:
            pack.write_bytes(base)
            attest(pack, keys.dpo, engine_pub=keys.engine_pub, attested_at="2024-02-02T10:00:00Z", force=True)

        rows.append(("attest (verify + DPO sign + repack)", _median_ms(do_attest, args.runs)))
        engine_pem, dpo_pem = keys.engine_pem, keys.dpo_pem
        rows.append(
            ("verify (checks 1-8)", _median_ms(lambda: verify.verify_pack(pack, engine_pem, dpo_pem), args.runs))
        )
        data = pack.read_bytes()
        rows.append(("  of which extract (check 1)", _median_ms(lambda: verify.extract(data), args.runs)))
        print(
            f"evidence: 9 steps, {args.receipts} receipts, {args.audit_entries} audit entries;"
            f" {evidence_bytes / 1e6:.2f} MB of evidence, pack {len(data) / 1e6:.2f} MB gzipped;"
            f" engine ecdsa-p256, dpo {args.dpo_algorithm}; {args.runs} runs"
        )
        print(f"{'operation':<38}{'median ms':>11}{'min ms':>10}{'max ms':>10}")
        for name, (med, lo, hi) in rows:
            print(f"{name:<38}{med:>11.1f}{lo:>10.1f}{hi:>10.1f}")


if __name__ == "__main__":
    main()
