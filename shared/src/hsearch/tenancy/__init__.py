"""Tenants and their credentials: API keys (:mod:`.keys`), the service that issues,
lists, revokes and checks them (:mod:`.service`)."""
