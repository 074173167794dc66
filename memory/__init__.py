"""The reference agent-memory store: nine tiers in one store directory (DESIGN.md, "The nine tiers").

This is the system the erasure acts on, playing the part of a real agent platform's memory. Its
schema, ingest (with the suppression guard), demo data and maintenance live here; the cascade's
tier steps live in `tasks/`, the independent probes in `probes/`.
"""
