"""The reference store: ingest, schema, audit log, the demo store, subprocessors."""
