"""Repositories: the only place SQL is written. They ``flush()``, never commit."""
