"""Local child processes: what ``hsearch run``, the integration suite and the benchmarks
start on this machine (Milvus Lite's server, Celery workers, the API, the local model
server), the commands that start them, and the Milvus Lite server itself.

A layer of its own, above the base only (contract ``layers``): the other processes are
known here by their command lines, never imported.
"""
