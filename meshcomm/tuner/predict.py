"""A collective's predicted time, replayed from every rank's schedule on the α-β-γ model.

Each rank keeps a clock; step k of rank r, with the semantics of
algorithms/schedule.py:

1. its local operations run first: copied bytes x copy, reduced bytes x γ;
2. its sends leave one after the other (one Python thread posts and feeds
   them): each occupies the sender for α + bytes·β of the link class to its
   peer and arrives at the receiver when it is through;
3. each receive completes when its message has arrived, in the order the
   pair lists them; a RecvReduce then reduces the bytes (γ).

The step ends on rank r when its sends are through and its receives are
complete, so ranks synchronise only through their messages: a rank that
waits for a slow sender starts its next step late, one that does not, does
not. The prediction is the latest clock plus the fixed per-call cost.

Ranks may outnumber cores (4 or 8 ranks on a 2-core machine). Then a same-host
message costs crowded_alpha instead of alpha (its receiver has to be
scheduled, not just woken), and the byte terms of a step (β, γ, copy) are
stretched by max(1, ranks of that host acting in the step / cores), on the
assumption that the ranks which act in a step share the host's cores evenly.

A host has one link to the others, and its ranks share it: a message to
another host has its byte term stretched by the number of the sending host's
ranks that send across hosts in the same step, or of the receiving host's
ranks that receive across hosts, whichever is larger (a full-duplex link,
shared evenly). So two ranks of a host that each send m bytes across at once
take as long as one rank sending 2m, which is what decides between a
binomial tree, whose later rounds cross the link from several ranks at
once, and a tree of one leader per host.

Not modelled: the executor's pipelining of messages in chunks (it overlaps a
long message's transfer with its reduction), cache effects (γ and copy are
out-of-cache rates), and TCP links sharing a core with their peer when
"other host" is really this host.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Sequence

from meshcomm.algorithms import get_schedule
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import Copy, Recv, RecvReduce, Reduce, Schedule, Send
from meshcomm.board.price import board_time, runs_on_board
from meshcomm.tuner.model import Parameters


def predict(problem: Problem, algorithm: str, itemsize: int, parameters: Parameters,
            hosts: Sequence[object] | None = None, cores: int = 1, single_copy: bool = False) -> float:
    """Seconds one call of `algorithm` on `problem` takes, by the model.

    hosts[r] labels rank r's host (ranks with equal labels are "same_host";
    None: all on one host); cores is the number of cores of each host;
    single_copy: the ranks can read and write each other's memory, so a
    group's board takes `direct` calls of any size, and `two_shot` ones
    (board/price.py).
    """
    if runs_on_board(problem, algorithm, itemsize, hosts, single_copy):
        return board_time(problem, itemsize, parameters, cores, algorithm)
    schedules = [get_schedule(problem, rank, algorithm) for rank in range(problem.nranks)]
    return replay(schedules, itemsize, parameters, hosts, cores)


def replay(schedules: Sequence[Schedule], itemsize: int, parameters: Parameters,
           hosts: Sequence[object] | None = None, cores: int = 1) -> float:
    """The model's time for one set of schedules (one per rank, in rank order)."""
    n = len(schedules)
    hosts = [0] * n if hosts is None else list(hosts)
    if len(hosts) != n:
        raise ValueError(f"hosts must label each of the {n} ranks, got {len(hosts)} labels")
    if cores < 1:
        raise ValueError(f"cores must be >= 1, got {cores}")
    same, other = parameters.same_host, parameters.other_host
    ranks_of_host: dict[object, int] = defaultdict(int)
    for label in hosts:
        ranks_of_host[label] += 1
    alpha_here = [parameters.crowded_alpha if ranks_of_host[label] > cores else same.alpha for label in hosts]
    clock = [0.0] * n
    for k in range(max((len(s.steps) for s in schedules), default=0)):
        steps = [s.steps[k] if k < len(s.steps) else () for s in schedules]
        acting: dict[object, int] = defaultdict(int)
        for rank, step in enumerate(steps):
            if step:
                acting[hosts[rank]] += 1
        stretch = [max(1.0, acting[hosts[rank]] / cores) for rank in range(n)]
        sharing = _link_sharing(steps, hosts)

        ready = list(clock)
        arrivals: dict[tuple[int, int], deque[float]] = defaultdict(deque)
        sent = list(clock)
        for rank, step in enumerate(steps):
            local = sum(op.dst.count for op in step if isinstance(op, Copy)) * parameters.copy
            local += sum(op.dst.count for op in step if isinstance(op, Reduce)) * parameters.gamma
            ready[rank] += local * itemsize * stretch[rank]
            t = ready[rank]
            for op in step:
                if isinstance(op, Send):
                    if hosts[op.peer] == hosts[rank]:
                        t += alpha_here[rank] + op.src.count * itemsize * same.beta * stretch[rank]
                    else:
                        share = max(stretch[rank], sharing(rank, op.peer))
                        t += other.alpha + op.src.count * itemsize * other.beta * share
                    arrivals[(rank, op.peer)].append(t)
            sent[rank] = t
        for rank, step in enumerate(steps):
            t = ready[rank]
            for op in step:
                if isinstance(op, (Recv, RecvReduce)):
                    t = max(t, arrivals[(op.peer, rank)].popleft())
                    if isinstance(op, RecvReduce):
                        t += op.dst.count * itemsize * parameters.gamma * stretch[rank]
            clock[rank] = max(sent[rank], t)
    return max(clock, default=0.0) + parameters.call


def _link_sharing(steps: Sequence[Sequence], hosts: Sequence[object]) -> Callable[[int, int], int]:
    """For one step: how many streams share the links a message from rank a to rank b (another host) crosses."""
    sending: dict[object, set[int]] = defaultdict(set)
    receiving: dict[object, set[int]] = defaultdict(set)
    for rank, step in enumerate(steps):
        for op in step:
            if isinstance(op, (Send, Recv, RecvReduce)) and hosts[op.peer] != hosts[rank]:
                (sending if isinstance(op, Send) else receiving)[hosts[rank]].add(rank)

    def sharing(a: int, b: int) -> int:
        return max(len(sending[hosts[a]]), len(receiving[hosts[b]]))
    return sharing
