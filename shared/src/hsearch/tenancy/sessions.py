"""Operator sessions of the built-in pages (``/ops``, ``/playground``).

An operator pastes their credential (``hso_...``) into the login page once; it is
exchanged, in the body of a POST, for a session cookie, so the credential is never kept
by the browser nor put in a URL. The cookie is signed (itsdangerous, HMAC-SHA-256 under
a key derived from the server key, so every API process accepts it) and carries the
credential's id, a per-session CSRF token and the time it was signed; it expires after
``ops.session_ttl_s``. Nothing is stored on the server: each request checks the
signature and the age, then reads the credential again (:meth:`TenancyService.operator`),
so revoking the credential ends its sessions at once.

CSRF: every state-changing request sends the session's token in ``X-CSRF-Token``, which
must equal the token signed into the session (the page reads it from a cookie that is
not HttpOnly: :data:`CSRF_COOKIE`). The login itself, before any session, is checked by
double submit: the header must equal the CSRF cookie the login page set. Both cookies are
``SameSite=Strict``, so a cross-site request carries neither.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, SignatureExpired, TimestampSigner, URLSafeTimedSerializer

from hsearch.errors import (
    AuthenticationError,
    CsrfError,
    OperatorRequiredError,
    SessionRequiredError,
)
from hsearch.tenancy.keys import parse_key
from hsearch.tenancy.service import Principal, TenancyService
from hsearch.types import CredentialRole

__all__ = [
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "IssuedSession",
    "OperatorSession",
    "OperatorSessions",
    "new_csrf_token",
]

SESSION_COOKIE = "hsearch_ops_session"
CSRF_COOKIE = "hsearch_ops_csrf"
CSRF_HEADER = "X-CSRF-Token"
_SALT = "hsearch.ops.session.v1"


def new_csrf_token() -> str:
    """A fresh CSRF token (256 bits)."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class OperatorSession:
    """A verified session: who it speaks for and its CSRF token."""

    principal: Principal
    csrf: str

    def check_csrf(self, sent: str | None) -> None:
        """Raise CsrfError unless ``sent`` (the ``X-CSRF-Token`` header) is this
        session's token (compared in constant time)."""
        if not sent or not secrets.compare_digest(sent.encode(), self.csrf.encode()):
            raise CsrfError(f"{CSRF_HEADER}: missing or not this session's token")


@dataclass(frozen=True, slots=True)
class IssuedSession:
    """What a login hands the browser: the cookie's value and the CSRF token."""

    cookie: str
    session: OperatorSession

    def __repr__(self) -> str:  # never the signed cookie
        return f"IssuedSession(prefix={self.session.principal.prefix!r})"


class _ClockedSigner(TimestampSigner):
    """itsdangerous' timestamp signer on a given clock (tests move time, never sleep)."""

    def __init__(self, *args: Any, clock: Callable[[], float], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clock = clock

    def get_timestamp(self) -> int:
        return int(self._clock())


class OperatorSessions:
    def __init__(
        self, tenancy: TenancyService, *, ttl_s: int, clock: Callable[[], float] = time.time
    ) -> None:
        self._tenancy = tenancy
        self._ttl = ttl_s
        self._serializer = URLSafeTimedSerializer(
            tenancy.derive_secret("ops-session"),
            salt=_SALT,
            signer=_ClockedSigner,
            signer_kwargs={"digest_method": hashlib.sha256, "clock": clock},
        )

    @property
    def ttl_s(self) -> int:
        return self._ttl

    def login(self, key: str, *, csrf_cookie: str | None, csrf_header: str | None) -> IssuedSession:
        """Exchange an operator credential for a session (audited as ``ops.login``).

        Raises:
            CsrfError: the header is not the login page's CSRF cookie (double submit).
            OperatorRequiredError: ``key`` is a tenant's key.
            AuthenticationError: not a valid credential (invalid, expired, revoked).
        """
        if (
            not csrf_cookie
            or not csrf_header
            or not secrets.compare_digest(csrf_cookie.encode(), csrf_header.encode())
        ):
            raise CsrfError(f"{CSRF_HEADER}: missing or not the login page's token")
        key = key.strip()
        if parse_key(key).role is not CredentialRole.OPERATOR:
            raise OperatorRequiredError("the pages take an operator credential (hso_...)")
        principal = self._tenancy.authenticate(key)
        if principal.role is not CredentialRole.OPERATOR:  # the marker is checked above too
            raise OperatorRequiredError("the pages take an operator credential (hso_...)")
        self._tenancy.record_action(principal, "ops.login")
        session = OperatorSession(principal=principal, csrf=new_csrf_token())
        cookie = self._serializer.dumps({"k": str(principal.key_id), "c": session.csrf})
        return IssuedSession(cookie=cookie, session=session)

    def verify(self, cookie: str | None) -> OperatorSession:
        """The session ``cookie`` stands for, its credential read again.

        Raises:
            SessionRequiredError: no cookie, a forged or expired one, or a credential no
                longer valid.
        """
        if not cookie:
            raise SessionRequiredError("no session: log in at /ops/login")
        try:
            data = self._serializer.loads(cookie, max_age=self._ttl)
        except SignatureExpired:
            raise SessionRequiredError("the session has expired: log in again") from None
        except BadSignature:
            raise SessionRequiredError("not a valid session: log in at /ops/login") from None
        try:
            key_id = uuid.UUID(str(data["k"]))
            csrf = str(data["c"])
        except (KeyError, TypeError, ValueError):
            raise SessionRequiredError("not a valid session: log in at /ops/login") from None
        try:
            principal = self._tenancy.operator(key_id)
        except AuthenticationError as exc:
            raise SessionRequiredError(f"the session's credential: {exc.message}") from None
        return OperatorSession(principal=principal, csrf=csrf)

    def logout(self, session: OperatorSession) -> None:
        """Record the end of ``session`` (``ops.logout``); the browser drops its cookie.
        A copy of the cookie stays valid until it expires or the credential is revoked."""
        self._tenancy.record_action(session.principal, "ops.logout")
