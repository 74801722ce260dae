"""``in_values`` on Postgres: a list bound as one array parameter (``= ANY``) selects
what it does on SQLite (tests/unit/test_db_values.py)."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.unit.test_db_values import check_in_values

pytestmark = pytest.mark.integration


def test_a_list_bound_as_one_parameter_selects_what_in_does(
    sessions: sessionmaker[Session], tenant: str
) -> None:
    check_in_values(sessions, tenant)
