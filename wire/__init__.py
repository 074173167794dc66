"""The ground floor: what the proof pack says on the wire, defined once for every side.

    format   names, canonical JSON, DSSE PAE, key ids, the audit log's entry and checkpoint hashes,
             the Merkle leaf and node, the status rules: what the writer (`proof/`), the store's audit
             log (`memory/audit*.py`), the request vault (`erasure/`) and the offline verifier
             (`proof/verify/`) all compute the same way
    explain  one sentence per exception kind, which the verifier, the DPO's signer, attestation.txt
             and the team's summaries print

It imports nothing of this project, and only the standard library and `cryptography` (import-linter
checks both), so every package may import it and the verifier's zipapp carries it.
"""
