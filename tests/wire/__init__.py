"""The wire format shared by the writer and the verifier."""
