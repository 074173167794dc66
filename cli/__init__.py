"""The `erasure` command: a thin typer layer over the library. It sits at the top of the import graph
(beside `flows/`) because it drives flows, the store and the proof writer; `erasure/` itself stays a
light domain package that the probes and the verifier can import."""
