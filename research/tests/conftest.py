"""The research tests run with the product suite's settings and fixtures: the same
hypothesis profiles and offline model hub (``tests/conftest.py``) and the migrated
SQLite ``sessions`` of the unit tier."""

from __future__ import annotations

import tests.conftest  # noqa: F401 - its import registers the profiles and the hub settings
from tests.unit.conftest import sessions

__all__ = ["sessions"]
