"""The Prefect flows and deployments, the served console, the UI in a real browser."""
