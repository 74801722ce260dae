"""Communities through the sync and the async client, against the live API: the
tenant's concept communities listed (by concept too) and one read with its chunks."""

from __future__ import annotations

from hsearch_client import AsyncClient, Client, CommunityDetail, CommunityList
from tests.unit.hsearch_client.conftest import Served

TEXTS = [
    "Lava and magma rise through the crater of the volcano.",
    "The volcano spread volcanic ash and lava over the crater.",
    "Flour, butter and sugar make the dough before the oven.",
    "The baker kneads the dough with flour and puts it in the oven.",
]


async def test_communities_are_listed_and_read(served: Served) -> None:
    with Client(served.url, api_key=served.key) as client:
        accepted = client.submit_documents(
            [{"external_id": f"d{i}", "text": t} for i, t in enumerate(TEXTS)]
        )
        job = client.wait_for_job(accepted.job_id, timeout_s=30, poll_interval_s=0.05)
        assert job.status == "succeeded", job
        listed = client.list_communities(concepts="lava", limit=1)
        assert isinstance(listed, CommunityList)
        [lava] = listed.communities
        assert "lava" in lava.concepts
    async with AsyncClient(served.url, api_key=served.key) as client:
        one = await client.get_community(lava.id)
        assert isinstance(one, CommunityDetail)
        assert one.id == lava.id
        assert {c.external_id for c in one.chunks} <= {"d0", "d1"}
        assert (await client.list_communities(level=0)).version == listed.version
