"""The cascade: one module per tier, each implementing `tasks.base.TierStep`, run by
`tasks.runner.run_step` in DESIGN.md's order. The Prefect flow (`flows/erasure_request.py`) wraps each
step in a task; the same functions run without Prefect in tests and crash drills."""
