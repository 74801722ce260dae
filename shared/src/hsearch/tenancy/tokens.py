"""Scoped search tokens: short-lived, signed, carrying a mandatory filter.

A tenant's key with the ``search`` or ``admin`` scope mints one (``POST /v1/tokens``);
a frontend hands it to a browser, which sends it as ``Authorization: Bearer <token>``.
The API verifies it without the database: the signature, the expiry and the claims are
checked here; only the parent key's state (revoked? its tenant suspended?) is read, and
that through the same in-process TTL cache as verified keys (:mod:`.service`).

The format is a JWT (RFC 7519) signed with HS256 through PyJWT: a format frontends and
their libraries already read (``exp`` is visible to them), whose pitfalls (``alg:
none``, algorithm confusion, clock leeway, required claims) a maintained library
handles. Only HS256 is accepted. The signing key is derived from the server key
(``HMAC-SHA-256(server key, "hsearch search token v1")``), so a token's signature and a
stored key hash are never computed under the same key.

Claims: ``iss`` (``hsearch``), ``aud`` (``hsearch:search``), ``sub`` (the parent key's
id), ``tid`` (the tenant), ``flt`` (the filter, in the filter language; the tenant field
is refused in it as in any filter), ``lim`` (optional limits: ``max_top_k``), ``iat``,
``exp``. The token is not encrypted: its filter is readable by whoever holds it, so it
must not hold secrets.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import jwt

from hsearch.errors import (
    ExpiredTokenError,
    InvalidFilterError,
    InvalidRequestError,
    InvalidTokenError,
)
from hsearch.vectorstore.filters import FilterNode, parse_filter

__all__ = [
    "TOKEN_AUDIENCE",
    "TOKEN_FILTER_FIELDS_REFUSED",
    "SearchToken",
    "TokenLimits",
    "decode_token",
    "encode_token",
    "looks_like_token",
    "parse_token_filter",
    "token_signing_key",
]

TOKEN_ISSUER: Final = "hsearch"  # noqa: S105 - claim values, not secrets
TOKEN_AUDIENCE: Final = "hsearch:search"  # noqa: S105
_ALGORITHM: Final = "HS256"
_DERIVATION: Final = b"hsearch search token v1"
_CLOCK_SKEW_S: Final = 30
TOKEN_FILTER_FIELDS_REFUSED: Final = frozenset({"ordinal"})
"""Fields a token's filter may not name: a token selects documents (its filter also
decides which documents it may read), and a chunk's position is not a document's."""


@dataclass(frozen=True, slots=True)
class TokenLimits:
    """Limits a token puts on the searches it makes, beyond the server's own."""

    max_top_k: int | None = None


@dataclass(frozen=True, slots=True)
class SearchToken:
    """A verified token: who minted it, for which tenant, restricted how."""

    key_id: uuid.UUID
    """The parent key: revoking it invalidates the token."""
    tenant_id: str
    filter: FilterNode
    """The mandatory filter, ANDed into every search leg, count and document read."""
    limits: TokenLimits
    issued_at: datetime
    expires_at: datetime

    def __repr__(self) -> str:
        return (
            f"SearchToken(key_id={self.key_id}, tenant_id={self.tenant_id!r}, "
            f"expires_at={self.expires_at.isoformat()})"
        )


def token_signing_key(server_key: bytes) -> bytes:
    """The key tokens are signed under, derived from (never equal to) the server key."""
    return hmac.new(server_key, _DERIVATION, hashlib.sha256).digest()


def looks_like_token(credential: str) -> bool:
    """Whether a bearer credential is shaped like a token (three dot-separated parts)
    rather than an API key (``hsk_``/``hso_``, which hold no dot)."""
    return credential.count(".") == 2


def parse_token_filter(raw: object) -> FilterNode:
    """Validate the filter a token is to carry: required, in the filter language, not
    naming the tenant (refused by the parser) nor a chunk's position.

    Raises InvalidFilterError (422) naming the part at fault.
    """
    node = parse_filter(raw)
    if node is None:
        msg = (
            "filter: a token needs a non-empty filter (use the key itself to search "
            'without one); e.g. {"tags": {"contains_any": ["team-a"]}}'
        )
        raise InvalidFilterError(msg)
    named = _field_names(raw)
    refused = sorted(named & TOKEN_FILTER_FIELDS_REFUSED)
    if refused:
        msg = f"filter: a token's filter selects documents; it may not name {', '.join(refused)}"
        raise InvalidFilterError(msg)
    return node


def encode_token(
    signing_key: bytes,
    *,
    key_id: uuid.UUID,
    tenant_id: str,
    filter: object,
    limits: TokenLimits,
    issued_at: datetime,
    expires_at: datetime,
) -> str:
    """The signed token. ``filter`` is the raw JSON filter (validated by the caller
    with :func:`parse_token_filter`)."""
    claims: dict[str, Any] = {
        "iss": TOKEN_ISSUER,
        "aud": TOKEN_AUDIENCE,
        "sub": str(key_id),
        "tid": tenant_id,
        "flt": filter,
        "iat": int(issued_at.timestamp()),
        "exp": int(expires_at.timestamp()),
    }
    if limits.max_top_k is not None:
        claims["lim"] = {"max_top_k": limits.max_top_k}
    return jwt.encode(claims, signing_key, algorithm=_ALGORITHM)


def decode_token(signing_key: bytes, token: str, *, now: datetime) -> SearchToken:
    """Verify ``token`` (signature, issuer, audience, expiry, claims) at ``now``.

    Raises:
        ExpiredTokenError: a genuine token past its ``exp`` (401 ``token_expired``).
        InvalidTokenError: anything else wrong (401 ``invalid_token``), without saying
            which check failed.
    """
    try:
        claims = jwt.decode(
            token,
            signing_key,
            algorithms=[_ALGORITHM],
            audience=TOKEN_AUDIENCE,
            issuer=TOKEN_ISSUER,
            # Expiry is judged below against the service's clock (tests move it); the
            # leeway lets a token minted by a process whose clock runs a little ahead
            # pass the library's check that ``iat`` is not in the future.
            options={"require": ["exp", "iat", "sub", "iss", "aud"], "verify_exp": False},
            leeway=_CLOCK_SKEW_S,
        )
    except jwt.InvalidTokenError:
        raise InvalidTokenError("invalid search token") from None
    try:
        expires_at = datetime.fromtimestamp(int(claims["exp"]), UTC)
        issued_at = datetime.fromtimestamp(int(claims["iat"]), UTC)
        key_id = uuid.UUID(str(claims["sub"]))
        tenant_id = claims["tid"]
        if not isinstance(tenant_id, str) or not tenant_id:
            raise TypeError("tid")
        node = parse_token_filter(claims.get("flt"))
        limits = _limits(claims.get("lim"))
    except (KeyError, TypeError, ValueError, OverflowError, InvalidRequestError):
        # Signed by us but not a token we mint: refused the same way.
        raise InvalidTokenError("invalid search token") from None
    if expires_at <= now:
        raise ExpiredTokenError("the search token has expired: mint a new one")
    return SearchToken(
        key_id=key_id,
        tenant_id=tenant_id,
        filter=node,
        limits=limits,
        issued_at=issued_at,
        expires_at=expires_at,
    )


def _limits(raw: object) -> TokenLimits:
    if raw is None:
        return TokenLimits()
    if not isinstance(raw, Mapping):
        raise TypeError("lim")
    max_top_k = raw.get("max_top_k")
    if max_top_k is not None and (type(max_top_k) is not int or max_top_k < 1):
        raise TypeError("lim.max_top_k")
    return TokenLimits(max_top_k=max_top_k)


def _field_names(raw: object) -> set[str]:
    """The head of every field path a (valid) raw filter names."""
    names: set[str] = set()
    stack = [raw]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in ("and", "or") and isinstance(value, list):
                    stack.extend(value)
                elif key == "not":
                    stack.append(value)
                else:
                    names.add(str(key).split(".", 1)[0])
        elif isinstance(node, list):
            stack.extend(node)
    return names
