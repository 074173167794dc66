"""The house's own rules: imports, module size, tiers, one path, kinds, documentation links."""
