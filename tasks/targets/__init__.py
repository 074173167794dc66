"""Erasing modules for the agent memories teams run, one per kind (see `tasks.targets.eraser`)."""
