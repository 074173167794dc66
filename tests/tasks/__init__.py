"""The cascade's tasks: the nine steps, mention lookups, byte hygiene, backups."""
