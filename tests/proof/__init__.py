"""The proof pack, its signing keys, trusted time and the offline verifier."""
