"""Security findings, one file each, named after the attack."""
