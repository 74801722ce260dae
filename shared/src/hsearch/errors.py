"""The one error hierarchy of hsearch.

Every error the domain raises on purpose derives from :class:`HsearchError` and
carries the HTTP status the API answers with and a stable machine-readable
``code``. The API renders all of them as ``{"error": code, "detail": message}``, with
``"errors": [{"field", "message", "line"?}]`` when an InvalidRequestError lists fields.

    HsearchError                      500 internal_error
    ├── InvalidRequestError           422 invalid_request       (``errors``: the fields, when known)
    │   ├── PayloadTooLargeError      413 payload_too_large
    │   ├── UnsupportedMediaTypeError 415 unsupported_media_type
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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Self


class HsearchError(Exception):
    """Root of every error hsearch raises deliberately."""

    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class FieldError:
    """One invalid field of a request: which, and what is wrong with it.

    ``line`` is the line of an NDJSON upload the field is on (1-based, as editors count);
    ``field`` is then the path inside that line's document (``tags[0]``, or empty when
    the line as a whole is wrong: not JSON, not an object)."""

    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = [f"line {self.line}"] if self.line is not None else []
        where += [self.field] if self.field else []
        return ": ".join([*where, self.message])


class InvalidRequestError(HsearchError):
    """The caller sent something we cannot act on; the message names the field.

    ``errors`` lists the fields one by one when there may be several (a batch of
    documents, an upload's lines): the API renders them as ``errors`` beside ``detail``,
    so a client can tell which documents to fix without parsing the message."""

    status_code = 422
    code = "invalid_request"

    def __init__(self, message: str, *, errors: Sequence[FieldError] = ()) -> None:
        super().__init__(message)
        self.errors = tuple(errors)

    @classmethod
    def of(cls, errors: Sequence[FieldError], *, shown: int = 20) -> Self:
        """One error for ``errors`` (at least one), its message naming the first
        ``shown`` of them."""
        detail = "; ".join(str(e) for e in errors[:shown])
        if len(errors) > shown:
            detail += f"; and {len(errors) - shown} more"
        return cls(detail, errors=errors)


class PayloadTooLargeError(InvalidRequestError):
    """A request, a batch or a document over a size limit; the message names the limit."""

    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaTypeError(InvalidRequestError):
    """A body in a format the endpoint does not read; the message names the one it does."""

    status_code = 415
    code = "unsupported_media_type"


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
