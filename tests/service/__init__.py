"""The service layer: reverification, re-consent, restores, deadlines, locks."""
