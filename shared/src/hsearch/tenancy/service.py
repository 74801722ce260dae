"""Tenants and their keys: create, list, suspend, issue, revoke, and check a key.

``hsearch tenants`` / ``keys`` / ``operator`` and the API's ``/v1/keys`` routes call
:class:`TenancyService`; every request the API serves goes through
:meth:`TenancyService.authenticate` and :meth:`TenancyService.authorize` (or, for an
operator's credential, :meth:`TenancyService.act_for`).

Checking a key must cost next to nothing on a cached search (about 3 ms in all), so a
verified key is kept in an in-process TTL cache (``auth.cache_ttl_s``, 30 s by default),
keyed by the key's HMAC (the key itself is not kept). A cache hit is one HMAC and a
dictionary lookup; a miss reads the key and its tenant, checks the secret in constant
time and records ``last_used_at``. The price is bounded staleness: a revocation or a
suspension made elsewhere reaches an API process within ``auth.cache_ttl_s`` (in the
process that made it, at once). Expiry needs no database and is checked on every request.

A scoped search token (:mod:`.tokens`) is checked the same way: its signature and
expiry with no I/O, its parent key through the same TTL cache (by key id), so revoking
the parent or suspending its tenant refuses the token within ``auth.cache_ttl_s`` (at
once in the process that did it), and a token never outlives its parent key.

While the metadata database is down (:data:`~hsearch.db.engine.DATABASE_UNAVAILABLE`),
a key (or a token's parent key) this process verified at most ``auth.stale_ttl_s`` ago
is still accepted, as it stood then; any other is refused with
:class:`~hsearch.errors.MetadataUnavailableError` (503): never accepted unchecked. So a
revocation or suspension made elsewhere just before an outage applies here within
``auth.stale_ttl_s`` (``auth.cache_ttl_s`` while the database answers).

Every change made here, and every API request an operator makes for a tenant, is written
to the audit log in the transaction that makes it. Minting a token is not (it changes
nothing stored, and a frontend may mint one per page view).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, overload

from cachetools import LRUCache, TTLCache

from hsearch.db.base import utcnow
from hsearch.db.engine import (
    CONSTRAINT_VIOLATED,
    DATABASE_UNAVAILABLE,
    Session,
    SessionFactory,
    transaction,
    unavailable,
)
from hsearch.db.models import ApiKey, AuditEvent, Tenant
from hsearch.db.repositories.api_keys import ApiKeyRepository, AuditRepository
from hsearch.db.repositories.synonyms import SynonymRepository
from hsearch.db.repositories.tenants import NAME_LENGTH, TenantRepository
from hsearch.errors import (
    ApiKeyNotFoundError,
    AuthenticationError,
    ExpiredCredentialError,
    InsufficientScopeError,
    InvalidCredentialError,
    InvalidRequestError,
    InvalidTokenError,
    RevokedCredentialError,
    TenantExistsError,
    TenantMismatchError,
    TenantNotFoundError,
    TenantRequiredError,
    TenantSuspendedError,
)
from hsearch.graph.links import TextLinks
from hsearch.lexical.synonyms import parse_rules
from hsearch.tenancy.keys import generate_key, key_hmac, parse_key
from hsearch.tenancy.tokens import (
    SearchToken,
    TokenLimits,
    decode_token,
    encode_token,
    looks_like_token,
    parse_token_filter,
    token_signing_key,
)
from hsearch.types import CredentialRole, Scope, TenantStatus

__all__ = [
    "NOT_FOR_SEARCH_TOKENS",
    "AuditView",
    "CreatedKey",
    "CreatedTenant",
    "KeyView",
    "MintedToken",
    "Principal",
    "TenancyService",
    "TenantView",
]

TENANT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TENANT_HEADER = "X-Hsearch-Tenant"
"""The header an operator's credential names the tenant it acts for in."""
OPERATOR_SCOPES = ("operator",)
NOT_FOR_SEARCH_TOKENS = (
    "a search token may only search and read documents "
    "(POST /v1/search, GET /v1/documents); use an API key"
)
"""Why a route other than those refuses a search token (403 ``insufficient_scope``)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a verified key speaks for: what the API decides a request's tenant from."""

    key_id: uuid.UUID
    prefix: str
    role: CredentialRole
    tenant_id: str | None
    """The key's tenant; ``None`` for an operator, who names one per request."""
    scopes: frozenset[Scope]
    expires_at: datetime | None
    tenant_status: TenantStatus | None
    """As read when the key was verified (at most ``auth.cache_ttl_s`` ago)."""
    token: SearchToken | None = None
    """Set when the credential is a scoped search token: ``key_id`` and ``prefix`` are
    then its parent key's, ``scopes`` only ``search``, and the token's filter restricts
    every read (:attr:`SearchToken.filter`)."""

    @property
    def actor(self) -> str:
        """How the audit log names this credential (its public prefix)."""
        return f"key:{self.prefix}"


@dataclass(frozen=True, slots=True)
class TenantView:
    id: str
    name: str
    status: TenantStatus
    created_at: datetime


@dataclass(frozen=True, slots=True)
class KeyView:
    """A key as it may be shown again: everything but the key."""

    id: uuid.UUID
    prefix: str
    role: CredentialRole
    tenant_id: str | None
    scopes: tuple[str, ...]
    name: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


@dataclass(frozen=True, slots=True)
class CreatedKey:
    """A new key: ``key`` is shown to its creator once and stored nowhere."""

    view: KeyView
    key: str

    def __repr__(self) -> str:  # never the key, even in a traceback or a log
        return f"CreatedKey(view={self.view!r})"


@dataclass(frozen=True, slots=True)
class MintedToken:
    token: str
    expires_at: datetime

    def __repr__(self) -> str:  # never the token
        return f"MintedToken(expires_at={self.expires_at.isoformat()})"


@dataclass(frozen=True, slots=True)
class CreatedTenant:
    tenant: TenantView
    key: CreatedKey
    """Its first key, holding every scope (``admin`` included)."""


@dataclass(frozen=True, slots=True)
class AuditView:
    at: datetime
    actor: str
    action: str
    tenant_id: str | None
    target: str | None
    detail: Mapping[str, Any]


class TenancyService:
    def __init__(
        self,
        sessions: SessionFactory,
        *,
        server_key: bytes,
        cache_ttl_s: float = 30.0,
        stale_ttl_s: float = 60.0,
        cache_size: int = 10_000,
        now: Callable[[], datetime] = utcnow,
        timer: Callable[[], float] = time.monotonic,
        token_max_ttl_s: int = 3600,
        token_default_ttl_s: int = 900,
    ) -> None:
        """``now`` is the wall clock expiry is judged by, ``timer`` the cache's clock
        (both replaceable so tests move time instead of sleeping)."""
        self._sessions = sessions
        self._server_key = server_key
        self._signing_key = token_signing_key(server_key)
        self._now = now
        self._ttl = cache_ttl_s
        self._cache: TTLCache[str, Principal] | None = (
            TTLCache(maxsize=cache_size, ttl=cache_ttl_s, timer=timer) if cache_ttl_s > 0 else None
        )
        # Parent keys of tokens, by key id: a token is checked against them.
        self._parents: TTLCache[uuid.UUID, Principal] | None = (
            TTLCache(maxsize=cache_size, ttl=cache_ttl_s, timer=timer) if cache_ttl_s > 0 else None
        )
        # Every key verified, with when (``timer``): what answers while the database
        # is down, for ``stale_ttl_s`` after the verification.
        self._stale_ttl = stale_ttl_s
        self._timer = timer
        self._verified: LRUCache[str, tuple[Principal, float]] = LRUCache(maxsize=cache_size)
        self._verified_parents: LRUCache[uuid.UUID, tuple[Principal, float]] = LRUCache(
            maxsize=cache_size
        )
        self._token_max_ttl_s = token_max_ttl_s
        self._token_default_ttl_s = min(token_default_ttl_s, token_max_ttl_s)
        self._lock = threading.Lock()

    # Tenants -------------------------------------------------------------------------

    def create_tenant(
        self, name: str, *, tenant_id: str | None = None, actor: str
    ) -> CreatedTenant:
        """A new active tenant and its first key (every scope, ``admin`` included).

        Names are unique (compared exactly, after trimming), and so are ids; the
        database enforces both, so of two concurrent creates one is refused.

        Raises:
            InvalidRequestError: ``name`` is empty or ``tenant_id`` is malformed.
            TenantExistsError: ``tenant_id`` is taken (``field`` ``"id"``), or another
                tenant has this ``name`` (``field`` ``"name"``).
        """
        name = name.strip()
        if not name or len(name) > NAME_LENGTH:
            raise InvalidRequestError(f"name: 1 to {NAME_LENGTH} characters")
        tenant_id = tenant_id or f"t_{secrets.token_hex(6)}"
        _check_tenant_id(tenant_id)
        try:
            with transaction(self._sessions) as session:
                tenants = TenantRepository(session)
                self._refuse_taken(tenants, tenant_id=tenant_id, name=name)
                tenant = Tenant(id=tenant_id, name=name, status=TenantStatus.ACTIVE)
                tenants.add(tenant)
                _audit(
                    session,
                    self._now(),
                    actor,
                    "tenant.create",
                    tenant_id=tenant_id,
                    detail={"name": name},
                )
                key = self._issue(
                    session,
                    tenant_id=tenant_id,
                    scopes=list(Scope),
                    name="created with the tenant",
                    expires_at=None,
                    actor=actor,
                )
                return CreatedTenant(tenant=_tenant_view(tenant), key=key)
        except CONSTRAINT_VIOLATED as exc:  # created concurrently under the same id or name
            with self._sessions() as session:
                self._refuse_taken(TenantRepository(session), tenant_id=tenant_id, name=name)
            raise TenantExistsError(
                f"tenant {tenant_id!r} or the name {name!r} is taken", field="id"
            ) from exc

    @staticmethod
    def _refuse_taken(tenants: TenantRepository, *, tenant_id: str, name: str) -> None:
        if tenants.get(tenant_id) is not None:
            raise TenantExistsError(f"tenant {tenant_id!r} exists", field="id")
        holder = tenants.get_by_name_any_tenant(name)
        if holder is not None:
            raise TenantExistsError(
                f"name: tenant {holder.id!r} is already named {name!r}", field="name"
            )

    def ensure_tenant(self, tenant_id: str, *, actor: str) -> TenantView:
        """The tenant ``tenant_id``, created (active, named after its id) if missing."""
        _check_tenant_id(tenant_id)
        with transaction(self._sessions) as session:
            tenants = TenantRepository(session)
            tenant = tenants.get(tenant_id)
            if tenant is None:
                tenant = tenants.ensure(tenant_id)
                _audit(session, self._now(), actor, "tenant.create", tenant_id=tenant_id)
            return _tenant_view(tenant)

    def list_tenants(self) -> list[TenantView]:
        with self._sessions() as session:
            return [_tenant_view(t) for t in TenantRepository(session).list_all_tenants()]

    def set_tenant_status(self, tenant_id: str, status: TenantStatus, *, actor: str) -> TenantView:
        """Suspend (every key refused with 403) or resume a tenant. Applies in this process
        at once, in other API processes within ``auth.cache_ttl_s``."""
        with transaction(self._sessions) as session:
            tenant = _tenant(session, tenant_id)
            if tenant.status is not status:
                tenant.status = status
                action = "tenant.suspend" if status is TenantStatus.SUSPENDED else "tenant.resume"
                _audit(session, self._now(), actor, action, tenant_id=tenant_id)
            view = _tenant_view(tenant)
        self._forget(lambda p: p.tenant_id == tenant_id)
        return view

    # Keys ----------------------------------------------------------------------------

    def create_key(
        self,
        tenant_id: str,
        *,
        scopes: Iterable[Scope | str],
        name: str = "",
        expires_at: datetime | None = None,
        actor: str,
    ) -> CreatedKey:
        """A new key of ``tenant_id`` with ``scopes`` (at least one), expiring at
        ``expires_at`` if given (which must be in the future).

        Raises:
            InvalidRequestError: no scope, an unknown one, a past ``expires_at``.
            TenantNotFoundError: no such tenant.
        """
        chosen = _scopes(scopes)
        with transaction(self._sessions) as session:
            _tenant(session, tenant_id)
            return self._issue(
                session,
                tenant_id=tenant_id,
                scopes=chosen,
                name=name,
                expires_at=expires_at,
                actor=actor,
            )

    def create_operator_key(self, *, name: str = "", actor: str) -> CreatedKey:
        """A new operator credential: it may act for any tenant, each time audited."""
        with transaction(self._sessions) as session:
            return self._issue(
                session, tenant_id=None, scopes=None, name=name, expires_at=None, actor=actor
            )

    def synonyms(self, tenant_id: str) -> list[dict[str, Any]]:
        """The tenant's synonym rules (:mod:`hsearch.lexical.synonyms`), as stored."""
        with self._sessions() as session:
            _tenant(session, tenant_id)
            return SynonymRepository(session).get(tenant_id)

    def set_synonyms(
        self, tenant_id: str, rules: list[dict[str, Any]], *, actor: str
    ) -> list[dict[str, Any]]:
        """Replace the tenant's synonym rules by ``rules`` (checked:
        :func:`~hsearch.lexical.synonyms.parse_rules`) and change its data generation,
        so cached results of the old rules are not served; returns what was stored.

        Raises:
            InvalidRequestError: a rule that is not one, naming it.
            TenantNotFoundError: no such tenant.
        """
        checked = parse_rules(rules)
        with transaction(self._sessions) as session:
            _tenant(session, tenant_id)
            SynonymRepository(session).put(tenant_id, checked)
            TenantRepository(session).bump_generation(tenant_id)
            _audit(
                session,
                self._now(),
                actor,
                "synonyms.replace",
                tenant_id=tenant_id,
                detail={"rules": len(checked)},
            )
        return checked

    def text_links(self, tenant_id: str) -> frozenset[TextLinks]:
        """The tenant's setting: the kinds of links found in a document's text when its
        submission does not say (:mod:`hsearch.ingestion.derived.links`)."""
        with self._sessions() as session:
            _tenant(session, tenant_id)
            return frozenset(map(TextLinks, TenantRepository(session).text_links(tenant_id)))

    def set_text_links(
        self, tenant_id: str, kinds: Collection[TextLinks], *, actor: str
    ) -> frozenset[TextLinks]:
        """Set the tenant's :meth:`text_links`; returns what was stored. Documents are
        indexed with it from then on; those indexed already keep their links until they
        are indexed again or re-linked (``hsearch links relink``), so nothing cached
        goes stale and the data generation stays.

        Raises:
            TenantNotFoundError: no such tenant.
        """
        chosen = sorted({TextLinks(kind) for kind in kinds})
        with transaction(self._sessions) as session:
            _tenant(session, tenant_id)
            TenantRepository(session).set_text_links(tenant_id, [k.value for k in chosen])
            _audit(
                session,
                self._now(),
                actor,
                "settings.update",
                tenant_id=tenant_id,
                detail={"text_links": [k.value for k in chosen]},
            )
        return frozenset(chosen)

    def list_keys(self, tenant_id: str) -> list[KeyView]:
        """The tenant's keys, revoked and expired ones included, oldest first."""
        with self._sessions() as session:
            _tenant(session, tenant_id)
            rows = ApiKeyRepository(session).list(tenant_id=tenant_id, role=CredentialRole.TENANT)
            return [_key_view(k) for k in rows]

    def revoke_key(self, key_id: uuid.UUID, *, tenant_id: str | None = None, actor: str) -> KeyView:
        """Revoke a key (again: no change). With ``tenant_id``, only that tenant's key:
        another's answers as if it did not exist. Refused at once by this process, by
        other API processes within ``auth.cache_ttl_s``.

        Raises:
            ApiKeyNotFoundError: no such key (of ``tenant_id``).
        """
        with transaction(self._sessions) as session:
            keys = ApiKeyRepository(session)
            key = (
                keys.get_any_tenant(key_id)
                if tenant_id is None  # an operator's revocation: any key
                else keys.get(key_id, tenant_id=tenant_id)
            )
            if key is None:
                raise ApiKeyNotFoundError(f"API key {key_id} not found")
            if key.revoked_at is None:
                key.revoked_at = self._now()
                _audit(
                    session,
                    self._now(),
                    actor,
                    "key.revoke",
                    tenant_id=key.tenant_id,
                    target=str(key.id),
                    detail={"prefix": key.prefix},
                )
            view = _key_view(key)
        self._forget(lambda p: p.key_id == key_id)
        return view

    # Checking a key ------------------------------------------------------------------

    def cached(self, key: str) -> Principal | None:
        """The principal of ``key`` if this process verified it within the cache's TTL,
        else ``None`` (then :meth:`authenticate`). No I/O: safe on an event loop.

        Raises:
            ExpiredCredentialError: the key has expired since it was verified.
            InvalidTokenError, ExpiredTokenError: a search token that is not (or no
                longer) valid.
        """
        if looks_like_token(key):
            token = decode_token(self._signing_key, key, now=self._now())
            with self._lock:
                parent = None if self._parents is None else self._parents.get(token.key_id)
            return None if parent is None else self._token_principal(token, parent)
        if self._cache is None:
            return None
        digest = key_hmac(self._server_key, key)
        with self._lock:
            principal = self._cache.get(digest)
        if principal is not None:
            self._check_expiry(principal)
        return principal

    def authenticate(self, key: str) -> Principal:
        """Who ``key`` speaks for: from the cache, else verified against the database
        (and then cached, its ``last_used_at`` recorded). Does not check scopes or the
        tenant's status (:meth:`authorize`).

        Raises:
            InvalidCredentialError: not a key of this service (malformed, unknown, wrong secret).
            ExpiredCredentialError, RevokedCredentialError: a genuine key no longer valid
                (for a search token: its parent key).
            InvalidTokenError, ExpiredTokenError: a search token that is not (or no
                longer) valid.
        """
        principal = self.cached(key)
        if principal is not None:
            return principal
        if looks_like_token(key):
            token = decode_token(self._signing_key, key, now=self._now())
            return self._token_principal(token, self._parent(token))
        parsed = parse_key(key)
        digest = key_hmac(self._server_key, key)
        try:
            principal = self._verify(parsed.prefix, digest)
        except DATABASE_UNAVAILABLE as exc:
            principal = self._stale(self._verified, digest, exc)
            self._check_expiry(principal)
            return principal
        except AuthenticationError:  # refused now: not accepted later while it is down
            with self._lock:
                self._verified.pop(digest, None)
            raise
        with self._lock:
            self._verified[digest] = (principal, self._timer())
            if self._cache is not None:
                self._cache[digest] = principal
        return principal

    def _verify(self, prefix: str, digest: str) -> Principal:
        """The key of ``prefix`` whose HMAC is ``digest``, read and checked; its use recorded."""
        with transaction(self._sessions) as session:
            row = ApiKeyRepository(session).by_prefix_any_tenant(prefix)
            if row is None or not secrets.compare_digest(digest, row.secret_hmac):
                raise InvalidCredentialError("invalid API key")
            if row.revoked_at is not None:
                raise RevokedCredentialError(f"API key {row.prefix} was revoked")
            tenant = None if row.tenant_id is None else TenantRepository(session).get(row.tenant_id)
            principal = Principal(
                key_id=row.id,
                prefix=row.prefix,
                role=row.role,
                tenant_id=row.tenant_id,
                scopes=frozenset(Scope(s) for s in row.scopes if s in Scope._value2member_map_),
                expires_at=_aware(row.expires_at),
                tenant_status=None if tenant is None else tenant.status,
            )
            self._check_expiry(principal)
            ApiKeyRepository(session).touch(row.id, at=self._now())
        return principal

    def _stale(
        self,
        verified: LRUCache[Any, tuple[Principal, float]],
        key: object,
        exc: Exception,
    ) -> Principal:
        """The principal verified under ``key`` at most ``auth.stale_ttl_s`` ago, the
        database being down (``exc``); else the database's unavailability, raised."""
        with self._lock:
            seen = verified.get(key)
        if seen is None or self._timer() - seen[1] >= self._stale_ttl:
            raise unavailable(exc) from exc
        return seen[0]

    # Search tokens -------------------------------------------------------------------

    def mint_token(
        self,
        principal: Principal,
        *,
        filter: object,
        max_top_k: int | None = None,
        expires_in_s: int | None = None,
    ) -> MintedToken:
        """A search token for ``principal``'s tenant, restricted to ``filter`` (required,
        in the filter language) and ``max_top_k``, living ``expires_in_s`` (default
        ``auth.token_default_ttl_s``, at most ``auth.token_max_ttl_s``) but never past
        its parent key's expiry. Only a tenant's key mints (not a token, not an operator).

        Raises:
            InvalidFilterError, InvalidRequestError: a bad filter, limit or lifetime (422).
            InsufficientScopeError: the credential is a token or an operator's (403).
        """
        if principal.token is not None or principal.tenant_id is None:
            msg = "search tokens are minted with a tenant's API key (scope search or admin)"
            raise InsufficientScopeError(msg, required=[Scope.SEARCH.value, Scope.ADMIN.value])
        parse_token_filter(filter)
        if max_top_k is not None and max_top_k < 1:
            raise InvalidRequestError("max_top_k: must be at least 1")
        ttl = self._token_default_ttl_s if expires_in_s is None else expires_in_s
        if not 1 <= ttl <= self._token_max_ttl_s:
            msg = (
                f"expires_in_s: must be between 1 and {self._token_max_ttl_s} "
                "(auth.token_max_ttl_s)"
            )
            raise InvalidRequestError(msg)
        now = self._now()
        expires_at = now + timedelta(seconds=ttl)
        if principal.expires_at is not None:
            expires_at = min(expires_at, principal.expires_at)
        token = encode_token(
            self._signing_key,
            key_id=principal.key_id,
            tenant_id=principal.tenant_id,
            filter=filter,
            limits=TokenLimits(max_top_k=max_top_k),
            issued_at=now,
            expires_at=expires_at,
        )
        # The JWT's exp is in whole seconds: report what the token says.
        return MintedToken(token=token, expires_at=expires_at.replace(microsecond=0))

    def _parent(self, token: SearchToken) -> Principal:
        """The token's parent key as a principal: cached by id, else read."""
        with self._lock:
            parent = None if self._parents is None else self._parents.get(token.key_id)
        if parent is not None:
            return parent
        try:
            parent, revoked = self._read_parent(token)
        except DATABASE_UNAVAILABLE as exc:
            return self._stale(self._verified_parents, token.key_id, exc)
        except AuthenticationError:  # refused now: not accepted later while it is down
            with self._lock:
                self._verified_parents.pop(token.key_id, None)
            raise
        if revoked:
            with self._lock:
                self._verified_parents.pop(token.key_id, None)
            raise RevokedCredentialError(
                f"the key that minted this token ({parent.prefix}) was revoked"
            )
        with self._lock:
            self._verified_parents[token.key_id] = (parent, self._timer())
            if self._parents is not None:
                self._parents[token.key_id] = parent
        return parent

    def _read_parent(self, token: SearchToken) -> tuple[Principal, bool]:
        """The token's parent key as a principal, read, and whether it was revoked."""
        with self._sessions() as session:
            row = ApiKeyRepository(session).get_any_tenant(token.key_id)
            if row is None or row.tenant_id is None:
                raise InvalidTokenError("invalid search token")
            tenant = TenantRepository(session).get(row.tenant_id)
            parent = Principal(
                key_id=row.id,
                prefix=row.prefix,
                role=row.role,
                tenant_id=row.tenant_id,
                scopes=frozenset(Scope(s) for s in row.scopes if s in Scope._value2member_map_),
                expires_at=_aware(row.expires_at),
                tenant_status=None if tenant is None else tenant.status,
            )
            return parent, row.revoked_at is not None

    def _token_principal(self, token: SearchToken, parent: Principal) -> Principal:
        if parent.tenant_id != token.tenant_id or not parent.scopes & {Scope.SEARCH, Scope.ADMIN}:
            raise InvalidTokenError("invalid search token")
        self._check_expiry(parent)
        expires_at = token.expires_at
        if parent.expires_at is not None:
            expires_at = min(expires_at, parent.expires_at)
        return Principal(
            key_id=parent.key_id,
            prefix=parent.prefix,
            role=CredentialRole.TENANT,
            tenant_id=token.tenant_id,
            scopes=frozenset({Scope.SEARCH}),
            expires_at=expires_at,
            tenant_status=parent.tenant_status,
            token=token,
        )

    def authorize(
        self, principal: Principal, *, accepted: Collection[Scope], named_tenant: str | None
    ) -> str:
        """The tenant a tenant key's request acts for, if the key may make it: its tenant
        is active, it holds one of the ``accepted`` scopes (any, when none are listed),
        and ``named_tenant`` (the tenant header) is absent or its own tenant.
        Operators go through :meth:`act_for` instead.

        Raises:
            TenantSuspendedError, InsufficientScopeError, TenantMismatchError: 403.
        """
        if principal.tenant_id is None:
            msg = "an operator credential acts for a tenant through act_for"
            raise TypeError(msg)
        if named_tenant is not None and named_tenant != principal.tenant_id:
            msg = f"{TENANT_HEADER} names another tenant: only operator credentials may"
            raise TenantMismatchError(msg)
        if principal.tenant_status is not TenantStatus.ACTIVE:
            raise TenantSuspendedError(f"tenant {principal.tenant_id!r} is suspended")
        if accepted and not principal.scopes & set(accepted):
            if principal.token is not None:  # its scope is implied, not held: say what it is
                raise InsufficientScopeError(
                    NOT_FOR_SEARCH_TOKENS, required=sorted(s.value for s in accepted)
                )
            wanted = " or ".join(sorted(s.value for s in accepted))
            held = ", ".join(sorted(s.value for s in principal.scopes)) or "none"
            msg = f"this route needs a key with scope {wanted}; the key has {held}"
            raise InsufficientScopeError(msg, required=sorted(s.value for s in accepted))
        return principal.tenant_id

    def act_for(self, principal: Principal, *, named_tenant: str | None, action: str) -> str:
        """The tenant an operator's request acts for (``named_tenant``, which must exist;
        suspended ones included), once the request is written to the audit log.

        Raises:
            TenantRequiredError: no tenant named (422).
            TenantNotFoundError: no such tenant (404).
        """
        if principal.role is not CredentialRole.OPERATOR:
            msg = "act_for is for operator credentials"
            raise TypeError(msg)
        if not named_tenant:
            msg = f"{TENANT_HEADER}: an operator credential names the tenant it acts for"
            raise TenantRequiredError(msg)
        with transaction(self._sessions) as session:
            _tenant(session, named_tenant)
            _audit(
                session,
                self._now(),
                principal.actor,
                "api.request",
                tenant_id=named_tenant,
                target=action,
            )
        return named_tenant

    def act_for_all(self, principal: Principal, *, action: str) -> None:
        """Record in the audit log that an operator's request reads every tenant (the
        stats of all tenants)."""
        if principal.role is not CredentialRole.OPERATOR:
            msg = "act_for_all is for operator credentials"
            raise TypeError(msg)
        with transaction(self._sessions) as session:
            _audit(
                session, self._now(), principal.actor, "api.request", tenant_id=None, target=action
            )

    def operator(self, key_id: uuid.UUID) -> Principal:
        """The operator credential ``key_id`` as it stands now, read from the database
        (what the pages' session is checked against on every request, so a revoked or
        expired credential ends its sessions at once).

        Raises:
            InvalidCredentialError: no such credential, or not an operator's.
            RevokedCredentialError, ExpiredCredentialError: no longer valid.
        """
        with self._sessions() as session:
            row = ApiKeyRepository(session).get_any_tenant(key_id)
            if row is None or row.role is not CredentialRole.OPERATOR:
                raise InvalidCredentialError("invalid API key")
            if row.revoked_at is not None:
                raise RevokedCredentialError(f"API key {row.prefix} was revoked")
            principal = Principal(
                key_id=row.id,
                prefix=row.prefix,
                role=row.role,
                tenant_id=None,
                scopes=frozenset(),
                expires_at=_aware(row.expires_at),
                tenant_status=None,
            )
        self._check_expiry(principal)
        return principal

    def record_action(
        self, principal: Principal, action: str, *, target: str | None = None
    ) -> None:
        """Write an operator's own action (``ops.login``, ``ops.logout``) to the audit log."""
        with transaction(self._sessions) as session:
            _audit(session, self._now(), principal.actor, action, tenant_id=None, target=target)

    def derive_secret(self, purpose: str) -> bytes:
        """A key for ``purpose`` derived from the server key (HMAC-SHA-256), the same in
        every process that shares the server key: what the pages sign sessions with."""
        return hmac.new(self._server_key, f"hsearch:{purpose}".encode(), hashlib.sha256).digest()

    # Audit ---------------------------------------------------------------------------

    def audit_log(self, *, tenant_id: str | None = None, limit: int = 100) -> list[AuditView]:
        """The latest audit events, newest first (of one tenant, if given)."""
        with self._sessions() as session:
            audit = AuditRepository(session)
            events = (
                audit.list_all_tenants(limit=limit)
                if tenant_id is None
                else audit.list(tenant_id=tenant_id, limit=limit)
            )
            return [
                AuditView(
                    at=_aware(e.at),
                    actor=e.actor,
                    action=e.action,
                    tenant_id=e.tenant_id,
                    target=e.target,
                    detail=dict(e.detail),
                )
                for e in events
            ]

    def record(
        self,
        session: Session,
        *,
        actor: str,
        action: str,
        tenant_id: str | None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Write an audit event in ``session``'s transaction (for the tenant purge)."""
        _audit(session, self._now(), actor, action, tenant_id=tenant_id, detail=detail)

    def forget_tenant(self, tenant_id: str) -> None:
        """Drop this process's cached credentials of the tenant (deleted, suspended)."""
        self._forget(lambda p: p.tenant_id == tenant_id)

    # Internals -----------------------------------------------------------------------

    def _issue(
        self,
        session: Session,
        *,
        tenant_id: str | None,
        scopes: list[Scope] | None,
        name: str,
        expires_at: datetime | None,
        actor: str,
    ) -> CreatedKey:
        if len(name) > 256:
            raise InvalidRequestError("name: at most 256 characters")
        if expires_at is not None:
            if expires_at.tzinfo is None:
                raise InvalidRequestError("expires_at: give a time zone (e.g. Z for UTC)")
            if expires_at <= self._now():
                raise InvalidRequestError("expires_at: must be in the future")
        role = CredentialRole.OPERATOR if tenant_id is None else CredentialRole.TENANT
        issued = generate_key(role)
        row = ApiKey(
            id=uuid.uuid4(),
            tenant_id=tenant_id,
            role=role,
            prefix=issued.prefix,
            secret_hmac=key_hmac(self._server_key, issued.key),
            scopes=list(OPERATOR_SCOPES) if scopes is None else [s.value for s in scopes],
            name=name,
            created_at=self._now(),
            expires_at=expires_at,
        )
        ApiKeyRepository(session).add(row)
        _audit(
            session,
            self._now(),
            actor,
            "operator.create" if tenant_id is None else "key.create",
            tenant_id=tenant_id,
            target=str(row.id),
            detail={"prefix": row.prefix, "scopes": row.scopes, "name": name},
        )
        return CreatedKey(view=_key_view(row), key=issued.key)

    def _check_expiry(self, principal: Principal) -> None:
        if principal.expires_at is not None and principal.expires_at <= self._now():
            raise ExpiredCredentialError(f"API key {principal.prefix} has expired")

    def _forget(self, which: Callable[[Principal], bool]) -> None:
        with self._lock:
            for digest in [d for d, (p, _) in self._verified.items() if which(p)]:
                self._verified.pop(digest, None)
            for key_id in [k for k, (p, _) in self._verified_parents.items() if which(p)]:
                self._verified_parents.pop(key_id, None)
            if self._cache is not None:
                for digest in [d for d, p in self._cache.items() if which(p)]:
                    self._cache.pop(digest, None)
            if self._parents is not None:
                for key_id in [k for k, p in self._parents.items() if which(p)]:
                    self._parents.pop(key_id, None)


def _check_tenant_id(tenant_id: str) -> None:
    if not TENANT_ID.match(tenant_id):
        msg = f"tenant id: 1 to 64 letters, digits, '_' or '-', got {tenant_id!r}"
        raise InvalidRequestError(msg)


def _scopes(scopes: Iterable[Scope | str]) -> list[Scope]:
    chosen: list[Scope] = []
    for s in scopes:
        try:
            scope = Scope(s)
        except ValueError:
            allowed = ", ".join(x.value for x in Scope)
            raise InvalidRequestError(f"scopes: unknown scope {s!r} (one of {allowed})") from None
        if scope not in chosen:
            chosen.append(scope)
    if not chosen:
        raise InvalidRequestError("scopes: give at least one of " + ", ".join(Scope))
    return chosen


def _tenant(session: Session, tenant_id: str) -> Tenant:
    tenant = TenantRepository(session).get(tenant_id)
    if tenant is None:
        raise TenantNotFoundError(f"tenant {tenant_id!r} not found")
    return tenant


def _audit(
    session: Session,
    at: datetime,
    actor: str,
    action: str,
    *,
    tenant_id: str | None,
    target: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> None:
    AuditRepository(session).add(
        AuditEvent(
            at=at,
            actor=actor,
            action=action,
            tenant_id=tenant_id,
            target=target,
            detail=dict(detail or {}),
        )
    )


def _tenant_view(t: Tenant) -> TenantView:
    return TenantView(id=t.id, name=t.name, status=t.status, created_at=_aware(t.created_at))


def _key_view(k: ApiKey) -> KeyView:
    return KeyView(
        id=k.id,
        prefix=k.prefix,
        role=k.role,
        tenant_id=k.tenant_id,
        scopes=tuple(k.scopes),
        name=k.name,
        created_at=_aware(k.created_at),
        expires_at=_aware(k.expires_at),
        revoked_at=_aware(k.revoked_at),
        last_used_at=_aware(k.last_used_at),
    )


@overload
def _aware(moment: datetime) -> datetime: ...
@overload
def _aware(moment: None) -> None: ...
def _aware(moment: datetime | None) -> datetime | None:
    """``moment`` as an aware UTC datetime (SQLite hands naive ones back)."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)
