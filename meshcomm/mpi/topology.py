"""Process topologies: Cartesian grids, graphs and distributed graphs attached to a communicator.

Creating a topology makes a new communicator (over the first ranks of the
old one; ranks are never reordered) and records its shape beside the
communicator's group, so every handle to that communicator (MPI.Comm(cart),
MPI.Cartcomm(cart)) sees the same topology. Each shape answers the one
question the neighbourhood collectives ask (neighbors.py): who this rank
receives from and sends to, in MPI's order.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from meshcomm.mpi import constants as C
from meshcomm.mpi import exceptions as err
from meshcomm.mpi.comm import Comm, Intracomm

GRAPH, CART, DIST_GRAPH = 1, 2, 3


class _Weights:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"MPI.{self._name}"


UNWEIGHTED = _Weights("UNWEIGHTED")
WEIGHTS_EMPTY = _Weights("WEIGHTS_EMPTY")


@dataclass
class Cartesian:
    dims: list[int]
    periods: list[bool]
    kind = CART

    def coords(self, rank: int) -> list[int]:
        return [int(c) for c in np.unravel_index(rank, self.dims)] if self.dims else []

    def rank_at(self, coords) -> int:
        """The rank at `coords` (wrapped in periodic dimensions), PROC_NULL outside a non-periodic one."""
        wrapped = []
        for c, n, periodic in zip(coords, self.dims, self.periods):
            if periodic:
                c %= n
            elif not 0 <= c < n:
                return C.PROC_NULL
            wrapped.append(c)
        return int(np.ravel_multi_index(wrapped, self.dims)) if self.dims else 0

    def shift(self, rank: int, direction: int, disp: int) -> tuple[int, int]:
        here = self.coords(rank)

        def moved(by: int) -> int:
            there = list(here)
            there[direction] += by
            return self.rank_at(there)

        return moved(-disp), moved(disp)

    def edges_of(self, rank: int) -> tuple[list[int], list[int]]:
        """Per dimension the neighbour below, then above: both where data comes from and where it goes."""
        around = [r for d in range(len(self.dims)) for r in self.shift(rank, d, 1)]
        return around, list(around)

    def labels(self, rank: int) -> tuple[list[int], list[int]]:
        """What the receiver calls each edge: a block sent down arrives from its neighbour above, and back."""
        slots = list(range(2 * len(self.dims)))
        return slots, [slot ^ 1 for slot in slots]


@dataclass
class Graph:
    index: list[int]  # MPI's cumulative degrees, without the leading 0
    edges: list[int]
    kind = GRAPH

    def neighbors(self, rank: int) -> list[int]:
        start = self.index[rank - 1] if rank > 0 else 0
        return self.edges[start : self.index[rank]]

    def edges_of(self, rank: int) -> tuple[list[int], list[int]]:
        around = self.neighbors(rank)
        return around, list(around)

    def labels(self, rank: int) -> tuple[list[int], list[int]]:
        sources, destinations = self.edges_of(rank)
        return _occurrences(sources), _occurrences(destinations)


@dataclass
class DistGraph:
    sources: list[int]
    destinations: list[int]
    weights: tuple[list[int], list[int]] | None
    kind = DIST_GRAPH

    def edges_of(self, rank: int) -> tuple[list[int], list[int]]:
        return list(self.sources), list(self.destinations)

    def labels(self, rank: int) -> tuple[list[int], list[int]]:
        return _occurrences(self.sources), _occurrences(self.destinations)


def _occurrences(peers: list[int]) -> list[int]:
    """The k-th edge between two ranks in one's list meets the k-th in the other's."""
    seen: dict[int, int] = {}
    labels = []
    for peer in peers:
        labels.append(seen.get(peer, 0))
        seen[peer] = labels[-1] + 1
    return labels


_shapes: "weakref.WeakKeyDictionary[object, Cartesian | Graph | DistGraph]" = weakref.WeakKeyDictionary()


def shape_of(comm: Comm):
    """The communicator's topology, or None."""
    group = comm._resolve()
    return None if group is None else _shapes.get(group)


def edges(comm: "Topocomm") -> tuple[list[int], list[int]]:
    """(sources, destinations) of this rank, in the order MPI's neighbourhood collectives use."""
    rank = comm._g.rank  # COMM_NULL raises here
    return shape_of(comm).edges_of(rank)


# ----- the communicator classes


class Topocomm(Intracomm):
    """A communicator with a topology; MPI.Topocomm(comm) needs `comm` to have the class's kind of topology."""

    _kinds: tuple[int, ...] = (CART, GRAPH, DIST_GRAPH)

    def _build(self, comm: Comm | None = None) -> None:
        Comm._build(self, comm)
        shape = shape_of(self)
        if self._resolve() is not None and (shape is None or shape.kind not in self._kinds):
            raise TypeError(f"{type(self).__name__} needs a communicator with a "
                            f"{' or '.join(_KIND_NAMES[k] for k in self._kinds)} topology")

    @property
    def _shape(self):
        self._g  # raises for COMM_NULL
        return shape_of(self)

    def Dup(self, info=None) -> "Topocomm":
        """The same topology on a new communicator."""
        shape = self._shape
        new = self._split_by(0, self._g.rank)
        return _attach(new, type(self), shape)

    Clone = Dup

    @property
    def degrees(self) -> tuple[int, int]:
        sources, destinations = edges(self)
        return len(sources), len(destinations)

    indegree = property(lambda self: self.degrees[0])
    outdegree = property(lambda self: self.degrees[1])
    inoutedges = property(lambda self: edges(self))
    inedges = property(lambda self: edges(self)[0])
    outedges = property(lambda self: edges(self)[1])


class Cartcomm(Topocomm):
    """A communicator whose ranks sit on a grid, row-major (the last dimension varies fastest)."""

    _kinds = (CART,)

    def Get_dim(self) -> int:
        return len(self._shape.dims)

    dim = ndim = property(Get_dim)

    def Get_topo(self) -> tuple[list[int], list[bool], list[int]]:
        shape = self._shape
        return list(shape.dims), list(shape.periods), shape.coords(self._g.rank)

    topo = property(Get_topo)
    dims = property(lambda self: self.Get_topo()[0])
    periods = property(lambda self: self.Get_topo()[1])
    coords = property(lambda self: self.Get_topo()[2])

    def Get_cart_rank(self, coords) -> int:
        shape = self._shape
        coords = _ints(coords, "coords")
        if len(coords) != len(shape.dims):
            raise err.Exception(err.ERR_DIMS, f"coords must have {len(shape.dims)} entries, got {len(coords)}")
        rank = shape.rank_at(coords)
        if rank == C.PROC_NULL:
            raise err.Exception(err.ERR_ARG, f"coords {coords} lie outside the non-periodic grid {shape.dims}")
        return rank

    def Get_coords(self, rank: int) -> list[int]:
        return self._shape.coords(self._peer_rank(rank))

    def Shift(self, direction: int, disp: int) -> tuple[int, int]:
        """(source, dest): the ranks `disp` steps below and above along `direction`; PROC_NULL off the grid."""
        shape = self._shape
        if not 0 <= direction < len(shape.dims):
            raise err.Exception(err.ERR_DIMS, f"direction must be in [0, {len(shape.dims)}), got {direction}")
        return shape.shift(self._g.rank, int(direction), int(disp))

    def Sub(self, remain_dims) -> "Cartcomm":
        """Collective: the sub-grids keeping the dimensions marked true; ranks differing only there meet."""
        shape = self._shape
        keep = [bool(k) for k in remain_dims]
        if len(keep) != len(shape.dims):
            raise err.Exception(err.ERR_DIMS, f"remain_dims must have {len(shape.dims)} entries, got {len(keep)}")
        here = shape.coords(self._g.rank)
        kept = [d for d in range(len(keep)) if keep[d]]
        dropped = [d for d in range(len(keep)) if not keep[d]]
        color = _linear([here[d] for d in dropped], [shape.dims[d] for d in dropped])
        key = _linear([here[d] for d in kept], [shape.dims[d] for d in kept])
        sub = Cartesian([shape.dims[d] for d in kept], [shape.periods[d] for d in kept])
        return _attach(self._split_by(color, key), Cartcomm, sub)

    def _peer_rank(self, rank) -> int:
        size = self._g.size
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < size:
            raise err.Exception(err.ERR_RANK, f"rank must be in [0, {size}), got {rank!r}")
        return int(rank)


class Graphcomm(Topocomm):
    """A communicator over a graph every rank knows whole (MPI_Graph_create)."""

    _kinds = (GRAPH,)

    def Get_dims(self) -> tuple[int, int]:
        shape = self._shape
        return len(shape.index), len(shape.edges)

    dims = property(Get_dims)
    nnodes = property(lambda self: self.Get_dims()[0])
    nedges = property(lambda self: self.Get_dims()[1])

    def Get_topo(self) -> tuple[list[int], list[int]]:
        shape = self._shape
        return list(shape.index), list(shape.edges)

    topo = property(Get_topo)
    index = property(lambda self: self.Get_topo()[0])
    edges = property(lambda self: self.Get_topo()[1])

    def Get_neighbors_count(self, rank: int) -> int:
        return len(self.Get_neighbors(rank))

    def Get_neighbors(self, rank: int) -> list[int]:
        shape = self._shape
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < len(shape.index):
            raise err.Exception(err.ERR_RANK, f"rank must be in [0, {len(shape.index)}), got {rank!r}")
        return list(shape.neighbors(int(rank)))

    nneighbors = property(lambda self: self.Get_neighbors_count(self._g.rank))
    neighbors = property(lambda self: self.Get_neighbors(self._g.rank))


class Distgraphcomm(Topocomm):
    """A communicator over a graph each rank knows its own edges of (MPI_Dist_graph_create)."""

    _kinds = (DIST_GRAPH,)

    def Get_dist_neighbors_count(self) -> tuple[int, int, bool]:
        shape = self._shape
        return len(shape.sources), len(shape.destinations), shape.weights is not None

    def Get_dist_neighbors(self):
        """(sources, destinations, (sourceweights, destweights) or None when unweighted)."""
        shape = self._shape
        weights = None if shape.weights is None else (list(shape.weights[0]), list(shape.weights[1]))
        return list(shape.sources), list(shape.destinations), weights


_KIND_NAMES = {CART: "Cartesian", GRAPH: "graph", DIST_GRAPH: "distributed graph"}


def _attach(comm: Intracomm, cls: type, shape) -> Intracomm:
    """Give the new communicator `comm` its topology; COMM_NULL stays COMM_NULL (of the topology's class)."""
    group = comm._resolve()
    if group is None:
        return cls()
    _shapes[group] = shape
    return cls._of(group)


def _ints(values, name: str) -> list[int]:
    values = [values] if isinstance(values, (int, np.integer)) else list(values)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must hold ints, got {type(value).__name__}")
    return [int(v) for v in values]


def _linear(coords: list[int], dims: list[int]) -> int:
    return int(np.ravel_multi_index(coords, dims)) if dims else 0


# ----- creating topologies (methods of Intracomm)


def _cart_shape(comm: Intracomm, dims, periods) -> Cartesian:
    dims = _ints(dims, "dims")
    if any(n <= 0 for n in dims):
        raise err.Exception(err.ERR_DIMS, f"dims must all be positive, got {dims}")
    if periods is None or isinstance(periods, (bool, int, np.integer)):
        periods = [bool(periods)] * len(dims)
    periods = [bool(p) for p in periods]
    if len(periods) != len(dims):
        raise ValueError(f"periods has {len(periods)} entries, dims {len(dims)}")
    needed, size = int(np.prod(dims, dtype=np.int64)), comm._g.size
    if needed > size:
        raise err.Exception(err.ERR_DIMS, f"a grid of dims {dims} needs {needed} processes, "
                                          f"the communicator has {size}")
    return Cartesian(dims, periods)


def _create_cart(self, dims, periods=None, reorder: bool = False) -> Cartcomm:
    """Collective: the first prod(dims) ranks form the grid, the rest get COMM_NULL."""
    shape = _cart_shape(self, dims, periods)
    inside = self._g.rank < int(np.prod(shape.dims, dtype=np.int64))
    return _attach(self._split_by(0 if inside else -1, self._g.rank), Cartcomm, shape)


def _cart_map(self, dims, periods=None) -> int:
    """The rank this process would have in Create_cart(dims, periods): ranks are kept."""
    shape = _cart_shape(self, dims, periods)
    rank = self._g.rank
    return rank if rank < int(np.prod(shape.dims, dtype=np.int64)) else C.UNDEFINED


def _graph_shape(comm: Intracomm, index, edges) -> Graph:
    index, edges = _ints(index, "index"), _ints(edges, "edges")
    if index and index[0] == 0 and index[-1] == len(edges):  # mpi4py also takes index with its leading 0
        index = index[1:]
    nnodes = len(index)
    if nnodes > comm._g.size:
        raise err.Exception(err.ERR_ARG, f"a graph of {nnodes} nodes needs more processes than the "
                                         f"communicator's {comm._g.size}")
    if any(b < a for a, b in zip([0] + index, index)) or (index and index[-1] != len(edges)):
        raise err.Exception(err.ERR_ARG, f"index must be non-decreasing and end at len(edges) = {len(edges)}, "
                                         f"got {index}")
    bad = [e for e in edges if not 0 <= e < nnodes]
    if bad:
        raise err.Exception(err.ERR_ARG, f"edges {bad} name no node of a graph of {nnodes}")
    return Graph(index, edges)


def _create_graph(self, index, edges, reorder: bool = False) -> Graphcomm:
    """Collective: ranks below the number of nodes form the graph, the rest get COMM_NULL."""
    shape = _graph_shape(self, index, edges)
    inside = self._g.rank < len(shape.index)
    return _attach(self._split_by(0 if inside else -1, self._g.rank), Graphcomm, shape)


def _graph_map(self, index, edges) -> int:
    shape = _graph_shape(self, index, edges)
    rank = self._g.rank
    return rank if rank < len(shape.index) else C.UNDEFINED


def _weights(weights, degree: int, name: str) -> list[int] | None:
    if weights is None or weights is UNWEIGHTED:
        return None
    if weights is WEIGHTS_EMPTY:
        if degree:
            raise ValueError(f"{name} is WEIGHTS_EMPTY but there are {degree} edges")
        return []
    weights = _ints(weights, name)
    if len(weights) != degree:
        raise ValueError(f"{name} has {len(weights)} entries for {degree} edges")
    return weights


def _peers(comm: Intracomm, ranks, name: str) -> list[int]:
    ranks = [] if ranks is None else _ints(ranks, name)
    size = comm._g.size
    bad = [r for r in ranks if not 0 <= r < size]
    if bad:
        raise err.Exception(err.ERR_RANK, f"{name} {bad} are not ranks in [0, {size})")
    return ranks


def _pair_weights(sourceweights, destweights, indegree: int, outdegree: int):
    if sourceweights is None and destweights is None:
        return None
    if (sourceweights is None and indegree) or (destweights is None and outdegree):
        raise ValueError("weights must be given for both the sources and the destinations, or for neither")
    return sourceweights or [], destweights or []


def _create_dist_graph_adjacent(self, sources, destinations, sourceweights=UNWEIGHTED, destweights=UNWEIGHTED,
                                info=None, reorder: bool = False) -> Distgraphcomm:
    """Collective: each rank names the ranks it receives from and sends to."""
    sources, destinations = _peers(self, sources, "sources"), _peers(self, destinations, "destinations")
    weights = _pair_weights(_weights(sourceweights, len(sources), "sourceweights"),
                            _weights(destweights, len(destinations), "destweights"), len(sources), len(destinations))
    return _attach(self._split_by(0, self._g.rank), Distgraphcomm, DistGraph(sources, destinations, weights))


def _create_dist_graph(self, sources, degrees, destinations, weights=UNWEIGHTED, info=None,
                       reorder: bool = False) -> Distgraphcomm:
    """Collective: each rank names some edges (any ranks'); everyone learns its own from everyone's."""
    sources, degrees = _peers(self, sources, "sources"), _ints(degrees, "degrees")
    destinations = _peers(self, destinations, "destinations")
    if len(degrees) != len(sources) or any(d < 0 for d in degrees) or sum(degrees) != len(destinations):
        raise ValueError(f"degrees {degrees} must give one non-negative count per source ({len(sources)}) "
                         f"and add up to the {len(destinations)} destinations")
    weights = _weights(weights, len(destinations), "weights")
    starts = np.cumsum([0] + degrees)
    mine = [(s, destinations[k], None if weights is None else weights[k])
            for s, a, b in zip(sources, starts[:-1], starts[1:]) for k in range(a, b)]
    contributions = self.allgather((mine, weights is not None))
    every = [edge for edges_given, _ in contributions for edge in edges_given]
    flags = {flag for edges_given, flag in contributions if edges_given}
    if len(flags) > 1:  # every rank sees the same table, so every rank refuses
        raise ValueError("Create_dist_graph: some ranks gave weights and others MPI.UNWEIGHTED")
    weighted = True in flags if flags else any(flag for _, flag in contributions)
    rank = self._g.rank
    incoming = [(s, w) for s, d, w in every if d == rank]
    outgoing = [(d, w) for s, d, w in every if s == rank]
    pair = None
    if weighted:
        pair = ([w for _, w in incoming], [w for _, w in outgoing])
    shape = DistGraph([s for s, _ in incoming], [d for d, _ in outgoing], pair)
    return _attach(self._split_by(0, rank), Distgraphcomm, shape)


def compute_dims(nnodes: int, dims) -> list[int]:
    """MPI.Compute_dims: fill the zeros of `dims` (or `dims` zeros) with a balanced, non-increasing split."""
    if isinstance(nnodes, bool) or not isinstance(nnodes, (int, np.integer)) or nnodes < 0:
        raise err.Exception(err.ERR_ARG, f"nnodes must be a non-negative int, got {nnodes!r}")
    dims = [0] * int(dims) if isinstance(dims, (int, np.integer)) else _ints(dims, "dims")
    if any(d < 0 for d in dims):
        raise err.Exception(err.ERR_DIMS, f"dims must not be negative, got {dims}")
    fixed = int(np.prod([d for d in dims if d > 0], dtype=np.int64))
    free = [i for i, d in enumerate(dims) if d == 0]
    if nnodes % fixed or (not free and fixed != nnodes):
        raise err.Exception(err.ERR_DIMS, f"{nnodes} processes do not fill a grid with fixed dims {dims}")
    if not free:
        return dims
    share = [1] * len(free)
    for prime in sorted(_factors(nnodes // fixed), reverse=True):
        share[share.index(min(share))] *= prime  # the largest factor goes to the smallest side so far
    for i, value in zip(free, sorted(share, reverse=True)):
        dims[i] = value
    return dims


def _factors(n: int) -> list[int]:
    primes, p = [], 2
    while p * p <= n:
        while n % p == 0:
            primes.append(p)
            n //= p
        p += 1
    return primes + ([n] if n > 1 else [])


def _get_topology(self) -> int:
    self._g  # raises for COMM_NULL
    shape = shape_of(self)
    return C.UNDEFINED if shape is None else shape.kind


Intracomm.Create_cart = _create_cart
Intracomm.Cart_map = _cart_map
Intracomm.Create_graph = _create_graph
Intracomm.Graph_map = _graph_map
Intracomm.Create_dist_graph_adjacent = _create_dist_graph_adjacent
Intracomm.Create_dist_graph = _create_dist_graph
Comm.Get_topology = Comm.Topo_test = _get_topology
Comm.topology = property(_get_topology)
Comm.is_topo = property(lambda self: shape_of(self) is not None)
