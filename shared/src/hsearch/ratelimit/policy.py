"""Which rate limits a request is held to: pure, from the settings alone."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from limits import RateLimitItem, parse_many

from hsearch.config import RateLimitSettings
from hsearch.types import Scope

__all__ = ["AppliedLimit", "RateLimitPolicy", "charged_scope"]


@dataclass(frozen=True, slots=True)
class AppliedLimit:
    """The limits one request is counted against, and the setting they come from (named
    in a refusal so that an operator knows what to raise)."""

    items: tuple[RateLimitItem, ...]
    text: str
    """As written in the setting: ``600/minute``."""
    setting: str
    """``ratelimit.keys.hsk_…``, ``ratelimit.scopes.search`` or ``ratelimit.default``."""


class RateLimitPolicy:
    """Per key and scope: the key's own limit (``ratelimit.keys``), else the scope's
    (``ratelimit.scopes``), else ``ratelimit.default``. Each key has one budget per scope a
    request is charged to (:func:`charged_scope`)."""

    def __init__(self, settings: RateLimitSettings) -> None:
        self.settings = settings
        self._default = _applied(settings.default, "ratelimit.default")
        self._scopes = {
            scope: _applied(text, f"ratelimit.scopes.{scope.value}")
            for scope, text in settings.scopes.items()
        }
        self._keys = {
            prefix: _applied(text, f"ratelimit.keys.{prefix}")
            for prefix, text in settings.keys.items()
        }

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def limit_for(self, *, scope: Scope, key_prefix: str) -> AppliedLimit:
        return self._keys.get(key_prefix) or self._scopes.get(scope) or self._default


def charged_scope(accepted: Iterable[Scope], held: Iterable[Scope]) -> Scope:
    """The scope a request is charged to: the first of the route's ``accepted`` scopes that
    the credential ``held`` (the one that let it in), else the route's first (an operator
    credential passes every scope check and holds none of a tenant's)."""
    accepted = list(accepted)
    held = set(held)
    for scope in accepted:
        if scope in held:
            return scope
    return accepted[0] if accepted else Scope.SEARCH


def _applied(text: str, setting: str) -> AppliedLimit:
    return AppliedLimit(items=tuple(parse_many(text)), text=text.strip(), setting=setting)
