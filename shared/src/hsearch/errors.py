"""The one error hierarchy of hsearch.

Every error the domain raises on purpose derives from :class:`HsearchError` and
carries the HTTP status the API answers with and a stable machine-readable
``code``. The API renders all of them as ``{"error": code, "detail": message}``.

    HsearchError                      500 internal_error
    ├── InvalidRequestError           422 invalid_request
    │   ├── InvalidFilterError        422 invalid_filter
    │   └── InvalidFusionError        422 invalid_fusion
    ├── NotFoundError                 404 not_found
    │   └── JobNotFoundError          404 job_not_found
    ├── ConfigurationError            500 configuration_error
    │   ├── EncoderMismatchError      409 encoder_mismatch
    │   └── CollectionSchemaError     409 collection_schema_mismatch
    ├── EncoderError                  500 encoder_error
    ├── ReindexError                  409 reindex_refused       (the live collection is untouched)
    └── BackendError                  503 backend_unavailable   (transient: retried by workers)
        ├── VectorStoreError          503 vector_store_unavailable
        │   └── VectorStoreTimeoutError  503 vector_store_timeout   (the call's deadline fired)
        └── SearchUnavailableError    503 search_unavailable    (every search leg failed)
"""

from __future__ import annotations

from typing import ClassVar


class HsearchError(Exception):
    """Root of every error hsearch raises deliberately."""

    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequestError(HsearchError):
    """The caller sent something we cannot act on; the message names the field."""

    status_code = 422
    code = "invalid_request"


class PayloadTooLargeError(InvalidRequestError):
    """A request, a batch or a document over a size limit; the message names the limit."""

    status_code = 413
    code = "payload_too_large"


class InvalidFilterError(InvalidRequestError):
    code = "invalid_filter"


class InvalidFusionError(InvalidRequestError):
    code = "invalid_fusion"


class NotFoundError(HsearchError):
    status_code = 404
    code = "not_found"


class JobNotFoundError(NotFoundError):
    code = "job_not_found"


class DocumentNotFoundError(NotFoundError):
    code = "document_not_found"


class JobFinishedError(HsearchError):
    """The job has finished: there is nothing left to cancel."""

    status_code = 409
    code = "job_finished"


class ConfigurationError(HsearchError):
    code = "configuration_error"


class EncoderMismatchError(ConfigurationError):
    """The collection was built with another encoder than the one configured."""

    status_code = 409
    code = "encoder_mismatch"


class CollectionSchemaError(ConfigurationError):
    """The collection was built by an hsearch whose chunk fields differ (an older schema
    version): ``hsearch reindex`` rebuilds it."""

    status_code = 409
    code = "collection_schema_mismatch"


class EncoderError(HsearchError):
    code = "encoder_error"


class ReindexError(HsearchError):
    """A rebuild (``hsearch reindex``) cannot finish as asked: ingestion is running,
    documents changed under it, or some failed to encode. The live collection and the
    statistics are left as they were."""

    status_code = 409
    code = "reindex_refused"


class BackendError(HsearchError):
    """A backing service (Milvus, database, broker) failed or timed out: transient."""

    status_code = 503
    code = "backend_unavailable"


class VectorStoreError(BackendError):
    code = "vector_store_unavailable"


class VectorStoreTimeoutError(VectorStoreError):
    """The store gave no answer before the call's deadline: a search leg that raises it
    is reported ``timeout``, not ``error``."""

    code = "vector_store_timeout"


class SearchUnavailableError(BackendError):
    code = "search_unavailable"
