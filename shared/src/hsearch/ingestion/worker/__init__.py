"""The worker side of ingestion: running a job (leases, turns), indexing its items, flushing."""
