"""Operator sessions of the pages on a migrated SQLite database: a session expires after
its TTL (time moved by the test's clock), is bound to its CSRF token, and is signed under
the server key, so another server key's processes refuse it while every process sharing
the key accepts it."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.errors import CsrfError, OperatorRequiredError, SessionRequiredError
from hsearch.tenancy.service import TenancyService
from hsearch.tenancy.sessions import OperatorSessions
from hsearch.types import Scope

SERVER_KEY = b"0123456789abcdef0123456789abcdef"


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tenancy(sessions: sessionmaker[Session]) -> TenancyService:
    return TenancyService(sessions, server_key=SERVER_KEY)


def test_a_session_lasts_its_ttl_and_carries_its_csrf_token(tenancy: TenancyService) -> None:
    clock = Clock()
    ops = OperatorSessions(tenancy, ttl_s=600, clock=clock)
    key = tenancy.create_operator_key(actor="t").key
    issued = ops.login(key, csrf_cookie="tok", csrf_header="tok")
    assert key not in issued.cookie
    assert key not in repr(issued)
    clock.now += 599
    session = ops.verify(issued.cookie)
    assert session.principal.key_id == issued.session.principal.key_id
    session.check_csrf(issued.session.csrf)
    with pytest.raises(CsrfError):
        session.check_csrf("tok")
    with pytest.raises(CsrfError):
        session.check_csrf(None)
    clock.now += 2
    with pytest.raises(SessionRequiredError, match="expired"):
        ops.verify(issued.cookie)


def test_processes_sharing_the_server_key_accept_the_session_others_refuse_it(
    tenancy: TenancyService, sessions: sessionmaker[Session]
) -> None:
    key = tenancy.create_operator_key(actor="t").key
    issued = OperatorSessions(tenancy, ttl_s=600).login(key, csrf_cookie="a", csrf_header="a")
    same = TenancyService(sessions, server_key=SERVER_KEY)
    assert OperatorSessions(same, ttl_s=600).verify(issued.cookie).csrf == issued.session.csrf
    other = TenancyService(sessions, server_key=b"another-key-another-key-another!")
    with pytest.raises(SessionRequiredError):
        OperatorSessions(other, ttl_s=600).verify(issued.cookie)


def test_only_operator_credentials_log_in(tenancy: TenancyService) -> None:
    tenancy.ensure_tenant("acme", actor="t")
    tenant_key = tenancy.create_key("acme", scopes=[Scope.ADMIN], actor="t").key
    ops = OperatorSessions(tenancy, ttl_s=600)
    with pytest.raises(OperatorRequiredError):
        ops.login(tenant_key, csrf_cookie="a", csrf_header="a")
    with pytest.raises(CsrfError):
        ops.login(tenancy.create_operator_key(actor="t").key, csrf_cookie="a", csrf_header="b")
