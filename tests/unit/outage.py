"""A session factory whose database can be taken down and brought back by a test."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker


class Outage(sessionmaker[Session]):
    """Sessions on ``sessions``' engine, raising OperationalError (what a refused
    connection raises) while :attr:`down`; every session opened is counted."""

    down: bool = False
    opened: int = 0

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        super().__init__(sessions.kw["bind"], expire_on_commit=False)

    def __call__(self, **local_kw: Any) -> Session:
        self.opened += 1
        if self.down:
            raise OperationalError("SELECT 1", {}, ConnectionRefusedError("database is down"))
        return super().__call__(**local_kw)
