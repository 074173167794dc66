"""The cascade: one module per tier, each implementing `tasks.tier_step.TierStep`, run by
`tasks.runner.run_step` in DESIGN.md's order. The cascade driver (`service/cascade.py`) runs each
step (the flows wrap it in a task); the same functions run without Prefect in tests and crash drills."""
