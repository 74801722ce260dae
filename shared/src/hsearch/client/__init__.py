"""The command line as an HTTP client of the API, like any other client.

``http`` (the API's endpoints as methods, the client's errors), ``files`` (documents
read from JSON, JSON lines, text, Markdown, HTML and PDF files), ``state`` (what an
upload has had accepted, so a re-run resumes), ``progress`` (a bar on a terminal, plain
lines elsewhere) and ``upload`` (``hsearch ingest``: read, send, wait, report). It speaks
HTTP only: no database, store or service code (import contract ``client-over-http``).
"""
