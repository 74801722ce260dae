"""Operator tools: rebuilding the collection, reconciling the stores, the data directory."""
