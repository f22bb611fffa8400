"""Shared stores beyond the embedded SQLite files (PostgreSQL + pgvector: docs/cluster.md)."""
