"""The service layer: every operation a person can do, once.

`cli/` and `flows/` are thin shells over it; it sits on `tasks/`, `probes/`, `proof/`, `memory/` and
`erasure/`, and never imports Prefect, typer or rich.

- `service.cascade`: the one cascade driver (a single request is a window of one); `service.stages`
  its stages; `service.outcome` how a request ended (state, exit code); `service.scope` which kinds
  a home has
- `service.holds`: place and release litigation holds (by request or by subject id)
- `service.consent`: re-consent (allow re-ingest of an erased request's items)
- `service.clocks`: pause, resume and extend a request's clock
- `service.intake`: submit one envelope, drain the inbox
- `service.verification`: the sealed fingerprint, the probes, `verification.json`
- `service.packs`: the engine-signed proof pack
- `service.metrics`: Prometheus metrics of the open requests
- `service.common`: the home, request ids, the run locks
"""
