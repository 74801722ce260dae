"""The document graph in memory: typed, weighted links in compressed sparse rows.

Pure: no I/O, no clock, no randomness. A :class:`LinkGraph` holds ``n`` nodes, the
integers ``0 .. n-1`` (the caller maps them to documents; ``keys`` and
:meth:`LinkGraph.index_of` do it for callers that pass the ids), and its links twice,
once per direction, so a walk reads a node's out-links and its back-links alike in one
slice each:

* :attr:`LinkGraph.out_links`: row ``u`` holds the links ``u -> v``, the neighbour ``v``
  of each, sorted by ``v``, then by type;
* :attr:`LinkGraph.back_links`: row ``v`` holds the same links seen from their target,
  the neighbour ``u`` of each, sorted by ``u``, then by type.

Each link has a type, a small integer into :attr:`LinkGraph.types` (free strings such
as ``link``, ``mention``, ``title_mention``), and a float32 weight ``> 0`` (1.0 unless
the link says otherwise).

What a graph holds
------------------
* At most one link per (source, target, type): a repeated link is kept once, with the
  largest of its weights. Two links of different types between the same two documents
  are two links.
* No self-loops: a document linking to itself says nothing about other documents.
* :meth:`LinkGraph.from_edges` drops links whose source or target is not one of its
  ``keys`` (a link to a document the tenant does not have, or not yet).

Cost
----
With ``m`` links, building sorts them twice: ``O(m log m)`` time, done in numpy.
Memory: per link, two neighbour indices (int32), two type ids (uint8, uint16 past 256
types) and two float32 weights, 18 bytes for 256 types or fewer; per node, two row
offsets (int64) and two weight sums (float64), 32 bytes; plus the keys and their index
when given (:attr:`LinkGraph.nbytes` counts them). Reading a row is ``O(1)`` to find
and ``O(degree)`` to read; :meth:`Adjacency.gather` reads the rows of many nodes in one
vectorised step, ``O(their links)``.

A walk that follows only some link types needs each node's degree and weight sum over
those types (:meth:`LinkGraph.followed`): computed for the whole graph once per
direction and type set, in ``O(n + m)``, and kept, at most :data:`FOLLOWED_CACHE` of
them per graph (``16 n`` bytes each, not counted in ``nbytes``).

Invalid input raises :class:`~hsearch.errors.InvalidGraphError`, its message naming
what is allowed.
"""

from __future__ import annotations

import math
import sys
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from hsearch.errors import InvalidGraphError

__all__ = [
    "FOLLOWED_CACHE",
    "MAX_TYPES",
    "Adjacency",
    "Direction",
    "Followed",
    "Gathered",
    "LinkGraph",
]

IntArray: TypeAlias = npt.NDArray[np.int64]
NodeArray: TypeAlias = npt.NDArray[np.int32]
TypeArray: TypeAlias = npt.NDArray[np.unsignedinteger[Any]]
WeightArray: TypeAlias = npt.NDArray[np.float32]
FloatArray: TypeAlias = npt.NDArray[np.float64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]

MAX_TYPES = 65_536
"""Link types one graph can tell apart (type ids are uint16 past 256 types)."""

MAX_NODES = 2**31 - 1
"""Nodes one graph can hold (neighbours are int32)."""

FOLLOWED_CACHE = 8
"""Per-type-set degree arrays kept per graph (:meth:`LinkGraph.followed`)."""


class Direction(StrEnum):
    """Which way a walk follows links."""

    OUT = "out"
    """From a link's source to its target: the documents a document links to."""
    IN = "in"
    """From a link's target to its source (back-links): the documents linking to it."""
    BOTH = "both"
    """Either way: links as undirected connections."""


@dataclass(frozen=True, slots=True, eq=False)
class Gathered:
    """The links of several nodes read at once (:meth:`Adjacency.gather`).

    ``origin[i]`` is the position, in the nodes asked for, of the node that link ``i``
    leaves; ``neighbour[i]`` the node at its other end. Links come grouped by origin,
    in the order the nodes were asked for, each node's in its row's order.
    """

    origin: IntArray
    neighbour: NodeArray
    type_ids: TypeArray
    weights: WeightArray

    def __len__(self) -> int:
        return len(self.neighbour)

    def take(self, selection: BoolArray | IntArray) -> Gathered:
        """The links a mask keeps (in the same order) or an index array picks."""
        return Gathered(
            self.origin[selection],
            self.neighbour[selection],
            self.type_ids[selection],
            self.weights[selection],
        )


@dataclass(frozen=True, slots=True, eq=False)
class Adjacency:
    """One direction's links in compressed sparse rows.

    Row ``u`` is ``neighbour[indptr[u]:indptr[u + 1]]`` (with ``type_ids`` and
    ``weights`` at the same positions); ``strength[u]`` is the sum of its weights.
    """

    indptr: IntArray
    neighbour: NodeArray
    type_ids: TypeArray
    weights: WeightArray
    strength: FloatArray

    @property
    def nbytes(self) -> int:
        return sum(
            a.nbytes
            for a in (self.indptr, self.neighbour, self.type_ids, self.weights, self.strength)
        )

    def degree(self, node: int) -> int:
        """How many links row ``node`` holds."""
        return int(self.indptr[node + 1] - self.indptr[node])

    def row(self, node: int) -> tuple[NodeArray, TypeArray, WeightArray]:
        """Row ``node``: its neighbours, their links' type ids and weights (views)."""
        start, end = int(self.indptr[node]), int(self.indptr[node + 1])
        return self.neighbour[start:end], self.type_ids[start:end], self.weights[start:end]

    def gather(self, nodes: npt.NDArray[np.integer[Any]]) -> Gathered:
        """The rows of ``nodes`` (valid node indices, repeats allowed), in one
        vectorised read: ``O(len(nodes) + their links)``."""
        starts = self.indptr[nodes]
        counts = self.indptr[nodes + 1] - starts
        total = int(counts.sum())
        origin = np.repeat(np.arange(len(nodes), dtype=np.int64), counts)
        if total == 0:
            positions = np.zeros(0, dtype=np.int64)
        else:
            # Each link's position: its row's start plus its offset within the row.
            row_first = np.cumsum(counts) - counts
            positions = np.arange(total, dtype=np.int64) + (starts - row_first)[origin]
        return Gathered(
            origin, self.neighbour[positions], self.type_ids[positions], self.weights[positions]
        )


@dataclass(frozen=True, slots=True, eq=False)
class Followed:
    """Per node, over the links a walk follows (one direction or both, some types or
    all): how many there are and the sum of their weights."""

    degree: IntArray
    strength: FloatArray


def _frozen(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    array.flags.writeable = False
    return array


def _int_array(name: str, values: npt.ArrayLike) -> npt.NDArray[np.integer[Any]]:
    array = np.asarray(values)
    if array.ndim != 1:
        msg = f"{name} must be a one-dimensional array (got {array.ndim} dimensions)"
        raise InvalidGraphError(msg)
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind not in "iu":
        msg = f"{name} must hold integers (got dtype {array.dtype})"
        raise InvalidGraphError(msg)
    return array


def _check_range(name: str, array: npt.NDArray[np.integer[Any]], end: int, what: str) -> None:
    if array.size and (int(array.min()) < 0 or int(array.max()) >= end):
        bad = int(array[(array < 0) | (array >= end)][0])
        msg = f"{name} must be {what} in 0..{end - 1} (got {bad})"
        raise InvalidGraphError(msg)


def _check_types(types: Sequence[str]) -> tuple[str, ...]:
    checked = tuple(types)
    for name in checked:
        if not isinstance(name, str) or not name:
            msg = f"types must be non-empty strings (got {name!r})"
            raise InvalidGraphError(msg)
    if len(set(checked)) != len(checked):
        repeated = sorted({t for t in checked if checked.count(t) > 1})
        msg = f"types must be distinct (repeated: {', '.join(map(repr, repeated))})"
        raise InvalidGraphError(msg)
    if len(checked) > MAX_TYPES:
        msg = f"types: at most {MAX_TYPES} link types (got {len(checked)})"
        raise InvalidGraphError(msg)
    return checked


def _check_keys(keys: Sequence[str], n: int) -> tuple[tuple[str, ...], dict[str, int]]:
    checked = tuple(keys)
    if len(checked) != n:
        msg = f"keys must name each of the {n} nodes once (got {len(checked)} keys)"
        raise InvalidGraphError(msg)
    index: dict[str, int] = {}
    for i, key in enumerate(checked):
        if not isinstance(key, str):
            msg = f"keys must be strings (got {key!r} for node {i})"
            raise InvalidGraphError(msg)
        if index.setdefault(key, i) != i:
            msg = f"keys must be distinct ({key!r} names nodes {index[key]} and {i})"
            raise InvalidGraphError(msg)
    return checked, index


def _keys_nbytes(keys: tuple[str, ...], index: dict[str, int]) -> int:
    """What the keys and their index hold: the tuple, the strings, the dict (whose ints
    are small and shared, or counted once each here)."""
    if not keys:
        return 0
    strings = sum(sys.getsizeof(k) for k in keys)
    ints = sum(sys.getsizeof(i) for i in range(256, len(keys)))
    return sys.getsizeof(keys) + strings + sys.getsizeof(index) + ints


def _rows(
    n: int,
    owner: NodeArray,
    neighbour: NodeArray,
    type_ids: TypeArray,
    weights: WeightArray,
) -> Adjacency:
    """Rows of links already sorted by ``owner``."""
    counts = np.bincount(owner, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    strength = np.bincount(owner, weights=weights.astype(np.float64), minlength=n)
    return Adjacency(
        indptr=_frozen(indptr),
        neighbour=_frozen(neighbour),
        type_ids=_frozen(type_ids),
        weights=_frozen(weights),
        strength=_frozen(strength.astype(np.float64)),
    )


class LinkGraph:
    """An immutable graph of typed, weighted links between ``n`` nodes, in compressed
    sparse rows for both directions (see the module's docstring).

    Build one with :meth:`from_edges` (document ids and Python tuples) or
    :meth:`from_arrays` (node indices in numpy arrays: the fast path for large graphs).
    Safe to share between threads: nothing changes after construction but the cache of
    :meth:`followed`, which a lock guards.
    """

    __slots__ = (
        "_back",
        "_followed",
        "_index",
        "_keys",
        "_keys_nbytes",
        "_lock",
        "_n",
        "_out",
        "_types",
    )

    def __init__(
        self,
        *,
        n: int,
        types: tuple[str, ...],
        keys: tuple[str, ...] | None,
        index: dict[str, int],
        out_links: Adjacency,
        back_links: Adjacency,
    ) -> None:
        # Not for callers: the constructors validate and sort what this takes as is.
        self._n = n
        self._types = types
        self._keys = keys
        self._index = index
        self._out = out_links
        self._back = back_links
        self._keys_nbytes = _keys_nbytes(keys, index) if keys else 0
        self._followed: OrderedDict[tuple[Direction, bytes], Followed] = OrderedDict()
        self._lock = threading.Lock()

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_arrays(
        cls,
        n: int,
        sources: npt.ArrayLike,
        targets: npt.ArrayLike,
        type_ids: npt.ArrayLike,
        weights: npt.ArrayLike,
        *,
        types: Sequence[str],
        keys: Sequence[str] | None = None,
    ) -> LinkGraph:
        """A graph of ``n`` nodes from parallel arrays, one entry per link.

        ``sources`` and ``targets`` hold node indices in ``0..n-1``, ``type_ids``
        indices into ``types`` (distinct non-empty strings), ``weights`` finite numbers
        ``> 0`` (stored as float32). Self-loops are dropped and a repeated (source,
        target, type) is kept once with its largest weight. ``keys``, when given, name
        the nodes (one distinct string each). ``O(m log m)``; the arrays are copied.
        """
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_NODES:
            msg = f"n must be an integer in 0..{MAX_NODES} (got {n!r})"
            raise InvalidGraphError(msg)
        checked_types = _check_types(types)
        src = _int_array("sources", sources)
        tgt = _int_array("targets", targets)
        tid = _int_array("type_ids", type_ids)
        raw_weights = np.asarray(weights)
        if raw_weights.ndim != 1 or (raw_weights.size and raw_weights.dtype.kind not in "iuf"):
            msg = "weights must be a one-dimensional array of numbers"
            raise InvalidGraphError(msg)
        lengths = {len(src), len(tgt), len(tid), len(raw_weights)}
        if len(lengths) != 1:
            msg = (
                "sources, targets, type_ids and weights must have one entry per link "
                f"(got lengths {len(src)}, {len(tgt)}, {len(tid)}, {len(raw_weights)})"
            )
            raise InvalidGraphError(msg)
        _check_range("sources", src, n, "node indices")
        _check_range("targets", tgt, n, "node indices")
        _check_range("type_ids", tid, max(len(checked_types), 1) if tid.size else 1, "type ids")
        if tid.size and not checked_types:
            msg = "types must name the link types the type_ids point at (got none)"
            raise InvalidGraphError(msg)
        with np.errstate(over="ignore", under="ignore"):
            # Out of float32's range: inf or 0, refused just below with the value given.
            w = raw_weights.astype(np.float32)
        bad = ~(np.isfinite(w) & (w > 0))
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            msg = (
                "weights must be finite numbers > 0 (as float32; got "
                f"{raw_weights[at]!r} for link {at})"
            )
            raise InvalidGraphError(msg)
        node_keys, index = (None, {}) if keys is None else _check_keys(keys, n)

        type_dtype = np.uint8 if len(checked_types) <= 256 else np.uint16
        src32 = src.astype(np.int32)
        tgt32 = tgt.astype(np.int32)
        tid_small = tid.astype(type_dtype)
        loops = src32 != tgt32
        src32, tgt32, tid_small, w = src32[loops], tgt32[loops], tid_small[loops], w[loops]

        # Out-rows: sorted by source, target, type, heaviest first; the first of each
        # (source, target, type) is the one kept.
        order = np.lexsort((-w, tid_small, tgt32, src32))
        src32, tgt32, tid_small, w = src32[order], tgt32[order], tid_small[order], w[order]
        if len(src32):
            first = np.ones(len(src32), dtype=bool)
            first[1:] = (
                (src32[1:] != src32[:-1])
                | (tgt32[1:] != tgt32[:-1])
                | (tid_small[1:] != tid_small[:-1])
            )
            src32, tgt32, tid_small, w = src32[first], tgt32[first], tid_small[first], w[first]
        out_links = _rows(n, src32, tgt32, tid_small, w)

        # Back-rows: the same links sorted by target, source, type.
        back = np.lexsort((tid_small, src32, tgt32))
        back_links = _rows(n, tgt32[back], src32[back], tid_small[back], w[back])
        return cls(
            n=n,
            types=checked_types,
            keys=node_keys,
            index=index,
            out_links=out_links,
            back_links=back_links,
        )

    @classmethod
    def from_edges(
        cls,
        keys: Sequence[str],
        edges: Iterable[tuple[str, str, str, float]],
    ) -> LinkGraph:
        """A graph whose node ``i`` is ``keys[i]``, from (source key, target key, type,
        weight) tuples.

        Links whose source or target is not in ``keys`` are dropped; the rest follow
        :meth:`from_arrays` (no self-loops, a repeated link kept once with its largest
        weight). The types are the ones the kept links use, sorted. ``O(m)`` in Python
        to read the tuples, then :meth:`from_arrays`.
        """
        node_keys, index = _check_keys(keys, len(keys))
        type_index: dict[str, int] = {}
        sources: list[int] = []
        targets: list[int] = []
        type_ids: list[int] = []
        weights: list[float] = []
        for number, (source, target, link_type, weight) in enumerate(edges):
            if not isinstance(link_type, str) or not link_type:
                msg = f"edge {number}: the type must be a non-empty string (got {link_type!r})"
                raise InvalidGraphError(msg)
            if (
                isinstance(weight, bool)
                or not isinstance(weight, int | float)
                or not math.isfinite(weight)
                or weight <= 0
            ):
                msg = f"edge {number}: the weight must be a finite number > 0 (got {weight!r})"
                raise InvalidGraphError(msg)
            s = index.get(source)
            t = index.get(target)
            if s is None or t is None:
                continue
            sources.append(s)
            targets.append(t)
            type_ids.append(type_index.setdefault(link_type, len(type_index)))
            weights.append(weight)
        # Sorted type names: two graphs of the same links get the same type ids.
        types = sorted(type_index)
        remap = np.zeros(len(types), dtype=np.int64)
        for new, name in enumerate(types):
            remap[type_index[name]] = new
        tids = remap[np.asarray(type_ids, dtype=np.int64)] if type_ids else type_ids
        return cls.from_arrays(
            len(node_keys),
            np.asarray(sources, dtype=np.int64),
            np.asarray(targets, dtype=np.int64),
            np.asarray(tids, dtype=np.int64),
            np.asarray(weights, dtype=np.float64),
            types=types,
            keys=node_keys,
        )

    # -- what it holds --------------------------------------------------------------------

    @property
    def n(self) -> int:
        """The number of nodes."""
        return self._n

    @property
    def links(self) -> int:
        """The number of links (after dropping self-loops and repeats)."""
        return len(self._out.neighbour)

    @property
    def types(self) -> tuple[str, ...]:
        """The link types; a link's type id indexes this tuple."""
        return self._types

    @property
    def keys(self) -> tuple[str, ...] | None:
        """The nodes' keys (document ids), when the graph was given them."""
        return self._keys

    @property
    def out_links(self) -> Adjacency:
        """Rows of links by source: row ``u`` holds ``u``'s links to other nodes."""
        return self._out

    @property
    def back_links(self) -> Adjacency:
        """Rows of links by target: row ``v`` holds the links pointing at ``v``."""
        return self._back

    @property
    def nbytes(self) -> int:
        """Memory the graph holds: its arrays, and its keys with their index when it has
        them (the :meth:`followed` cache is not counted)."""
        return self._out.nbytes + self._back.nbytes + self._keys_nbytes

    def index_of(self, key: str) -> int | None:
        """The node named ``key``, or None when the graph has no such key (or no keys)."""
        return self._index.get(key)

    def key_of(self, node: int) -> str:
        """The key of ``node``; an error when the graph was built without keys."""
        if self._keys is None:
            msg = "this graph was built without keys: map nodes to documents yourself"
            raise InvalidGraphError(msg)
        return self._keys[node]

    def adjacencies(self, direction: Direction) -> tuple[Adjacency, ...]:
        """The rows a walk in ``direction`` reads: out-links, back-links or both."""
        if direction is Direction.OUT:
            return (self._out,)
        if direction is Direction.IN:
            return (self._back,)
        return (self._out, self._back)

    def type_mask(self, types: Collection[str] | None) -> BoolArray | None:
        """Which type ids ``types`` selects (None: every type, no mask). A name the graph
        has no link of selects nothing: a query may name a type no document uses yet."""
        if types is None:
            return None
        wanted = set(types)
        return np.array([name in wanted for name in self._types], dtype=bool)

    def followed(
        self,
        nodes: npt.NDArray[np.integer[Any]],
        *,
        direction: Direction,
        type_mask: BoolArray | None,
    ) -> Followed:
        """For each of ``nodes``, the number and the weight sum of the links a walk in
        ``direction`` over the types of ``type_mask`` follows from it.

        Without a mask, ``O(len(nodes))`` from the rows' offsets and sums. With one, the
        whole graph's figures are computed once, ``O(n + m)``, and kept for the next
        call (the last :data:`FOLLOWED_CACHE` directions and type sets)."""
        if type_mask is None:
            degree = np.zeros(len(nodes), dtype=np.int64)
            strength = np.zeros(len(nodes), dtype=np.float64)
            for rows in self.adjacencies(direction):
                degree += rows.indptr[nodes + 1] - rows.indptr[nodes]
                strength += rows.strength[nodes]
            return Followed(degree=degree, strength=strength)
        whole = self._followed_by_type(direction, type_mask)
        return Followed(degree=whole.degree[nodes], strength=whole.strength[nodes])

    def _followed_by_type(self, direction: Direction, type_mask: BoolArray) -> Followed:
        cache_key = (direction, type_mask.tobytes())
        with self._lock:
            found = self._followed.get(cache_key)
            if found is not None:
                self._followed.move_to_end(cache_key)
                return found
        degree = np.zeros(self._n, dtype=np.int64)
        strength = np.zeros(self._n, dtype=np.float64)
        for rows in self.adjacencies(direction):
            keep = type_mask[rows.type_ids]
            owner = np.repeat(np.arange(self._n), np.diff(rows.indptr))[keep]
            degree += np.bincount(owner, minlength=self._n)
            strength += np.bincount(
                owner, weights=rows.weights[keep].astype(np.float64), minlength=self._n
            )
        result = Followed(degree=_frozen(degree), strength=_frozen(strength))
        with self._lock:
            self._followed[cache_key] = result
            while len(self._followed) > FOLLOWED_CACHE:
                self._followed.popitem(last=False)
        return result

    def __repr__(self) -> str:
        return f"LinkGraph(n={self._n}, links={self.links}, types={self._types!r})"
