"""The third-party kinds: LangGraph (SQLite, PostgreSQL), Chroma, mem0."""
