"""A tenant's concept index on small constructed corpora: the graph's nodes and links,
two topics as two communities, a hierarchy when a community is large, ids that do not
change for the same data, and the lookups the lazy query makes."""

from __future__ import annotations

import itertools
import random

from hsearch.concepts.index import ConceptIndex, ConceptRow, IndexParams, build_index

VOLCANOES = ("lava", "magma", "crater", "eruption", "volcanic ash", "tectonic plate")
BAKING = ("flour", "butter", "oven", "sugar", "bread dough", "yeast")


def corpus(
    topics: dict[str, tuple[str, ...]], *, per_topic: int, seed: int = 7
) -> list[ConceptRow]:
    """A document per topic, each chunk holding three of its topic's concepts."""
    rng = random.Random(seed)
    rows = []
    for name, concepts in topics.items():
        chunks = tuple(tuple(rng.sample(concepts, 3)) for _ in range(per_topic))
        rows.append(
            ConceptRow(
                document_id=f"id-{name}",
                external_id=name,
                title=name.title(),
                chunk_ids=tuple(f"{name}-{i}" for i in range(per_topic)),
                concepts=chunks,
            )
        )
    return rows


def two_topics() -> ConceptIndex:
    rows = corpus({"volcanoes": VOLCANOES, "baking": BAKING}, per_topic=20)
    # A concept of one chunk only is no node.
    rows.append(ConceptRow("id-x", "x", "X", ("x-0",), (("lava", "unique thing"),)))
    return build_index("t", "v1", rows)


def test_two_topics_make_two_communities() -> None:
    index = two_topics()
    assert index.chunk_count == 41
    assert index.concept_count == 12  # "unique thing" is in one chunk
    top = index.communities(level=0)
    assert sorted(sorted(c.concepts) for c in top) == [sorted(BAKING), sorted(VOLCANOES)]
    assert all(c.parent is None and c.children == () and c.size == 6 for c in top)
    volcanoes = next(c for c in top if "lava" in c.concepts)
    assert all(cid.startswith(("volcanoes-", "x-")) for cid in volcanoes.chunk_ids)
    assert volcanoes.chunk_count == 21
    assert index.community(volcanoes.id) == volcanoes
    assert index.community("L0-nothing") is None
    assert index.document_of("volcanoes-3") == "id-volcanoes"
    assert index.document_of("nowhere") is None
    assert index.chunk_concepts("x-0") == ("lava", "unique thing")


def test_the_same_data_gives_the_same_communities_and_ids() -> None:
    first, second = two_topics(), two_topics()
    assert [c.id for c in first.communities()] == [c.id for c in second.communities()]
    assert first.communities() == second.communities()
    assert all(c.id.startswith("L0-") for c in first.communities())


def test_a_large_community_is_split_one_level_down() -> None:
    # Eight tight groups of eight concepts, the groups of each half loosely linked: a
    # community larger than four concepts is split again.
    groups = [tuple(f"g{g} c{i}" for i in range(8)) for g in range(8)]
    rng = random.Random(3)
    chunks: list[tuple[str, ...]] = []
    for g, group in enumerate(groups):
        chunks.extend(tuple(rng.sample(group, 4)) for _ in range(30))
        partner = groups[g ^ 1]
        chunks.extend((rng.choice(group), rng.choice(partner)) for _ in range(6))
    row = ConceptRow("d", "d", "D", tuple(f"c{i}" for i in range(len(chunks))), tuple(chunks))
    params = IndexParams(max_community_size=4, levels=3, resolution=0.2)
    index = build_index("t", "v", [row], params=params)
    levels = index.communities_per_level()
    assert 0 in levels
    assert 1 in levels
    for community in index.communities(level=1):
        parent = index.community(community.parent or "")
        assert parent is not None
        assert parent.level == 0
        assert community.id in parent.children
    for community in index.communities(level=0):
        if community.size > 4:
            children = index.communities(parent=community.id)
            assert children
            assert sum(c.size for c in children) <= community.size
    assert len(index.communities()) == sum(levels.values())


def test_lookups_of_the_lazy_query() -> None:
    index = two_topics()
    found = index.chunks_with(["unique thing", "lava"], limit=3)
    assert found[0][0] == "x-0"  # holds both
    assert found[0][1] > found[1][1]
    assert index.chunks_with(["not held"], limit=3) == []
    related = [c for c, _ in index.related_concepts(["lava"], limit=20)]
    assert set(related) == set(VOLCANOES) - {"lava"}  # "unique thing" is no node
    [(best, score)] = index.communities_for(["magma", "lava", "flour"], limit=1)
    assert "magma" in best.concepts
    assert score > 0
    assert index.match(["the volcanic ash cloud", "ash", "butter"]) == (
        "volcanic ash",
        "butter",
    )
    assert index.match(["plate"]) == ("tectonic plate",)
    assert index.match(["nothing here"]) == ()
    assert [c.id for c in index.find(concepts=["Flour"], limit=5)] == [
        c.id for c in index.communities(level=0) if "flour" in c.concepts
    ]


def test_common_concepts_and_an_empty_tenant() -> None:
    rows = corpus({"a": VOLCANOES}, per_topic=200)
    everywhere = ConceptRow(
        "e", "e", "E", tuple(f"e{i}" for i in range(200)), tuple(("thing",) for _ in range(200))
    )
    index = build_index("t", "v", [*rows, everywhere], params=IndexParams(max_chunk_share=0.1))
    assert "thing" not in {c for c, _ in index.related_concepts(["lava"], limit=50)}
    assert index.idf("thing") > 0  # held, only not a node
    empty = build_index("t", "v", [])
    assert (empty.chunk_count, empty.concept_count, empty.link_count) == (0, 0, 0)
    assert empty.communities() == []
    assert empty.chunks_with(["lava"], limit=5) == []


def test_progress_is_reported_by_stage() -> None:
    seen: list[tuple[str, float]] = []
    build_index(
        "t", "v", corpus({"a": VOLCANOES}, per_topic=5), progress=lambda s, f: seen.append((s, f))
    )
    stages = [s for s, _ in seen]
    assert [k for k, _ in itertools.groupby(stages)] == [
        "counting",
        "linking",
        "communities",
        "ready",
    ]
    assert seen[-1] == ("ready", 1.0)
