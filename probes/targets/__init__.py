"""Probing modules for the agent memories teams run, one per kind (see `probes.targets.probe`)."""
