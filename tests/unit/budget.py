"""The search budget of the unit tests.

A search's budget is counted from the start of the request, encoding included; the
default (``search.leg_timeout_s``, 2 s) is spent by a loaded machine before the legs
answer, and both legs out of it is a 503. Tests search with the largest budget the
settings allow, so that only a leg that never answers misses it. A test about deadlines
sets its own (a request's ``leg_timeout_s``, or ``leg_timeout_ms`` through the API).
"""

from __future__ import annotations

from typing import Any

UNHURRIED: dict[str, Any] = {"leg_timeout_s": 30.0, "max_leg_timeout_s": 60.0}
"""``SearchSettings`` fields: ``SearchSettings(**UNHURRIED)``."""
