"""TenancyService on a migrated SQLite database: tenants and keys are issued, checked,
expire, are revoked and suspended; a verified key is cached for a bounded time; every
change is audited. Time is moved by the tests' clocks, never slept."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.models import ApiKey, Tenant
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import (
    ApiKeyNotFoundError,
    ExpiredCredentialError,
    InsufficientScopeError,
    InvalidCredentialError,
    InvalidRequestError,
    MetadataUnavailableError,
    RevokedCredentialError,
    TenantExistsError,
    TenantMismatchError,
    TenantNotFoundError,
    TenantRequiredError,
    TenantSuspendedError,
)
from hsearch.tenancy.keys import key_hmac
from hsearch.tenancy.service import TenancyService
from hsearch.types import CredentialRole, Scope, TenantStatus
from tests.unit.outage import Outage

SERVER_KEY = b"0123456789abcdef0123456789abcdef"
T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Clocks:
    """The wall clock (expiry) and the cache's clock, moved together by ``advance``."""

    def __init__(self) -> None:
        self.wall = T0
        self.mono = 1000.0

    def now(self) -> datetime:
        return self.wall

    def timer(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += timedelta(seconds=seconds)
        self.mono += seconds


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


def service_on(
    sessions: sessionmaker[Session], clocks: Clocks, *, ttl: float = 30.0
) -> TenancyService:
    return TenancyService(
        sessions, server_key=SERVER_KEY, cache_ttl_s=ttl, now=clocks.now, timer=clocks.timer
    )


@pytest.fixture
def tenancy(sessions: sessionmaker[Session], clocks: Clocks) -> TenancyService:
    return service_on(sessions, clocks)


def test_a_new_tenant_comes_with_an_admin_key_holding_every_scope(
    tenancy: TenancyService, sessions: sessionmaker[Session]
) -> None:
    created = tenancy.create_tenant("Acme", tenant_id="acme", actor="cli:ops")
    assert (created.tenant.id, created.tenant.name) == ("acme", "Acme")
    assert created.tenant.status is TenantStatus.ACTIVE
    principal = tenancy.authenticate(created.key.key)
    assert (principal.tenant_id, principal.role) == ("acme", CredentialRole.TENANT)
    assert principal.scopes == {Scope.SEARCH, Scope.INGEST, Scope.ADMIN}
    with sessions() as s:
        row = s.scalars(select(ApiKey)).one()
    # Only the HMAC is stored: not the key, not its secret.
    assert row.secret_hmac == key_hmac(SERVER_KEY, created.key.key)
    assert created.key.key.split("_", 2)[2] not in repr(row.__dict__)


def test_tenant_ids_are_generated_unique_and_validated(tenancy: TenancyService) -> None:
    a = tenancy.create_tenant("A", actor="t").tenant.id
    b = tenancy.create_tenant("B", actor="t").tenant.id
    assert a != b
    assert a.startswith("t_")
    with pytest.raises(TenantExistsError):
        tenancy.create_tenant("again", tenant_id=a, actor="t")
    with pytest.raises(InvalidRequestError, match="tenant id"):
        tenancy.create_tenant("x", tenant_id="no spaces", actor="t")
    with pytest.raises(InvalidRequestError, match="name"):
        tenancy.create_tenant("  ", actor="t")
    assert [t.id for t in tenancy.list_tenants()] == sorted([a, b])


def test_a_name_another_tenant_has_is_refused(
    tenancy: TenancyService, sessions: sessionmaker[Session]
) -> None:
    tenancy.create_tenant("Acme", tenant_id="acme", actor="t")
    with pytest.raises(TenantExistsError, match="name: tenant 'acme' is already named 'Acme'") as e:
        tenancy.create_tenant(" Acme ", tenant_id="acme2", actor="t")
    assert (e.value.field, e.value.status_code) == ("name", 409)
    with pytest.raises(TenantExistsError) as by_id:
        tenancy.create_tenant("Other", tenant_id="acme", actor="t")
    assert by_id.value.field == "id"
    assert [(t.id, t.name) for t in tenancy.list_tenants()] == [("acme", "Acme")]
    with sessions() as s:  # nothing of the refused tenant was written
        assert s.scalars(select(ApiKey.tenant_id)).all() == ["acme"]


def test_the_database_refuses_a_name_created_concurrently(
    tenancy: TenancyService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other create commits between our check and our insert: the check sees no
    # holder once, the unique constraint refuses the insert, the error names the name.
    tenancy.create_tenant("Acme", tenant_id="acme", actor="t")
    real = TenantRepository.get_by_name_any_tenant
    calls = []

    def raced(self: TenantRepository, name: str) -> Tenant | None:
        calls.append(name)
        return None if len(calls) == 1 else real(self, name)

    monkeypatch.setattr(TenantRepository, "get_by_name_any_tenant", raced)
    with pytest.raises(TenantExistsError, match="already named 'Acme'") as e:
        tenancy.create_tenant("Acme", tenant_id="acme2", actor="t")
    assert e.value.field == "name"
    assert len(calls) == 2
    assert [t.id for t in tenancy.list_tenants()] == ["acme"]


def test_an_implicit_tenant_named_like_another_gets_its_id_appended(
    tenancy: TenancyService,
) -> None:
    tenancy.create_tenant("acme", tenant_id="t_1", actor="t")
    assert tenancy.ensure_tenant("acme", actor="t").name == "acme (acme)"
    assert tenancy.ensure_tenant("globex", actor="t").name == "globex"


def test_a_key_from_another_server_key_or_a_wrong_secret_is_invalid(
    tenancy: TenancyService, sessions: sessionmaker[Session], clocks: Clocks
) -> None:
    key = tenancy.create_tenant("A", actor="t").key.key
    other = TenancyService(sessions, server_key=b"x" * 32, now=clocks.now, timer=clocks.timer)
    with pytest.raises(InvalidCredentialError):
        other.authenticate(key)
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    with pytest.raises(InvalidCredentialError):
        tenancy.authenticate(forged)
    unknown_prefix = "hsk_000000000000_" + key.split("_", 2)[2]
    with pytest.raises(InvalidCredentialError):
        tenancy.authenticate(unknown_prefix)


def test_scopes_decide_what_a_key_may_do(tenancy: TenancyService) -> None:
    tenant = tenancy.create_tenant("A", actor="t").tenant.id
    search_only = tenancy.create_key(tenant, scopes=["search"], actor="t")
    principal = tenancy.authenticate(search_only.key)
    assert tenancy.authorize(principal, accepted=[Scope.SEARCH], named_tenant=None) == tenant
    both = [Scope.SEARCH, Scope.INGEST]
    assert tenancy.authorize(principal, accepted=both, named_tenant=None) == tenant
    with pytest.raises(InsufficientScopeError) as caught:
        tenancy.authorize(principal, accepted=[Scope.INGEST], named_tenant=None)
    assert caught.value.required == ("ingest",)
    assert "scope ingest; the key has search" in caught.value.message
    with pytest.raises(InsufficientScopeError):
        tenancy.authorize(principal, accepted=[Scope.ADMIN], named_tenant=None)


def test_scopes_are_validated(tenancy: TenancyService) -> None:
    tenant = tenancy.create_tenant("A", actor="t").tenant.id
    with pytest.raises(InvalidRequestError, match="unknown scope 'root'"):
        tenancy.create_key(tenant, scopes=["root"], actor="t")
    with pytest.raises(InvalidRequestError, match="at least one"):
        tenancy.create_key(tenant, scopes=[], actor="t")
    with pytest.raises(TenantNotFoundError):
        tenancy.create_key("nobody", scopes=["search"], actor="t")


def test_a_tenant_key_may_not_name_another_tenant(tenancy: TenancyService) -> None:
    key = tenancy.create_tenant("A", tenant_id="a", actor="t").key.key
    tenancy.create_tenant("B", tenant_id="b", actor="t")
    principal = tenancy.authenticate(key)
    assert tenancy.authorize(principal, accepted=[Scope.SEARCH], named_tenant="a") == "a"
    with pytest.raises(TenantMismatchError):
        tenancy.authorize(principal, accepted=[Scope.SEARCH], named_tenant="b")


def test_a_key_expires_at_its_time_even_when_cached(
    tenancy: TenancyService, clocks: Clocks
) -> None:
    tenant = tenancy.create_tenant("A", actor="t").tenant.id
    key = tenancy.create_key(
        tenant, scopes=["search"], expires_at=T0 + timedelta(seconds=10), actor="t"
    ).key
    assert tenancy.authenticate(key).tenant_id == tenant  # cached from here on
    clocks.wall += timedelta(seconds=10)  # the cache's clock stays: the entry is fresh
    with pytest.raises(ExpiredCredentialError, match="has expired"):
        tenancy.authenticate(key)
    with pytest.raises(InvalidRequestError, match="in the future"):
        tenancy.create_key(tenant, scopes=["search"], expires_at=clocks.wall, actor="t")


def test_a_revocation_applies_at_once_in_the_process_that_made_it(
    tenancy: TenancyService,
) -> None:
    created = tenancy.create_tenant("A", actor="t")
    key = tenancy.create_key(created.tenant.id, scopes=["search"], actor="t")
    tenancy.authenticate(key.key)  # cached
    view = tenancy.revoke_key(key.view.id, actor="t")
    assert view.revoked_at == T0
    with pytest.raises(RevokedCredentialError):
        tenancy.authenticate(key.key)
    # Revoking again changes nothing; the tenant's other key still works.
    assert tenancy.revoke_key(key.view.id, actor="t").revoked_at == T0
    assert tenancy.authenticate(created.key.key).tenant_id == created.tenant.id


def test_another_process_refuses_a_revoked_key_within_the_cache_ttl(
    sessions: sessionmaker[Session], clocks: Clocks
) -> None:
    api = service_on(sessions, clocks, ttl=30)  # an API process
    cli = service_on(sessions, clocks, ttl=30)  # `hsearch keys revoke`, elsewhere
    created = cli.create_tenant("A", actor="t")
    api.authenticate(created.key.key)
    cli.revoke_key(created.key.view.id, actor="t")
    clocks.advance(29)
    assert api.authenticate(created.key.key).tenant_id == created.tenant.id  # still cached
    clocks.advance(1)
    with pytest.raises(RevokedCredentialError):
        api.authenticate(created.key.key)


def test_with_no_cache_every_check_reads_the_database(
    sessions: sessionmaker[Session], clocks: Clocks
) -> None:
    api = service_on(sessions, clocks, ttl=0)
    cli = service_on(sessions, clocks)
    created = cli.create_tenant("A", actor="t")
    assert api.cached(created.key.key) is None
    api.authenticate(created.key.key)
    assert api.cached(created.key.key) is None
    cli.revoke_key(created.key.view.id, actor="t")
    with pytest.raises(RevokedCredentialError):
        api.authenticate(created.key.key)


def test_a_suspended_tenant_is_refused_and_can_be_resumed(
    sessions: sessionmaker[Session], clocks: Clocks
) -> None:
    api = service_on(sessions, clocks)
    created = api.create_tenant("A", actor="t")
    key, tenant = created.key.key, created.tenant.id
    api.authorize(api.authenticate(key), accepted=[Scope.SEARCH], named_tenant=None)
    assert api.set_tenant_status(tenant, TenantStatus.SUSPENDED, actor="t").status == "suspended"
    with pytest.raises(TenantSuspendedError):  # at once in the process that suspended it
        api.authorize(api.authenticate(key), accepted=[Scope.SEARCH], named_tenant=None)
    # Resumed by another process: this one sees it once its cached entry is stale.
    service_on(sessions, clocks).set_tenant_status(tenant, TenantStatus.ACTIVE, actor="t")
    with pytest.raises(TenantSuspendedError):
        api.authorize(api.authenticate(key), accepted=[Scope.SEARCH], named_tenant=None)
    clocks.advance(30)
    assert api.authorize(api.authenticate(key), accepted=[Scope.SEARCH], named_tenant=None)
    with pytest.raises(TenantNotFoundError):
        api.set_tenant_status("nobody", TenantStatus.SUSPENDED, actor="t")


def test_last_use_is_recorded_when_the_database_is_asked(
    tenancy: TenancyService, clocks: Clocks
) -> None:
    created = tenancy.create_tenant("A", actor="t")
    assert tenancy.list_keys(created.tenant.id)[0].last_used_at is None
    tenancy.authenticate(created.key.key)
    clocks.advance(5)
    tenancy.authenticate(created.key.key)  # a cache hit: no write
    assert tenancy.list_keys(created.tenant.id)[0].last_used_at == T0


def test_keys_are_listed_per_tenant_without_secrets(
    tenancy: TenancyService, clocks: Clocks
) -> None:
    a = tenancy.create_tenant("A", tenant_id="a", actor="t")
    tenancy.create_tenant("B", tenant_id="b", actor="t")
    clocks.advance(1)
    extra = tenancy.create_key("a", scopes=["ingest", "search"], name="loader", actor="t")
    listed = tenancy.list_keys("a")
    assert [k.id for k in listed] == [a.key.view.id, extra.view.id]
    assert listed[1].scopes == ("ingest", "search")
    assert listed[1].name == "loader"
    assert all(k.tenant_id == "a" for k in listed)
    assert extra.key not in repr(listed)
    assert extra.key not in repr(extra)
    with pytest.raises(TenantNotFoundError):
        tenancy.list_keys("nobody")


def test_a_revocation_scoped_to_a_tenant_cannot_touch_another_tenants_key(
    tenancy: TenancyService,
) -> None:
    tenancy.create_tenant("A", tenant_id="a", actor="t")
    b = tenancy.create_tenant("B", tenant_id="b", actor="t")
    with pytest.raises(ApiKeyNotFoundError):
        tenancy.revoke_key(b.key.view.id, tenant_id="a", actor="t")
    assert tenancy.authenticate(b.key.key).tenant_id == "b"
    with pytest.raises(ApiKeyNotFoundError):
        tenancy.revoke_key(uuid.uuid4(), actor="t")


def test_an_operator_acts_for_a_named_existing_tenant_and_is_audited(
    tenancy: TenancyService,
) -> None:
    tenancy.create_tenant("A", tenant_id="a", actor="cli:root")
    operator = tenancy.create_operator_key(name="on call", actor="cli:root")
    assert operator.key.startswith("hso_")
    principal = tenancy.authenticate(operator.key)
    assert (principal.role, principal.tenant_id) == (CredentialRole.OPERATOR, None)
    assert tenancy.act_for(principal, named_tenant="a", action="POST /v1/search") == "a"
    with pytest.raises(TenantRequiredError, match="X-Hsearch-Tenant"):
        tenancy.act_for(principal, named_tenant=None, action="POST /v1/search")
    with pytest.raises(TenantNotFoundError):
        tenancy.act_for(principal, named_tenant="nobody", action="POST /v1/search")
    latest = tenancy.audit_log()[0]
    assert (latest.actor, latest.action, latest.tenant_id, latest.target) == (
        f"key:{operator.view.prefix}",
        "api.request",
        "a",
        "POST /v1/search",
    )


def test_every_change_is_in_the_audit_log(tenancy: TenancyService, clocks: Clocks) -> None:
    created = tenancy.create_tenant("A", tenant_id="a", actor="cli:root")
    key = tenancy.create_key("a", scopes=["search"], actor="cli:root")
    tenancy.revoke_key(key.view.id, actor="cli:root")
    tenancy.set_tenant_status("a", TenantStatus.SUSPENDED, actor="cli:root")
    tenancy.set_tenant_status("a", TenantStatus.SUSPENDED, actor="cli:root")  # no change
    tenancy.set_tenant_status("a", TenantStatus.ACTIVE, actor="cli:root")
    tenancy.create_operator_key(actor="cli:root")
    actions = [e.action for e in reversed(tenancy.audit_log())]
    assert actions == [
        "tenant.create",
        "key.create",
        "key.create",
        "key.revoke",
        "tenant.suspend",
        "tenant.resume",
        "operator.create",
    ]
    assert all(e.actor == "cli:root" for e in tenancy.audit_log())
    assert {e.tenant_id for e in tenancy.audit_log(tenant_id="a")} == {"a"}
    logged = repr(tenancy.audit_log())
    assert created.key.key not in logged
    assert key.key not in logged


class CountingSessions:
    """A session factory that counts the sessions opened through it."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions
        self.opened = 0

    def __call__(self) -> Session:
        self.opened += 1
        return self._sessions()


def test_a_cached_key_costs_no_database_round_trip(
    sessions: sessionmaker[Session], clocks: Clocks
) -> None:
    counting = CountingSessions(sessions)
    api = TenancyService(
        counting,  # type: ignore[arg-type]  # quacks like a sessionmaker
        server_key=SERVER_KEY,
        now=clocks.now,
        timer=clocks.timer,
    )
    key = service_on(sessions, clocks).create_tenant("A", actor="t").key.key
    api.authenticate(key)
    opened = counting.opened
    for _ in range(100):
        principal = api.cached(key)
        assert principal is not None
        api.authorize(principal, accepted=[Scope.SEARCH], named_tenant=None)
        api.authenticate(key)
    assert counting.opened == opened


# The metadata database down -----------------------------------------------------------


def test_a_key_verified_within_the_stale_window_is_accepted_while_the_database_is_down(
    sessions: sessionmaker[Session], clocks: Clocks
) -> None:
    outage = Outage(sessions)
    # No TTL cache: every check asks the database, so only the stale window can answer.
    tenancy = TenancyService(
        outage,
        server_key=SERVER_KEY,
        cache_ttl_s=0,
        stale_ttl_s=60,
        now=clocks.now,
        timer=clocks.timer,
    )
    seen = tenancy.create_tenant("Acme", tenant_id="acme", actor="t").key.key
    unseen = tenancy.create_key("acme", scopes=["search"], actor="t").key
    assert tenancy.authenticate(seen).tenant_id == "acme"
    outage.down = True
    clocks.advance(59)
    opened = outage.opened
    assert tenancy.authenticate(seen).tenant_id == "acme", "verified 59 s ago: accepted"
    assert outage.opened > opened, "the database was asked first"
    with pytest.raises(MetadataUnavailableError) as refused:
        tenancy.authenticate(unseen)  # never verified: refused, not accepted blindly
    assert (refused.value.status_code, refused.value.code) == (503, "metadata_unavailable")
    assert refused.value.retry_after > 0
    with pytest.raises(MetadataUnavailableError):
        tenancy.authenticate(seen[:-1] + ("A" if seen[-1] != "A" else "B"))  # a wrong secret
    clocks.advance(1)
    with pytest.raises(MetadataUnavailableError):
        tenancy.authenticate(seen)  # 60 s since it was verified: fail closed
    outage.down = False
    assert tenancy.authenticate(seen).tenant_id == "acme", "the database is back"


def test_a_key_refused_by_the_database_is_not_accepted_once_it_is_down(
    sessions: sessionmaker[Session], clocks: Clocks
) -> None:
    outage = Outage(sessions)
    tenancy = TenancyService(
        outage, server_key=SERVER_KEY, cache_ttl_s=0, stale_ttl_s=60, timer=clocks.timer
    )
    key = tenancy.create_tenant("Acme", tenant_id="acme", actor="t").key
    assert tenancy.authenticate(key.key).tenant_id == "acme"
    other = service_on(sessions, clocks)  # another process revokes it
    other.revoke_key(key.view.id, actor="t")
    with pytest.raises(RevokedCredentialError):
        tenancy.authenticate(key.key)
    outage.down = True
    with pytest.raises(MetadataUnavailableError):
        tenancy.authenticate(key.key)


def test_a_revocation_in_this_process_applies_while_the_database_is_down(
    sessions: sessionmaker[Session], clocks: Clocks
) -> None:
    outage = Outage(sessions)
    tenancy = TenancyService(
        outage, server_key=SERVER_KEY, cache_ttl_s=0, stale_ttl_s=60, timer=clocks.timer
    )
    key = tenancy.create_tenant("Acme", tenant_id="acme", actor="t").key
    assert tenancy.authenticate(key.key).tenant_id == "acme"
    tenancy.revoke_key(key.view.id, actor="t")
    outage.down = True
    with pytest.raises(MetadataUnavailableError):
        tenancy.authenticate(key.key)


def test_a_search_token_is_accepted_while_the_database_is_down_if_its_parent_was_seen(
    sessions: sessionmaker[Session], clocks: Clocks
) -> None:
    outage = Outage(sessions)
    tenancy = TenancyService(
        outage,
        server_key=SERVER_KEY,
        cache_ttl_s=0,
        stale_ttl_s=60,
        timer=clocks.timer,  # tokens are judged by the real clock
    )
    key = tenancy.create_tenant("Acme", tenant_id="acme", actor="t").key.key
    principal = tenancy.authenticate(key)
    token = tenancy.mint_token(principal, filter={"lang": {"eq": "en"}}).token
    assert tenancy.authenticate(token).token is not None
    other = tenancy.create_key("acme", scopes=["search"], actor="t").key
    unseen_parent = tenancy.mint_token(
        tenancy.authenticate(other), filter={"lang": {"eq": "en"}}
    ).token
    outage.down = True
    assert tenancy.authenticate(token).tenant_id == "acme"
    clocks.advance(61)
    with pytest.raises(MetadataUnavailableError):
        tenancy.authenticate(token)
    with pytest.raises(MetadataUnavailableError):
        tenancy.authenticate(unseen_parent)
