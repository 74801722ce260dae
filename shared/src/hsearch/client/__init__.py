"""What only the command line needs as a client of the API, over the ``hsearch-client``
package (``hsearch_client``: the requests, typed answers, errors and retries).

``display`` (jobs, documents, hits and answers as terminal lines), ``files`` (documents
read from JSON, JSON lines, text, Markdown, HTML and PDF files), ``state`` (what an
upload has had accepted, so a re-run resumes), ``progress`` (a bar on a terminal, plain
lines elsewhere) and ``upload`` (``hsearch ingest``: read, send, wait, report). It speaks
HTTP only: no database, store or service code (import contract ``client-over-http``).
"""
