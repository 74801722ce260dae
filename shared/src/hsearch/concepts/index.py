"""A tenant's concept index: its chunks' concepts, their co-occurrence graph and its
hierarchical communities (the Level 1 index of lazy search), built from the documents'
rows. Pure: no I/O; :func:`build_index` runs in a worker thread
(:mod:`hsearch.concepts.store`).

The graph (:func:`build_index`, docs/lazy.md):

* **nodes**: concepts held by at least ``min_chunks`` chunks (a concept of one chunk
  links nothing), and by no more than ``max_chunk_share`` of them (once the tenant has
  more than :data:`COMMON_FLOOR` chunks: a concept in every other chunk links every
  topic to every other);
* **edges**: two nodes held by one chunk, weighted by the number of chunks that hold
  both; a chunk links its first ``edges_per_chunk`` nodes only (the work is quadratic
  in them);
* **communities**: Leiden (``leidenalg``, modularity with ``resolution``, a fixed
  ``seed``) over the whole graph gives level 0; a community of more than
  ``max_community_size`` concepts is split again by Leiden over its own subgraph, one
  level down, down to ``levels`` levels, as GraphRAG's hierarchical Leiden does. A
  community of one concept (an isolated node) is none. Each community's id is derived
  from its level and its concepts, so the same data gives the same ids; its
  representative phrases are its concepts ranked by the chunks that hold them times
  (1 + their weighted degree inside the community), its chunks those that hold its
  concepts, ranked by how many (then by the summed idf of those concepts).

A concept's idf is ``ln(1 + N / df)`` over the tenant's ``N`` chunks with concepts.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "COMMON_FLOOR",
    "Community",
    "ConceptIndex",
    "ConceptRow",
    "IndexParams",
    "Progress",
    "build_index",
    "normalise",
]

COMMON_FLOOR: Final = 50
"""A concept held by at most this many chunks is never too common to be a node."""

REPRESENTATIVES: Final = 10
"""Representative phrases per community."""

Progress = Callable[[str, float], None]
"""Told of a build's stage and the fraction of it done (0 to 1)."""

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ConceptRow:
    """An indexed document as the index reads it: its chunks and their concepts
    (aligned)."""

    document_id: str
    external_id: str
    title: str
    chunk_ids: tuple[str, ...]
    concepts: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class IndexParams:
    """How the graph and its communities are built (module docstring; their defaults
    and meanings: :class:`hsearch.config.ConceptSettings`)."""

    min_chunks: int = 2
    max_chunk_share: float = 0.1
    edges_per_chunk: int = 24
    max_community_size: int = 40
    levels: int = 3
    resolution: float = 1.0
    seed: int = 42
    chunks_per_community: int = 200


@dataclass(frozen=True, slots=True)
class Community:
    """A community of concepts at one level of the hierarchy."""

    id: str
    level: int
    parent: str | None
    children: tuple[str, ...]
    concepts: tuple[str, ...]
    """Representative phrases, best first (at most :data:`REPRESENTATIVES`)."""
    chunk_ids: tuple[str, ...]
    """Chunks holding its concepts, best first (at most ``chunks_per_community``)."""
    size: int
    """Concepts in it."""
    chunk_count: int = 0
    """Chunks holding any of its concepts (``chunk_ids`` may be cut)."""


@dataclass(frozen=True, slots=True)
class _Document:
    id: str
    external_id: str
    title: str


class ConceptIndex:
    """One tenant's concept index at one data version (module docstring); immutable."""

    def __init__(
        self,
        *,
        tenant_id: str,
        version: str,
        documents: Sequence[_Document],
        chunk_ids: Sequence[str],
        chunk_document: IntArray,
        chunk_offsets: IntArray,
        chunk_flat: IntArray,
        vocabulary: Sequence[str],
        df: IntArray,
        nodes: IntArray,
        adjacency: tuple[IntArray, IntArray, npt.NDArray[np.float64]],
        communities: Sequence[Community],
        membership: dict[int, dict[int, int]],
        build_s: float = 0.0,
    ) -> None:
        self.tenant_id = tenant_id
        self.version = version
        self.build_s = build_s
        self._documents = tuple(documents)
        self._chunk_ids = tuple(chunk_ids)
        self._chunk_index = {cid: i for i, cid in enumerate(self._chunk_ids)}
        self._chunk_document = chunk_document
        self._offsets = chunk_offsets
        self._flat = chunk_flat
        self._vocabulary = tuple(vocabulary)
        self._concept_index = {c: i for i, c in enumerate(self._vocabulary)}
        self._df = df
        n = max(len(self._chunk_ids), 1)
        self._idf = np.log1p(n / np.maximum(df, 1)).astype(np.float64)
        # Postings: concept id -> chunk indexes (ascending).
        order = np.argsort(chunk_flat, kind="stable")
        chunk_of_entry = np.repeat(np.arange(len(self._chunk_ids)), np.diff(chunk_offsets))
        self._post_chunks = chunk_of_entry[order]
        self._post_offsets = np.searchsorted(
            chunk_flat[order], np.arange(len(self._vocabulary) + 1)
        ).astype(np.int64)
        self._nodes = nodes
        self._node_of = {int(c): i for i, c in enumerate(nodes)}
        self._adj_offsets, self._adj_targets, self._adj_weights = adjacency
        self._communities = tuple(communities)
        self._by_id = {c.id: c for c in self._communities}
        self._membership = membership
        """Per level: concept id -> index in :attr:`_communities`."""
        # Tokens of each concept, for match().
        self._by_token: dict[str, list[int]] = {}
        for i, concept in enumerate(self._vocabulary):
            for token in set(concept.split()):
                self._by_token.setdefault(token, []).append(i)

    # -- figures ------------------------------------------------------------------

    @property
    def chunk_count(self) -> int:
        """Chunks with at least one concept."""
        return int(np.count_nonzero(np.diff(self._offsets)))

    @property
    def concept_count(self) -> int:
        """Concepts that are nodes of the graph."""
        return len(self._nodes)

    @property
    def link_count(self) -> int:
        """Co-occurrence links (each pair once)."""
        return len(self._adj_targets) // 2

    def communities_per_level(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for community in self._communities:
            counts[community.level] = counts.get(community.level, 0) + 1
        return dict(sorted(counts.items()))

    # -- chunks -------------------------------------------------------------------

    def chunk_concepts(self, chunk_id: str) -> tuple[str, ...]:
        """The chunk's concepts, in order of first appearance (none for a chunk the
        index does not hold)."""
        i = self._chunk_index.get(chunk_id)
        if i is None:
            return ()
        ids = self._flat[self._offsets[i] : self._offsets[i + 1]]
        return tuple(self._vocabulary[int(c)] for c in ids)

    def document_of(self, chunk_id: str) -> str | None:
        """The document id (a uuid as text) of the chunk, ``None`` if not held."""
        i = self._chunk_index.get(chunk_id)
        return None if i is None else self._documents[int(self._chunk_document[i])].id

    def document(self, chunk_id: str) -> tuple[str, str, str] | None:
        """The chunk's document as (id, external id, title)."""
        i = self._chunk_index.get(chunk_id)
        if i is None:
            return None
        doc = self._documents[int(self._chunk_document[i])]
        return doc.id, doc.external_id, doc.title

    def chunks_with(self, concepts: Iterable[str], *, limit: int) -> list[tuple[str, float]]:
        """Chunks holding any of ``concepts``, scored by the summed idf of the ones they
        hold, best first (then in index order)."""
        ids = self._known(concepts)
        if not ids or limit <= 0:
            return []
        scores = np.zeros(len(self._chunk_ids), dtype=np.float64)
        for c in ids:
            chunks = self._post_chunks[self._post_offsets[c] : self._post_offsets[c + 1]]
            scores[chunks] += self._idf[c]
        hit = np.flatnonzero(scores)
        ranked = hit[np.lexsort((hit, -scores[hit]))][:limit]
        return [(self._chunk_ids[int(i)], float(scores[i])) for i in ranked]

    # -- concepts -----------------------------------------------------------------

    def idf(self, concept: str) -> float:
        """The concept's idf (0 when the index does not hold it)."""
        c = self._concept_index.get(concept)
        return 0.0 if c is None else float(self._idf[c])

    def related_concepts(self, concepts: Iterable[str], *, limit: int) -> list[tuple[str, float]]:
        """Co-occurrence neighbours of ``concepts`` (not themselves), best first: summed
        over the given concepts, the chunks holding both divided by the geometric mean
        of each one's chunks."""
        ids = set(self._known(concepts))
        scores: dict[int, float] = {}
        for c in ids:
            node = self._node_of.get(c)
            if node is None:
                continue
            lo, hi = self._adj_offsets[node], self._adj_offsets[node + 1]
            for target, weight in zip(
                self._adj_targets[lo:hi], self._adj_weights[lo:hi], strict=True
            ):
                other = int(self._nodes[target])
                if other in ids:
                    continue
                norm = math.sqrt(float(self._df[c]) * float(self._df[other]))
                scores[other] = scores.get(other, 0.0) + float(weight) / norm
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], self._vocabulary[kv[0]]))
        return [(self._vocabulary[c], s) for c, s in ranked[: max(limit, 0)]]

    def match(self, phrases: Iterable[str]) -> tuple[str, ...]:
        """``phrases`` (a query's concepts, normalised as the extractor gives them)
        mapped onto concepts the index holds, each once, in order: the phrase itself if
        held; else the longest held concepts made of its words and holding its last
        word (its head: ``the first world war`` → ``world war``); else held concepts
        holding all its words (``einstein`` → ``albert einstein``), the most frequent
        first, at most three."""
        out: dict[str, None] = {}
        for phrase in phrases:
            for concept in self._match_one(phrase):
                out.setdefault(concept, None)
        return tuple(out)

    def _match_one(self, phrase: str) -> list[str]:
        if phrase in self._concept_index:
            return [phrase]
        words = phrase.split()
        if not words:
            return []
        tokens = set(words)
        head = words[-1]
        inside = [
            c for c in self._by_token.get(head, ()) if set(self._vocabulary[c].split()) <= tokens
        ]
        if inside:
            longest = max(len(self._vocabulary[c].split()) for c in inside)
            best = [c for c in inside if len(self._vocabulary[c].split()) == longest]
            return sorted((self._vocabulary[c] for c in best), key=lambda s: (-self.idf(s), s))
        rarest = min(words, key=lambda w: len(self._by_token.get(w, ())))
        holding = [
            c for c in self._by_token.get(rarest, ()) if tokens <= set(self._vocabulary[c].split())
        ]
        holding.sort(key=lambda c: (-int(self._df[c]), self._vocabulary[c]))
        return [self._vocabulary[c] for c in holding[:3]]

    # -- communities --------------------------------------------------------------

    def community(self, community_id: str) -> Community | None:
        return self._by_id.get(community_id)

    def communities(
        self, *, level: int | None = None, parent: str | None = None
    ) -> Sequence[Community]:
        """The communities (of ``level``, children of ``parent`` when given), by level,
        then largest first."""
        return [
            c
            for c in self._communities
            if (level is None or c.level == level) and (parent is None or c.parent == parent)
        ]

    def communities_for(
        self, concepts: Iterable[str], *, limit: int, level: int | None = None
    ) -> list[tuple[Community, float]]:
        """Communities holding any of ``concepts`` (of ``level`` when given), scored by
        the summed idf of the ones they hold, best first (then the deeper level, then
        by id)."""
        ids = self._known(concepts)
        scores: dict[int, float] = {}
        levels = [level] if level is not None else sorted(self._membership)
        for lvl in levels:
            members = self._membership.get(lvl, {})
            for c in ids:
                at = members.get(c)
                if at is not None:
                    scores[at] = scores.get(at, 0.0) + float(self._idf[c])
        ranked = sorted(
            scores.items(),
            key=lambda kv: (-kv[1], -self._communities[kv[0]].level, self._communities[kv[0]].id),
        )
        return [(self._communities[i], s) for i, s in ranked[: max(limit, 0)]]

    def find(
        self,
        *,
        level: int | None = None,
        parent: str | None = None,
        concepts: Sequence[str] = (),
        limit: int,
    ) -> list[Community]:
        """Communities (of ``level``, children of ``parent``) as a listing shows them:
        with ``concepts`` (phrases, normalised by :func:`normalise` and matched by
        :meth:`match`), those holding them, best first; without, by level, then largest
        first."""
        if concepts:
            matched = self.match(normalise(c) for c in concepts)
            ranked = self.communities_for(matched, limit=len(self._communities), level=level)
            found = [c for c, _ in ranked if parent is None or c.parent == parent]
        else:
            found = list(self.communities(level=level, parent=parent))
        return found[: max(limit, 0)]

    def documents_of(self, community: Community, *, limit: int) -> list[tuple[str, str, str]]:
        """The first ``limit`` distinct documents of the community's chunks, best first,
        as (id, external id, title)."""
        out: dict[str, tuple[str, str, str]] = {}
        for chunk in community.chunk_ids:
            doc = self.document(chunk)
            if doc is not None and doc[0] not in out:
                out[doc[0]] = doc
                if len(out) == limit:
                    break
        return list(out.values())

    def _known(self, concepts: Iterable[str]) -> list[int]:
        seen: dict[int, None] = {}
        for concept in concepts:
            c = self._concept_index.get(concept)
            if c is not None:
                seen.setdefault(c, None)
        return list(seen)


def normalise(phrase: str) -> str:
    """A phrase as concepts are keyed (NFKC, case folded, whitespace collapsed; no
    lemmas: :meth:`ConceptIndex.match` finds the concepts made of its words)."""
    return " ".join(unicodedata.normalize("NFKC", phrase).casefold().split())


def build_index(
    tenant_id: str,
    version: str,
    rows: Iterable[ConceptRow],
    *,
    params: IndexParams | None = None,
    progress: Progress | None = None,
) -> ConceptIndex:
    """The tenant's index at ``version`` from its documents' rows (module docstring)."""
    params = params or IndexParams()
    report = progress or (lambda stage, fraction: None)
    report("counting", 0.0)
    documents: list[_Document] = []
    chunk_ids: list[str] = []
    chunk_document: list[int] = []
    offsets: list[int] = [0]
    flat: list[int] = []
    vocabulary: dict[str, int] = {}
    for row in rows:
        d = len(documents)
        documents.append(_Document(row.document_id, row.external_id, row.title))
        for cid, concepts in zip(row.chunk_ids, row.concepts, strict=False):
            chunk_ids.append(cid)
            chunk_document.append(d)
            flat.extend(vocabulary.setdefault(c, len(vocabulary)) for c in concepts)
            offsets.append(len(flat))
    flat_a = np.asarray(flat, dtype=np.int64)
    offsets_a = np.asarray(offsets, dtype=np.int64)
    # Each concept once per chunk (the extractor promises it; stored data may not).
    df = np.bincount(flat_a, minlength=len(vocabulary)).astype(np.int64)
    n_chunks = len(chunk_ids)
    ceiling = max(COMMON_FLOOR, params.max_chunk_share * n_chunks)
    is_node = (df >= params.min_chunks) & (df <= ceiling)
    nodes = np.flatnonzero(is_node).astype(np.int64)
    node_of = np.full(len(vocabulary), -1, dtype=np.int64)
    node_of[nodes] = np.arange(len(nodes))
    report("linking", 0.0)
    sources, targets, weights = _cooccurrence(
        flat_a, offsets_a, node_of, per_chunk=params.edges_per_chunk, report=report
    )
    adjacency = _adjacency(len(nodes), sources, targets, weights)
    report("communities", 0.0)
    names = list(vocabulary)
    communities, membership = _communities(
        nodes,
        sources,
        targets,
        weights,
        names=names,
        chunk_ids=chunk_ids,
        df=df,
        flat=flat_a,
        offsets=offsets_a,
        params=params,
        report=report,
    )
    report("ready", 1.0)
    return ConceptIndex(
        tenant_id=tenant_id,
        version=version,
        documents=documents,
        chunk_ids=chunk_ids,
        chunk_document=np.asarray(chunk_document, dtype=np.int64),
        chunk_offsets=offsets_a,
        chunk_flat=flat_a,
        vocabulary=names,
        df=df,
        nodes=nodes,
        adjacency=adjacency,
        communities=communities,
        membership=membership,
    )


_PAIRS: dict[int, tuple[IntArray, IntArray]] = {}


def _pairs(n: int) -> tuple[IntArray, IntArray]:
    held = _PAIRS.get(n)
    if held is None:
        a, b = np.triu_indices(n, k=1)
        held = _PAIRS[n] = (a.astype(np.int64), b.astype(np.int64))
    return held


def _cooccurrence(
    flat: IntArray,
    offsets: IntArray,
    node_of: IntArray,
    *,
    per_chunk: int,
    report: Progress,
) -> tuple[IntArray, IntArray, npt.NDArray[np.float64]]:
    """Each pair of nodes held by one chunk once (``source < target``), weighted by the
    chunks holding both."""
    keys: list[IntArray] = []
    n_nodes = int(node_of.max(initial=-1)) + 1
    total = len(offsets) - 1
    for i in range(total):
        held = node_of[flat[offsets[i] : offsets[i + 1]]]
        held = held[held >= 0][:per_chunk]
        if len(held) < 2:
            continue
        held = np.sort(held)
        a, b = _pairs(len(held))
        keys.append(held[a] * n_nodes + held[b])
        if i % 2048 == 0:
            report("linking", i / max(total, 1))
    if not keys:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float64)
    unique, counts = np.unique(np.concatenate(keys), return_counts=True)
    return unique // n_nodes, unique % n_nodes, counts.astype(np.float64)


def _adjacency(
    n: int, sources: IntArray, targets: IntArray, weights: npt.NDArray[np.float64]
) -> tuple[IntArray, IntArray, npt.NDArray[np.float64]]:
    """Both directions as compressed rows: offsets, targets, weights."""
    src = np.concatenate([sources, targets])
    dst = np.concatenate([targets, sources])
    w = np.concatenate([weights, weights])
    order = np.lexsort((dst, src))
    src, dst, w = src[order], dst[order], w[order]
    offsets = np.searchsorted(src, np.arange(n + 1)).astype(np.int64)
    return offsets, dst.astype(np.int64), w


def _leiden(
    n: int,
    sources: IntArray,
    targets: IntArray,
    weights: npt.NDArray[np.float64],
    *,
    params: IndexParams,
) -> list[int]:
    """Each node's community (Leiden, modularity at ``resolution``, ``seed``)."""
    import igraph  # noqa: PLC0415 - loaded with the first build only
    import leidenalg  # noqa: PLC0415

    graph = igraph.Graph(n=n, edges=list(zip(sources.tolist(), targets.tolist(), strict=True)))
    partition = leidenalg.find_partition(
        graph,
        leidenalg.RBConfigurationVertexPartition,
        weights=weights.tolist(),
        resolution_parameter=params.resolution,
        seed=params.seed,
        n_iterations=-1,
    )
    return list(partition.membership)


@dataclass(slots=True)
class _Draft:
    level: int
    members: IntArray
    """Node numbers."""
    parent: int | None
    children: list[int]


def _communities(
    nodes: IntArray,
    sources: IntArray,
    targets: IntArray,
    weights: npt.NDArray[np.float64],
    *,
    names: Sequence[str],
    chunk_ids: Sequence[str],
    df: IntArray,
    flat: IntArray,
    offsets: IntArray,
    params: IndexParams,
    report: Progress,
) -> tuple[list[Community], dict[int, dict[int, int]]]:
    drafts: list[_Draft] = []
    if len(nodes) == 0 or len(sources) == 0:
        return [], {}
    # (members, level, parent draft) still to partition.
    todo: list[tuple[IntArray, int, int | None]] = [(np.arange(len(nodes)), 0, None)]
    done = 0
    while todo:
        members, level, parent = todo.pop(0)
        local = np.full(len(nodes), -1, dtype=np.int64)
        local[members] = np.arange(len(members))
        keep = (local[sources] >= 0) & (local[targets] >= 0)
        groups = _leiden(
            len(members),
            local[sources[keep]],
            local[targets[keep]],
            weights[keep],
            params=params,
        )
        by_group: dict[int, list[int]] = {}
        for position, group in enumerate(groups):
            by_group.setdefault(group, []).append(int(members[position]))
        if parent is not None and len(by_group) < 2:
            continue  # Leiden keeps it whole: no level below
        for group_members in by_group.values():
            if len(group_members) < 2:
                continue
            index = len(drafts)
            drafts.append(_Draft(level, np.asarray(sorted(group_members), np.int64), parent, []))
            if parent is not None:
                drafts[parent].children.append(index)
            if len(group_members) > params.max_community_size and level + 1 < params.levels:
                todo.append((drafts[index].members, level + 1, index))
        done += 1
        report("communities", min(0.95, done / (done + len(todo))))
    return _finished(
        drafts,
        nodes,
        sources,
        targets,
        weights,
        names=names,
        chunk_ids=chunk_ids,
        df=df,
        flat=flat,
        offsets=offsets,
        params=params,
    )


def _finished(
    drafts: list[_Draft],
    nodes: IntArray,
    sources: IntArray,
    targets: IntArray,
    weights: npt.NDArray[np.float64],
    *,
    names: Sequence[str],
    chunk_ids: Sequence[str],
    df: IntArray,
    flat: IntArray,
    offsets: IntArray,
    params: IndexParams,
) -> tuple[list[Community], dict[int, dict[int, int]]]:
    """Drafts made communities: ids, representative phrases, chunks; sorted by level,
    then largest first, then id."""
    n_chunks = len(offsets) - 1
    idf = np.log1p(max(n_chunks, 1) / np.maximum(df, 1))
    chunk_of_entry = np.repeat(np.arange(n_chunks), np.diff(offsets))
    ids = [
        f"L{d.level}-"
        + hashlib.sha1(
            "\n".join(sorted(names[int(nodes[m])] for m in d.members)).encode(),
            usedforsecurity=False,
        ).hexdigest()[:12]
        for d in drafts
    ]
    built: list[tuple[_Draft, Community]] = []
    for d, cid in zip(drafts, ids, strict=True):
        inside = np.zeros(len(nodes), dtype=bool)
        inside[d.members] = True
        keep = inside[sources] & inside[targets]
        degree = np.bincount(sources[keep], weights[keep], minlength=len(nodes)) + np.bincount(
            targets[keep], weights[keep], minlength=len(nodes)
        )
        concepts = nodes[d.members]
        score = df[concepts] * (1.0 + degree[d.members])
        order = sorted(range(len(concepts)), key=lambda i: (-score[i], names[int(concepts[i])]))
        phrases = tuple(names[int(concepts[i])] for i in order[:REPRESENTATIVES])
        # Chunks ranked by how many of its concepts they hold, then their summed idf.
        is_member = np.zeros(len(df), dtype=bool)
        is_member[concepts] = True
        hits = is_member[flat]
        held_by = chunk_of_entry[hits]
        counts = np.bincount(held_by, minlength=n_chunks)
        weight = np.bincount(held_by, idf[flat[hits]], minlength=n_chunks)
        chunks = np.flatnonzero(counts)
        ranked = chunks[np.lexsort((chunks, -weight[chunks], -counts[chunks]))]
        built.append(
            (
                d,
                Community(
                    id=cid,
                    level=d.level,
                    parent=None if d.parent is None else ids[d.parent],
                    children=tuple(sorted(ids[c] for c in d.children)),
                    concepts=phrases,
                    chunk_ids=tuple(
                        chunk_ids[int(i)] for i in ranked[: params.chunks_per_community]
                    ),
                    size=len(d.members),
                    chunk_count=len(chunks),
                ),
            )
        )
    built.sort(key=lambda pair: (pair[1].level, -pair[1].size, pair[1].id))
    membership: dict[int, dict[int, int]] = {}
    for position, (d, community) in enumerate(built):
        level = membership.setdefault(community.level, {})
        for m in d.members:
            level[int(nodes[m])] = position
    return [c for _, c in built], membership
