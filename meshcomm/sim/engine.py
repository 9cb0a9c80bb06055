"""Predicted time of one collective call on a Topology: exact replay, or the ring's closed form at scale.

Replay (`tuner.predict.replay`) runs every rank's schedule on the α-β-γ model
with a clock per rank; it is exact for the model and costs time and memory
in proportion to all ranks' operations: fine for every algorithm up to a few
thousand ranks, and for the trees (O(log n) operations per rank) at 24,576
ranks within a minute.

A ring has O(n) steps on each of n ranks, so replaying it at 24,576 ranks
would take hours. Its steps are all alike: in each, every rank sends one
chunk to its right neighbour and receives one from its left. Under the
model, a rank's clock then advances each step by the larger of its own step
cost and its left neighbour's (the message it waits for), and after n steps
every clock has been held back by the costliest rank of the ring in every
step, so the call takes the sum over steps of the costliest rank's step. The
costliest rank is one that receives across a host boundary (when the ring
spans hosts). `ring_closed_form` computes that sum from one such rank's
schedule; it matches replay within the rounding of chunk sizes (tested up to
256 ranks) and is used above REPLAY_LIMIT ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshcomm.algorithms import get_schedule
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import Copy, RecvReduce, Reduce, Send
from meshcomm.sim.topology import Topology
from meshcomm.tuner.choose import canonical_problem
from meshcomm.tuner.predict import replay

REPLAY_LIMIT = 1024
RINGS = {("all_reduce", "ring"), ("all_gather", "ring"), ("reduce_scatter", "ring")}


@dataclass(frozen=True)
class Prediction:
    seconds: float
    method: str  # "replay" or "ring closed form"


def problem_for(collective: str, nranks: int, nbytes: int, itemsize: int, topo: Topology) -> Problem:
    """nccl-tests' size on `nranks` ranks, with the topology's hosts for node-aware algorithms."""
    problem = canonical_problem(collective, nranks, nbytes, itemsize)
    hosts = topo.hosts(nranks)
    if len(set(hosts)) > 1:
        problem = Problem(problem.collective, nranks, problem.counts, problem.root, hosts)
    return problem


def simulate(collective: str, algorithm: str, nranks: int, nbytes: int, topo: Topology,
             itemsize: int = 4, exact: bool = False) -> Prediction:
    """Seconds one call takes by the model; `exact` replays rings too, whatever their size."""
    problem = problem_for(collective, nranks, nbytes, itemsize, topo)
    hosts = topo.hosts(nranks)
    if (collective, algorithm) in RINGS and nranks > REPLAY_LIMIT and not exact:
        return Prediction(ring_closed_form(problem, itemsize, topo), "ring closed form")
    schedules = [get_schedule(problem, rank, algorithm) for rank in range(nranks)]
    return Prediction(replay(schedules, itemsize, topo.parameters, hosts, topo.cores), "replay")


def ring_closed_form(problem: Problem, itemsize: int, topo: Topology) -> float:
    """Sum over steps of the costliest rank's step cost (see the module's docstring)."""
    n, params = problem.nranks, topo.parameters
    hosts = topo.hosts(n)
    spans_hosts = len(set(hosts)) > 1
    # The first rank of host 1 receives across a boundary; on one host any rank will do.
    rank = hosts.index(1) if spans_hosts else 0
    per_host = n if topo.ranks_per_host is None else min(n, topo.ranks_per_host)
    crowded = per_host > topo.cores
    stretch = max(1.0, per_host / topo.cores)
    link = params.other_host if spans_hosts else params.same_host
    alpha = link.alpha if spans_hosts else (params.crowded_alpha if crowded else link.alpha)
    total = 0.0
    for step in get_schedule(problem, rank, "ring").steps:
        local = sum(op.dst.count * (params.copy if isinstance(op, Copy) else params.gamma)
                    for op in step if isinstance(op, (Copy, Reduce)))
        sent = max((op.src.count for op in step if isinstance(op, Send)), default=0)
        reduced = sum(op.dst.count for op in step if isinstance(op, RecvReduce))
        message = alpha + sent * itemsize * link.beta * stretch if sent else 0.0
        total += (local * itemsize + reduced * itemsize * params.gamma) * stretch + message
    return total + params.call
