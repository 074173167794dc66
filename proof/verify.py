"""Offline verifier of a proof pack (stdlib + cryptography only). Filled in by the proof issue."""
