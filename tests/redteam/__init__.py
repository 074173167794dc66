"""The red teams, generated and hand-written, and the oracles that judge them."""
