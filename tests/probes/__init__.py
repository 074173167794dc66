"""The independent probes: the matching rule, decoded views, byte scans, documents."""
