"""The `erasure` command line: exit codes, arguments, start-up cost, what it prints."""
