"""The service layer: every operation a person can do, once.

`cli/` and `flows/` are thin shells over it (import-linter forbids them `tasks`, `memory`, `probes`
and `proof`); it sits on `tasks/`, `probes/`, `proof/`, `memory/` and `erasure/`, and never imports
Prefect, typer or rich.

- `service.cascade`: the one cascade driver (a single request is a window of one); `service.stages`
  its stages; `service.outcome` how a request ended (state, exit code); `service.scope` which kinds
  a home has
- `service.holds`: place and release litigation holds (by request or by subject id)
- `service.consent`: re-consent (by request, by key, by the identity of an ingest line) and the
  sticky-erasure lists
- `service.store`: create the reference store (empty or demo), its counts, ingest; `service.demo`
  `make demo`'s steps
- `service.keys`: make, rotate, enrol and trust signing keys; key ids; the audit key
- `service.pack_files`: a pack given by its file: build, show, attest, verify; `service.export` the
  regulator's export and `service.dpo_kit` the DPO's kit
- `service.restore`: restored stores' epochs, their replay, backups' rewrite and follow-ups
- `service.targets`: the targets and a subject's counts in them; `service.runs` around one flow run
- `service.clocks`: pause, resume and extend a request's clock
- `service.intake`: submit one envelope, drain the inbox
- `service.verification`: the sealed fingerprint, the probes, `verification.json`
- `service.packs`: the engine-signed proof pack
- `service.metrics`: Prometheus metrics of the open requests
- `service.home`: the home from the environment, its engine key and targets; `service.locks` the run
  locks (a request id is checked by `erasure.request_ids.checked_request_id`, a failure told by
  `erasure.errors.user_reason`)
"""
