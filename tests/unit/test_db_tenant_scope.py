"""Reads of tenant data name the tenant (docs/architecture.md, Data access).

Every public method of every repository is accounted for: it takes the tenant as a
required ``tenant_id: str``; or its name says it reads across tenants (``_any_tenant``:
a row by its id, whichever tenant holds it; ``_all_tenants``: rows of every tenant); or
it is listed in :data:`UNSCOPED` with the reason it needs no tenant (a write, a read by
ids that are the tenant's already). A tenant made optional again (``tenant_id: str |
None = None``), or a new method that reads without it under a plain name, fails here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator

import hsearch.db.repositories as repositories

ACROSS_TENANTS = ("_any_tenant", "_all_tenants")

_BY_DOCUMENT_ID = (
    "by document ids, derived from the tenant and the external id: an id names its tenant"
)
_OF_A_JOB_READ = "the items of a job the caller has read already (scoped, or by a named read)"
_WRITE = "a write: the rows it changes carry their tenant, or were read by the caller"

UNSCOPED: dict[str, str] = {
    "ApiKeyRepository.add": _WRITE,
    "ApiKeyRepository.touch": _WRITE,
    "AuditRepository.add": _WRITE,
    "DocumentRepository.add": _WRITE,
    "DocumentRepository.delete_all": _WRITE,
    "DocumentRepository.get": _BY_DOCUMENT_ID,
    "DocumentRepository.get_for_update": _BY_DOCUMENT_ID,
    "DocumentRepository.get_many": _BY_DOCUMENT_ID,
    "DocumentRepository.insert_all": _WRITE,
    "IdentityRepository.database_id": "the database's own identity: no tenant's data",
    "JobRepository.add": _WRITE,
    "JobRepository.failed_items": _OF_A_JOB_READ,
    "JobRepository.item_rows": _OF_A_JOB_READ,
    "JobRepository.item_states": _OF_A_JOB_READ,
    "JobRepository.items": _OF_A_JOB_READ,
    "JobRepository.mark_sent": _WRITE,
    "JobRepository.pending_item_ids": _OF_A_JOB_READ,
    "JobRepository.pending_items_of": _OF_A_JOB_READ,
    "JobRepository.purge_finished": "a write: the sweeper's retention, of every tenant's jobs",
    "JobRepository.record_encoding": _WRITE,
    "JobRepository.release_leases": _WRITE,
    "JobRepository.renew_leases": _WRITE,
    "JobRepository.reopen_turn": _WRITE,
    "JobRepository.resend_failed": _WRITE,
    "JobRepository.start_turn": _WRITE,
    "JobRepository.take_expired": _WRITE,
    "JobRepository.take_unsent": _WRITE,
    "JobRepository.take_unstarted": _WRITE,
    "JobRepository.unfinished_chunk_ids_of": _BY_DOCUMENT_ID,
    "JobRepository.update_items": _WRITE,
    "LexicalStatsRepository.replace_all": "a write: a rebuild's, of every tenant's statistics",
    "TenantRepository.add": _WRITE,
    "VocabularyRepository.clear": "a write: a rebuild's, of every tenant's words",
}


def repository_methods() -> Iterator[tuple[str, Callable[..., object]]]:
    """``("<Repository>.<method>", function)`` for every public method of every class
    named ``*Repository`` in :mod:`hsearch.db.repositories`."""
    for info in pkgutil.iter_modules(repositories.__path__):
        module = importlib.import_module(f"{repositories.__name__}.{info.name}")
        for name, cls in vars(module).items():
            if not (inspect.isclass(cls) and cls.__module__ == module.__name__):
                continue
            if not name.endswith("Repository"):
                continue
            for method, function in vars(cls).items():
                if not method.startswith("_") and inspect.isfunction(function):
                    yield f"{name}.{method}", function


METHODS = dict(repository_methods())


def test_the_repositories_are_found() -> None:
    assert {"JobRepository.get", "ApiKeyRepository.get", "AuditRepository.list"} <= set(METHODS)


def test_a_tenant_argument_is_required() -> None:
    optional = []
    for qualified, function in METHODS.items():
        tenant = inspect.signature(function).parameters.get("tenant_id")
        if tenant is None:
            continue
        # Annotations are strings here (``from __future__ import annotations``).
        if tenant.default is not inspect.Parameter.empty or tenant.annotation != "str":
            optional.append(f"{qualified}: tenant_id: {tenant.annotation} = {tenant.default}")
    assert optional == [], (
        "a read of tenant data takes the tenant as a required `tenant_id: str`; a read "
        "across tenants is a method of its own, named `..._any_tenant` or `..._all_tenants`"
    )


def test_a_read_across_tenants_says_so_in_its_name() -> None:
    unnamed = [
        qualified
        for qualified, function in METHODS.items()
        if "tenant_id" not in inspect.signature(function).parameters
        and not qualified.endswith(ACROSS_TENANTS)
        and qualified not in UNSCOPED
    ]
    assert unnamed == [], (
        "these take no tenant: give them a required `tenant_id: str`, name them "
        "`..._any_tenant` / `..._all_tenants` if they read across tenants, or list them "
        "in UNSCOPED with the reason they need none"
    )


def test_a_method_named_across_tenants_takes_no_tenant() -> None:
    confused = [
        qualified
        for qualified, function in METHODS.items()
        if qualified.endswith(ACROSS_TENANTS)
        and "tenant_id" in inspect.signature(function).parameters
    ]
    assert confused == []


def test_every_exemption_names_a_method_that_takes_no_tenant() -> None:
    stale = [
        qualified
        for qualified in UNSCOPED
        if qualified not in METHODS
        or "tenant_id" in inspect.signature(METHODS[qualified]).parameters
    ]
    assert stale == [], "drop these from UNSCOPED"
