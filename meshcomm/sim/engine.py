"""Predicted time of one collective call on a Topology: exact replay, or the ring's closed form at scale.

A `direct` or `two_shot` call of ranks all on one host runs on the group's
shared-memory board when it fits (where the topology has a board, as `here`
does; without the single copy only posts that fit a slot, and two_shot
never), not as messages: it is priced as the group would run it
(board/price.py).

Replay (`tuner.predict.replay`) runs every rank's schedule on the α-β-γ model
with a clock per rank; it is exact for the model and costs time and memory
in proportion to all ranks' operations: fine for every algorithm up to a few
thousand ranks, and for the trees (O(log n) operations per rank) at 24,576
ranks.

A ring has O(n) steps on each of n ranks, so replaying it costs O(n²)
operations, too many at 24,576 ranks. Its steps are all alike: in each,
every rank sends one chunk to its right neighbour and receives one from its
left. Under the model, a rank's clock then advances each step by the larger
of its own step cost and its left neighbour's (the message it waits for),
and after n steps every clock has been held back by the costliest rank of
the ring in every step, so the call takes the sum over steps of the
costliest rank's step. The costliest rank is one that receives across a host
boundary (when the ring spans hosts). `ring_closed_form` computes that sum
from one such rank's schedule; it matches replay but for the rounding of
chunk sizes (within 5 % in tests/sim/test_sim.py) and is used above
REPLAY_LIMIT ranks.

An all_reduce of fewer elements than ranks leaves n - count chunks empty,
and the executor sends nothing for them: each non-empty chunk then travels
alone around the ring, and the closed form walks those chains instead. It is
exact for one or two elements (8 bytes: within 6 % of replay in
tests/sim/test_sim.py) but ignores chunks that meet at a rank in the same
step, so it underestimates larger counts below n, the more so the closer
they come to n (benchmarks/results/design-figures-2026-11-25.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshcomm.algorithms import get_schedule
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import Copy, RecvReduce, Reduce, Send, block_bounds
from meshcomm.sim.topology import Topology
from meshcomm.board.price import board_time, runs_on_board
from meshcomm.tuner.choose import canonical_problem
from meshcomm.tuner.predict import replay

REPLAY_LIMIT = 1024
RINGS = {("all_reduce", "ring"), ("all_gather", "ring"), ("reduce_scatter", "ring")}


@dataclass(frozen=True)
class Prediction:
    seconds: float
    method: str  # "replay", "ring closed form", or "board" (a group on one host, see Topology.board)


def problem_for(collective: str, nranks: int, nbytes: int, itemsize: int, topo: Topology) -> Problem:
    """nccl-tests' size on `nranks` ranks, with the topology's hosts for node-aware algorithms."""
    hosts = topo.hosts(nranks)
    return canonical_problem(collective, nranks, nbytes, itemsize, hosts if len(set(hosts)) > 1 else ())


def simulate(collective: str, algorithm: str, nranks: int, nbytes: int, topo: Topology,
             itemsize: int = 4, exact: bool = False) -> Prediction:
    """Seconds one call takes by the model; `exact` replays rings too, whatever their size."""
    problem = problem_for(collective, nranks, nbytes, itemsize, topo)
    hosts = topo.hosts(nranks)
    if topo.board and runs_on_board(problem, algorithm, itemsize, hosts, topo.single_copy):
        return Prediction(board_time(problem, itemsize, topo.parameters, topo.cores, algorithm), "board")
    if (collective, algorithm) in RINGS and nranks > REPLAY_LIMIT and not exact:
        return Prediction(ring_closed_form(problem, itemsize, topo), "ring closed form")
    schedules = [get_schedule(problem, rank, algorithm) for rank in range(nranks)]
    return Prediction(replay(schedules, itemsize, topo.parameters, hosts, topo.cores), "replay")


def ring_closed_form(problem: Problem, itemsize: int, topo: Topology) -> float:
    """The ring's time by the model without replaying every rank (see the module's docstring)."""
    n = problem.nranks
    if problem.collective == "all_reduce" and problem.count < n:
        return _chunk_chains(problem, itemsize, topo)
    params = topo.parameters
    hosts = topo.hosts(n)
    spans_hosts = len(set(hosts)) > 1
    # The first rank of host 1 receives across a boundary; on one host any rank will do.
    rank = hosts.index(1) if spans_hosts else 0
    alpha, beta, stretch = _link(topo, n, spans_hosts)
    total = 0.0
    for step in get_schedule(problem, rank, "ring").steps:
        local = sum(op.dst.count * (params.copy if isinstance(op, Copy) else params.gamma)
                    for op in step if isinstance(op, (Copy, Reduce)))
        sent = max((op.src.count for op in step if isinstance(op, Send)), default=0)
        reduced = sum(op.dst.count for op in step if isinstance(op, RecvReduce))
        message = alpha + sent * itemsize * beta * stretch if sent else 0.0
        total += (local * itemsize + reduced * itemsize * params.gamma) * stretch + message
    return total + params.call


def _link(topo: Topology, n: int, other_host: bool) -> tuple[float, float, float]:
    """(α, β, byte-cost stretch) of a ring link of that class on this topology, as replay prices it."""
    params = topo.parameters
    per_host = n if topo.ranks_per_host is None else min(n, topo.ranks_per_host)
    stretch = max(1.0, per_host / topo.cores)
    if other_host:
        return params.other_host.alpha, params.other_host.beta, stretch
    alpha = params.crowded_alpha if per_host > topo.cores else params.same_host.alpha
    return alpha, params.same_host.beta, stretch


def _chunk_chains(problem: Problem, itemsize: int, topo: Topology) -> float:
    """An all_reduce of fewer elements than ranks: some chunks are empty and send nothing.

    Each non-empty chunk then travels alone around the ring: n - 1 hops that
    reduce it, then n - 1 that pass it on, each hop starting when the chunk
    arrives (the ranks it passes have nothing else to wait for). The call
    takes as long as the slowest chunk's 2(n - 1) hops; chunks starting at
    the same offset within a host cross the same number of host boundaries,
    so one chunk per offset is walked.
    """
    n, params = problem.nranks, topo.parameters
    hosts = topo.hosts(n)
    bounds = block_bounds(problem.count, n)
    per_host = topo.ranks_per_host or n
    starts = {}
    for chunk in range(n):
        size = bounds[chunk + 1] - bounds[chunk]
        if size:
            starts.setdefault(chunk % per_host, (chunk, size))
    slowest = 0.0
    links = {False: _link(topo, n, False), True: _link(topo, n, True)}
    for chunk, size in starts.values():
        t = 0.0
        for hop in range(2 * (n - 1)):
            sender = (chunk + hop) % n
            alpha, beta, stretch = links[hosts[sender] != hosts[(sender + 1) % n]]
            t += alpha + size * itemsize * beta * stretch
            if hop < n - 1:
                t += size * itemsize * params.gamma * stretch
        slowest = max(slowest, t)
    copy = problem.count * itemsize * params.copy * links[False][2]
    return copy + slowest + params.call
