"""Lazy graph search: relevance tests, claims and best-first deepening under one budget
(docs/lazy.md)."""
