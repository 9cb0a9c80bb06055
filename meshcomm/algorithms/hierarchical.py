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

    def lane_ring(self, host: int, lane: int) -> tuple[int, int]:
        """Lane `lane` of the hosts after and before `host` in the ring of hosts."""
        hosts = len(self.members)
        return self.members[(host + 1) % hosts][lane], self.members[(host - 1) % hosts][lane]

    def lane_members(self, host: int, lane: int) -> list[int]:
        """The ranks of host `host` (mod H) whose blocks lane `lane` carries across: local ranks lane, lane + K, ..."""
        return self.members[host % len(self.members)][lane::self.lanes]

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
    segments = _segment_count(layout, count, segments)
    builder = StepBuilder()
    copy_input_to_output(builder, count)
    bounds = block_bounds(count, segments)
    for segment in range(segments):
        _all_reduce_segment(builder, segment, layout, rank, bounds[segment], bounds[segment + 1] - bounds[segment])
    return builder.build(problem, rank, "hierarchical")


def _segment_count(layout: HostLayout, elements: int, segments: int | None) -> int:
    """`segments` checked, or by default one per PIPELINE_ELEMENTS of the buffer (at most MAX_SEGMENTS) across hosts."""
    if segments is None:
        return 1 if len(layout.members) == 1 else max(1, min(MAX_SEGMENTS, elements // PIPELINE_ELEMENTS))
    if segments < 1:
        raise ValueError(f"segments must be >= 1, got {segments}")
    return segments


def _block_segments(problem: Problem, segments: int) -> list[list[tuple[int, int]]]:
    """Per segment j, each rank's block's j-th of `segments` cuts, as (offset, count) in the whole buffer."""
    offsets = problem.offsets()
    cuts = [block_bounds(count, segments) for count in problem.counts]
    return [[(offsets[r] + cuts[r][j], cuts[r][j + 1] - cuts[r][j]) for r in range(problem.nranks)]
            for j in range(segments)]


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

    right, left = layout.lane_ring(host, lane)
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


def all_gather(problem: Problem, rank: int, segments: int | None = None) -> Schedule:
    """Hierarchical all-gather: blocks shared inside each host, one ring per lane across hosts, forwarded as they come.

    The lanes are each host's first K ranks, K the smallest number of ranks
    any host has; local rank i is a member of lane i mod K, so lane k of host
    h speaks for the blocks of its members, G(h, k) (just its own when all
    hosts have K ranks).

    1. Inside each host, every rank sends its block to the host's other ranks
       (step 0).
    2. Across hosts, lane k of every host runs a ring all-gather of the
       G(., k) blocks: in ring step c it passes the blocks of host h - c to
       the next host's lane k and receives those of host h - c - 1. When all
       hosts have K ranks the ring starts in step 0 with the lane's own
       block; otherwise in step 1, once its members' blocks have arrived.
    3. Each lane forwards the blocks it received in a ring step to the other
       ranks of its host in the next step, so the hosts' shared-memory
       traffic of one ring step runs while the links carry the next.

    Across hosts every block is cut into `segments` parts (default as for
    the all-reduce) that run these phases one step apart, so that what is
    left of phase 3 after the ring's last step is one part's forwarding.

    A host sends each of its blocks across once per other host but one,
    (H - 1) / H of the output, as little as any all-gather can, spread over
    K connections. Cost: H + segments - 1 steps when hosts are alike (one
    more otherwise); every rank sends its block to l - 1 local ranks, and
    each lane sends H - 1 hosts' share of its members' blocks across and
    forwards them to l - 1 local ranks. On one host it is `direct`'s one
    step of messages; with one rank per host, the ring.
    """
    check_collective(problem, "all_gather")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "hierarchical")
    layout = HostLayout(problem)
    builder = StepBuilder()
    copy_input_to_output(builder, problem.counts[rank], out_offset=problem.offsets()[rank])
    for segment, parts in enumerate(_block_segments(problem, _segment_count(layout, problem.total, segments))):
        _all_gather_segment(builder, segment, layout, rank, parts)
    return builder.build(problem, rank, "hierarchical")


def _all_gather_segment(builder: StepBuilder, first: int, layout: HostLayout, rank: int,
                        parts: list[tuple[int, int]]) -> None:
    """The all-gather's phases on the blocks' parts `parts` (per rank, in OUTPUT), from step `first`."""
    def blocks(ranks: list[int]) -> list[Slice]:
        return [Slice(OUTPUT, *parts[r]) for r in ranks]

    local, me = layout.local(rank)
    others = [peer for peer in local if peer != rank]
    for peer in others:  # phase 1
        builder.send(first, peer, Slice(OUTPUT, *parts[rank]))
        builder.recv(first, peer, Slice(OUTPUT, *parts[peer]))
    hosts, lanes = len(layout.members), layout.lanes
    start = first + (0 if layout.largest == lanes else 1)
    host = layout.host_of[rank]
    if me < lanes:  # phase 2, and this lane's part of phase 3
        right, left = layout.lane_ring(host, me)
        for c in range(hosts - 1):
            for part in blocks(layout.lane_members(host - c, me)):
                builder.send(start + c, right, part)
            arriving = blocks(layout.lane_members(host - c - 1, me))
            for part in arriving:
                builder.recv(start + c, left, part)
            for peer in others:
                for part in arriving:
                    builder.send(start + c + 1, peer, part)
    for lane in range(lanes):  # phase 3: what the host's other lanes forward
        if lane != me:
            for c in range(hosts - 1):
                for part in blocks(layout.lane_members(host - c - 1, lane)):
                    builder.recv(start + c + 1, local[lane], part)


def reduce_scatter(problem: Problem, rank: int, segments: int | None = None) -> Schedule:
    """Hierarchical reduce-scatter: in-host reduce-scatter to the lanes, one ring per lane across hosts, hand out.

    The mirror of the all-gather above, with the lanes and their members
    G(h, k) defined alike; U(k) is the blocks of every host's G(., k), the
    part of the buffer lane k reduces.

    1. Inside each host, a pairwise reduce-scatter to the lanes in scratch:
       in step s local rank i sends its U((i + s) mod l) to local rank
       (i + s) mod l if that rank is a lane, and a lane reduces the U it
       receives into its own, one source per step.
    2. Across hosts, lane k of every host runs a ring reduce-scatter of
       U(k), in pieces G(p, k) per host p: in ring step c it sends its partial
       G(h - c - 1, k) to the next host's lane k and reduces G(h - c - 2, k)
       from the previous one, so after H - 1 steps it holds G(h, k) reduced
       over every rank.
    3. Each lane hands its members their blocks (its own is a copy).

    Across hosts every block is cut into `segments` parts (default as for
    the all-reduce) that run these phases one step apart, so that the hosts
    reduce one part while the links carry another.

    A host sends (H - 1) / H of the buffer across hosts, as little as any
    reduce-scatter can, spread over K connections. Cost: (l_max - 1) + (H - 1)
    + segments steps; inside a host each rank sends about m (l - 1) / K
    elements and the lanes reduce as many; across hosts each lane sends and
    reduces (H - 1) / H of U(k). On one host it is a pairwise reduce-scatter;
    with one rank per host, the ring.
    """
    check_collective(problem, "reduce_scatter")
    check_rank(problem, rank)
    if problem.nranks == 1:
        return single_rank(problem, "hierarchical")
    layout = HostLayout(problem)
    builder = StepBuilder()
    own_offset = problem.offsets()[rank]
    for segment, parts in enumerate(_block_segments(problem, _segment_count(layout, problem.total, segments))):
        _reduce_scatter_segment(builder, segment, layout, rank, parts, own_offset)
    lane = layout.local(rank)[1] < layout.lanes
    return builder.build(problem, rank, "hierarchical", scratch=problem.total if lane else 0)


def _reduce_scatter_segment(builder: StepBuilder, first: int, layout: HostLayout, rank: int,
                            parts: list[tuple[int, int]], own_offset: int) -> None:
    """The reduce-scatter's phases on the blocks' parts `parts` (per rank, in INPUT and SCRATCH), from step `first`.

    own_offset is where `rank`'s block starts in the whole buffer; its OUTPUT holds only that block.
    """
    hosts, lanes = len(layout.members), layout.lanes

    def piece(buffer: str, host: int, lane: int) -> list[Slice]:
        return [Slice(buffer, *parts[r]) for r in layout.lane_members(host, lane)]

    def lane_part(buffer: str, lane: int) -> list[Slice]:
        return [part for h in range(hosts) for part in piece(buffer, h, lane)]

    local, me = layout.local(rank)
    size = len(local)
    if me < lanes:
        for source, target in zip(lane_part(INPUT, me), lane_part(SCRATCH, me)):
            builder.copy(first, source, target)
    for s in range(1, size):  # phase 1: reduce-scatter to the lanes
        to, source = (me + s) % size, (me - s) % size
        if to < lanes:
            for part in lane_part(INPUT, to):
                builder.send(first + s - 1, local[to], part)
        if me < lanes:
            for part in lane_part(SCRATCH, me):
                builder.recv_reduce(first + s - 1, local[source], part)
    across = first + layout.largest - 1
    host = layout.host_of[rank]
    if me < lanes:  # phase 2: lane `me`'s ring across the hosts
        right, left = layout.lane_ring(host, me)
        for c in range(hosts - 1):
            for part in piece(SCRATCH, host - c - 1, me):
                builder.send(across + c, right, part)
            for part in piece(SCRATCH, host - c - 2, me):
                builder.recv_reduce(across + c, left, part)
    last = across + hosts - 1  # phase 3: the lanes hand out the blocks
    mine = Slice(OUTPUT, parts[rank][0] - own_offset, parts[rank][1])
    if me < lanes:
        for member in layout.lane_members(host, me):
            if member == rank:
                builder.copy(last, Slice(SCRATCH, *parts[member]), mine)
            else:
                builder.send(last, member, Slice(SCRATCH, *parts[member]))
    else:
        builder.recv(last, local[me % lanes], mine)
