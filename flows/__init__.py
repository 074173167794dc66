"""Prefect flows: erasure-request (the cascade), verification, sla-monitor, and the small operations the
compliance team triggers from the UI. Parameters are request ids and enums, never identifiers."""
