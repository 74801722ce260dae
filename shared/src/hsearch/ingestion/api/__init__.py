"""The API side of ingestion: jobs and documents as clients see them, quotas on submission."""
