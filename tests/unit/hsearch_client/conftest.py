"""The live API the package's tests talk to: the real app served by uvicorn in a thread
(``tests.unit.client.conftest.live_api``, with a worker thread indexing), chunks small
enough that a long document has several, answers written by a scripted model; keys of
its tenant and of another."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hsearch.config import IngestSettings
from hsearch.llm.protocol import ChatMessage
from hsearch.llm.scripted import ScriptedLLM
from hsearch.types import Scope
from hsearch_client import Client
from tests.unit.api.conftest import api_settings
from tests.unit.client.conftest import LiveApi, live_api

LONG = " ".join(f"The river {i} floods the valley in spring." for i in range(40))
DOCUMENTS: list[dict[str, Any]] = [
    {"external_id": "long", "title": "Floods", "text": LONG, "metadata": {"year": 2001}},
    {
        "external_id": "short",
        "title": "Rivers",
        "text": "A river floods. Rivers carry water down to the sea.",
        "metadata": {"year": 2020},
    },
    {"external_id": "desert", "title": "Deserts", "text": "Deserts get very little rain."},
]
REPLY = "Rivers carry water down to the sea [1]."
"""What the scripted model answers a question with (one about volcanoes aside)."""


def reply(messages: Sequence[ChatMessage]) -> str:
    if "volcano" in messages[-1].content.lower():
        return "Volcanoes form where magma rises through the crust [1]."
    return REPLY


@dataclass
class Served:
    api: LiveApi
    key: str
    """The default tenant's key, every scope."""
    search_key: str
    """The same tenant's key with the search scope only."""
    other_key: str
    """A key of another tenant (every scope), which holds no document."""

    @property
    def url(self) -> str:
        return self.api.url


@contextlib.contextmanager
def serving(tmp_path: Path) -> Iterator[Served]:
    """The live API with keys of two tenants (and the MCP tests' too: tests/unit/api)."""
    settings = api_settings(tmp_path / "server").model_copy(
        update={
            "ingest": IngestSettings(
                chunk_max_tokens=32, chunk_overlap_tokens=8, flush_min_interval_s=0
            )
        }
    )
    with live_api(settings, llm=ScriptedLLM(reply)) as api:
        tenancy = api.services.tenancy
        tenant = api.services.settings.api.default_tenant
        search_key = tenancy.create_key(tenant, scopes=[Scope.SEARCH], actor="test").key
        other = tenancy.create_tenant("another tenant", tenant_id="other", actor="test")
        yield Served(api=api, key=api.key, search_key=search_key, other_key=other.key.key)


def index(served: Served) -> Served:
    """``served`` with :data:`DOCUMENTS` indexed."""
    with Client(served.url, api_key=served.key) as client:
        accepted = client.submit_documents(DOCUMENTS)
        job = client.wait_for_job(accepted.job_id, timeout_s=30, poll_interval_s=0.05)
        assert job.status == "succeeded", job
    return served


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path) as live:
        yield live


@pytest.fixture
def indexed(served: Served) -> Served:
    return index(served)
