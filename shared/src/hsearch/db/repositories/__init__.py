"""Repositories: the only place SQL is written (contract ``sql-in-repositories``).

They run their statements in the session they are given and at most ``flush()``:
they never open a session, commit or roll back; the caller's unit of work does
(:mod:`hsearch.db.engine`).

A read of tenant data takes the tenant as a required ``tenant_id``. A read across
tenants is a method of its own whose name says so: ``..._any_tenant`` (a row by its
id, whichever tenant holds it: the worker by its message's job, authentication by a
key's prefix) or ``..._all_tenants`` (rows of every tenant: the sweeper, reindex,
reconcile, operators' figures). Reads by a document's id need no tenant: the id is made
of the tenant and the external id. ``tests/unit/test_db_tenant_scope.py`` checks every
public method against these rules.
"""
