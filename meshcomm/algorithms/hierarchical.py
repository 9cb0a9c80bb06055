"""Hierarchical (node-aware) collectives: shared memory inside each host, few bytes on the links between.

A Problem may say which host each rank of the group is on (`hosts`: a host
index per rank; empty means one host). Links between hosts are the slow
ones, so these algorithms send each byte across them as few times as the
collective allows, and do the rest inside the hosts. Step numbers are
global: a phase across hosts starts after the largest host's phase inside
it on every host, so the ranks of a ring agree on its steps whatever their
hosts' sizes. Each algorithm's docstring gives its phases and cost.
"""

from __future__ import annotations

from meshcomm.algorithms._build import (
    StepBuilder,
    ceil_log2,
    check_collective,
    check_rank,
    copy_input_to_output,
    single_rank,
)
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import INPUT, OUTPUT, SCRATCH, Schedule, Slice, block_bounds


class HostLayout:
    """The group's ranks by host: members[h] lists host h's ranks in rank order."""

    def __init__(self, problem: Problem) -> None:
        hosts = problem.hosts or (0,) * problem.nranks
        by_host: dict[int, list[int]] = {}
        for rank, host in enumerate(hosts):
            by_host.setdefault(host, []).append(rank)
        self.members = [by_host[h] for h in sorted(by_host)]
        self.host_of = {rank: h for h, ranks in enumerate(self.members) for rank in ranks}
        self.lanes = min(len(ranks) for ranks in self.members)
        self.largest = max(len(ranks) for ranks in self.members)

    def local(self, rank: int) -> tuple[list[int], int]:
        """The ranks of `rank`'s host and `rank`'s index among them."""
        ranks = self.members[self.host_of[rank]]
        return ranks, ranks.index(rank)

    def leaders(self, root: int | None = None) -> list[int]:
        """One rank per host, in host order: the root on its host, else the host's first rank."""
        return [root if root is not None and root in ranks else ranks[0] for ranks in self.members]

    def leader_ring(self, host: int) -> tuple[int, int]:
        """The leaders after and before host `host`'s in the ring of hosts (first ranks as leaders)."""
        leaders, hosts = self.leaders(), len(self.members)
        return leaders[(host + 1) % hosts], leaders[(host - 1) % hosts]

    def led_by(self, rank: int, root: int | None = None) -> tuple[int, list[int]]:
        """`rank`'s leader, and its host's ranks with the leader first."""
        ranks, _ = self.local(rank)
        leader = self.leaders(root)[self.host_of[rank]]
        return leader, [leader] + [r for r in ranks if r != leader]


# Across hosts, segments of at least this many elements (1 MiB of float32), and at most
# MAX_SEGMENTS of them: enough to hide the in-host phases behind the links' time, few
# enough that the extra steps' synchronisation stays small beside it.
PIPELINE_ELEMENTS = 1 << 18
MAX_SEGMENTS = 8


def all_reduce(problem: Problem, rank: int, segments: int | None = None) -> Schedule:
    """Hierarchical all-reduce: in-host reduce-scatter, one ring per lane across hosts, in-host all-gather.

    Several leaders per host, as NCCL's rings do with one per GPU:

    1. Inside each host, a pairwise reduce-scatter to the host's first K ranks,
       the lanes, where K is the smallest number of ranks any host has: the
       buffer is cut into K blocks, and in step s local rank i sends block
       (i + s) mod l to local rank (i + s) mod l (l ranks on the host) if that
       rank is a lane, and reduces the block it receives into its own. After
       l - 1 steps lane k holds block k reduced over its host.
    2. Across hosts, lane k of every host runs a ring all-reduce (reduce-scatter,
       then all-gather) on block k, cut into H pieces for H hosts. The K lanes of
       a host run their rings side by side, each over its own connections.
    3. Inside each host, a pairwise all-gather from the lanes: in step s lane i
       sends its finished block to local rank (i + s) mod l.

    Every rank works in its output after copying its input there, so the
    algorithm is also right in place.

    Cost for count m, H hosts, l ranks on a host, K lanes: (l_max - 1) + 2 (H - 1)
    + (l_max - 1) steps. Inside a host each rank sends about m (l - 1) / K
    elements in phase 1 and the lanes receive and reduce m (l - 1) / K each;
    across hosts each lane sends 2 m (H - 1) / (H K) elements and reduces
    m (H - 1) / (H K), so a host puts 2 m (H - 1) / H elements on its link, as
    little as any all-reduce can; phase 3 mirrors phase 1 without reductions.
    On one host (or without `hosts`) it is a pairwise reduce-scatter +
    all-gather; with one rank per host it is the ring.

    Across hosts a large buffer is cut into `segments` (default: one per
    PIPELINE_ELEMENTS, at most MAX_SEGMENTS) that run the three phases one
    step apart, as NCCL pipelines its rings: while the links carry segment p,
    the hosts reduce segment p + 1 and gather segment p - 1 over shared
    memory, so only the first segment's phase 1 and the last one's phase 3
    are not hidden behind the links. It adds segments - 1 steps.
    """
    check_collective(problem, "all_reduce")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "hierarchical")
    layout = HostLayout(problem)
    count = problem.count
    if segments is None:
        segments = 1 if len(layout.members) == 1 else max(1, min(MAX_SEGMENTS, count // PIPELINE_ELEMENTS))
    elif segments < 1:
        raise ValueError(f"segments must be >= 1, got {segments}")
    builder = StepBuilder()
    copy_input_to_output(builder, count)
    bounds = block_bounds(count, segments)
    for segment in range(segments):
        _all_reduce_segment(builder, segment, layout, rank, bounds[segment], bounds[segment + 1] - bounds[segment])
    return builder.build(problem, rank, "hierarchical")


def _all_reduce_segment(builder: StepBuilder, first: int, layout: HostLayout, rank: int, offset: int,
                        count: int) -> None:
    """The three phases of the hierarchical all-reduce on OUTPUT[offset : offset + count], from step `first`."""
    lanes = layout.lanes
    bounds = [offset + b for b in block_bounds(count, lanes)]

    def block(k: int) -> Slice:
        return Slice(OUTPUT, bounds[k], bounds[k + 1] - bounds[k])

    local, me = layout.local(rank)
    size = len(local)
    for s in range(1, size):  # phase 1: reduce-scatter to the lanes
        to, source = (me + s) % size, (me - s) % size
        if to < lanes:
            builder.send(first + s - 1, local[to], block(to))
        if me < lanes:
            builder.recv_reduce(first + s - 1, local[source], block(me))
    across = first + layout.largest - 1
    hosts = len(layout.members)
    if me < lanes and hosts > 1:  # phase 2: lane `me`'s ring across the hosts
        _lane_ring(builder, across, layout, me, layout.host_of[rank], bounds[me], bounds[me + 1] - bounds[me])
    gather = across + 2 * (hosts - 1)
    for s in range(1, size):  # phase 3: all-gather from the lanes
        to, source = (me + s) % size, (me - s) % size
        if me < lanes:
            builder.send(gather + s - 1, local[to], block(me))
        if source < lanes:
            builder.recv(gather + s - 1, local[source], block(source))


def _lane_ring(builder: StepBuilder, first: int, layout: HostLayout, lane: int, host: int, offset: int,
               length: int) -> None:
    """Ring all-reduce of OUTPUT[offset : offset + length] among lane `lane` of every host."""
    hosts = len(layout.members)
    bounds = block_bounds(length, hosts)

    def piece(index: int) -> Slice:
        index %= hosts
        return Slice(OUTPUT, offset + bounds[index], bounds[index + 1] - bounds[index])

    right = layout.members[(host + 1) % hosts][lane]
    left = layout.members[(host - 1) % hosts][lane]
    for s in range(hosts - 1):
        builder.send(first + s, right, piece(host - s))
        builder.recv_reduce(first + s, left, piece(host - s - 1))
    for s in range(hosts - 1):
        builder.send(first + hosts - 1 + s, right, piece(host + 1 - s))
        builder.recv(first + hosts - 1 + s, left, piece(host - s))


def _tree(builder: StepBuilder, first: int, order: list[int], rank: int, data: list[Slice]) -> None:
    """Binomial broadcast of `data` from order[0] to the ranks of `order`, in steps first, first + 1, ..."""
    v = order.index(rank)
    for k in range(ceil_log2(len(order))):
        distance = 1 << k
        if v < distance and v + distance < len(order):
            for part in data:
                builder.send(first + k, order[v + distance], part)
        elif distance <= v < 2 * distance:
            for part in data:
                builder.recv(first + k, order[v - distance], part)


def broadcast(problem: Problem, rank: int) -> Schedule:
    """Hierarchical broadcast: a binomial tree among one leader per host, then one inside each host.

    A host's leader is the root on the root's host, else the host's first
    rank; the leaders' tree starts at the root's host. Each host receives the
    m elements once. Cost: ceil(log2 H) + ceil(log2 l_max) steps; a rank
    sends m elements once per round in which it has a child.
    """
    check_collective(problem, "broadcast")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "hierarchical")
    layout = HostLayout(problem)
    builder = StepBuilder()
    data = [Slice(OUTPUT, 0, problem.count)]
    if rank == problem.root:
        copy_input_to_output(builder, problem.count)
    leaders = layout.leaders(problem.root)
    root_host = layout.host_of[problem.root]
    across = leaders[root_host:] + leaders[:root_host]
    if rank in across:
        _tree(builder, 0, across, rank, data)
    _, order = layout.led_by(rank, problem.root)
    _tree(builder, ceil_log2(len(across)), order, rank, data)
    return builder.build(problem, rank, "hierarchical")


def all_gather(problem: Problem, rank: int) -> Schedule:
    """Hierarchical all-gather: gather to each host's leader, a ring of whole hosts, a tree inside each host.

    Each rank sends its block to its host's leader (its first rank); the
    leaders run a ring all-gather of whole hosts' blocks (a host's blocks need
    not be contiguous: each moves as its own message); each leader then
    broadcasts the complete output inside its host by a binomial tree. A host
    receives the other hosts' blocks once. Cost: 1 + (H - 1) + ceil(log2 l_max)
    steps; a leader sends (H - 1) hosts' blocks across hosts and the whole
    output down its host's tree.
    """
    check_collective(problem, "all_gather")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "hierarchical")
    layout = HostLayout(problem)
    offsets = problem.offsets()
    builder = StepBuilder()

    def block(r: int) -> Slice:
        return Slice(OUTPUT, offsets[r], problem.counts[r])

    leader, order = layout.led_by(rank)
    if rank == leader:
        builder.copy(0, Slice(INPUT, 0, problem.counts[rank]), block(rank))
        for r in order[1:]:
            builder.recv(0, r, block(r))
    else:
        builder.send(0, leader, Slice(INPUT, 0, problem.counts[rank]))
    hosts = len(layout.members)
    if rank == leader:
        me = layout.host_of[rank]
        right, left = layout.leader_ring(me)
        for s in range(hosts - 1):
            for r in layout.members[(me - s) % hosts]:
                builder.send(1 + s, right, block(r))
            for r in layout.members[(me - s - 1) % hosts]:
                builder.recv(1 + s, left, block(r))
    _tree(builder, hosts, order, rank, [Slice(OUTPUT, 0, problem.total)])
    return builder.build(problem, rank, "hierarchical")


def reduce_scatter(problem: Problem, rank: int) -> Schedule:
    """Hierarchical reduce-scatter: reduce at each host's leader, a ring of whole hosts, hand out the blocks.

    Each rank sends its whole input to its host's leader (its first rank),
    which reduces them in scratch, one per step (two receives may not reduce
    into one place in a step); the leaders run a ring reduce-scatter of whole
    hosts' blocks; each leader hands every rank of its host its block. A host
    sends (H - 1) / H of the buffer across hosts. Cost: (l_max - 1) + (H - 1) + 1
    steps, with l - 1 whole buffers reduced by each leader (cheap in shared
    memory, and the price of sending nothing twice between hosts).
    """
    check_collective(problem, "reduce_scatter")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "hierarchical")
    layout = HostLayout(problem)
    offsets = problem.offsets()
    builder = StepBuilder()
    leader, order = layout.led_by(rank)
    hosts = len(layout.members)
    # A leader reduces one local rank's buffer per step (two receives may not reduce into one place in a step).
    ring = layout.largest - 1
    last = ring + hosts - 1  # the step in which leaders hand out the blocks
    if rank != leader:
        builder.send(order.index(rank) - 1, leader, Slice(INPUT, 0, problem.total))
        builder.recv(last, leader, Slice(OUTPUT, 0, problem.counts[rank]))
        return builder.build(problem, rank, "hierarchical")

    def block(r: int) -> Slice:
        return Slice(SCRATCH, offsets[r], problem.counts[r])

    builder.copy(0, Slice(INPUT, 0, problem.total), Slice(SCRATCH, 0, problem.total))
    for i, r in enumerate(order[1:]):
        builder.recv_reduce(i, r, Slice(SCRATCH, 0, problem.total))
    me = layout.host_of[rank]
    right, left = layout.leader_ring(me)
    for s in range(hosts - 1):
        for r in layout.members[(me - s - 1) % hosts]:
            builder.send(ring + s, right, block(r))
        for r in layout.members[(me - s - 2) % hosts]:
            builder.recv_reduce(ring + s, left, block(r))
    builder.copy(last, block(rank), Slice(OUTPUT, 0, problem.counts[rank]))
    for r in order[1:]:
        builder.send(last, r, block(r))
    return builder.build(problem, rank, "hierarchical", scratch=problem.total)
