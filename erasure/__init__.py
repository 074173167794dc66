"""Domain core: request envelope, step records, tier names, regulatory clocks, config, errors.

Everything else imports from here; this package imports only the stdlib, pydantic, cryptography and
the SQLite driver (apsw + sqlite-vec), so the probes and the proof writer can depend on it safely.
"""
