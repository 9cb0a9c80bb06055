"""Which algorithm runs when the caller names none.

A stop-gap rule until the calibrated cost model: latency-bound messages take
the algorithm with the fewest steps, bandwidth-bound ones the collective's
default (ring, which moves the fewest bytes per rank).
"""

from __future__ import annotations

from meshcomm.algorithms.problem import Problem

# Below this many bytes per rank a step costs more than the bytes it carries
# (a wake-up is ~10-50 µs here; 64 KiB is copied in ~5 µs).
SMALL_BYTES = 64 << 10

_FEWEST_STEPS = {"all_reduce": "recursive_doubling"}
# When the group spans hosts, large all_reduces and broadcasts take the node-aware
# algorithms: the links between hosts are the slow ones, and they put the fewest bytes
# on them. The one-leader all_gather and reduce_scatter lost to the ring at 16 MiB
# across 2 namespaces with 1 Gbit/s links (benchmarks/multihost.py), so they wait for
# the cost model.
_ACROSS_HOSTS = {"all_reduce": "hierarchical", "broadcast": "hierarchical"}


def parse_override(text: str, known: dict[str, dict], source: str = "MESHCOMM_ALGO",
                   scope: list[str] | None = None) -> dict[str, str]:
    """'ring' (every collective in `scope`, default all, that has it) or 'all_reduce:ring;broadcast:chain'
    (',' separates too). Errors name `source`, the setting or option the text came from."""
    scope = list(known) if scope is None else scope
    chosen: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.replace(",", ";").split(";"))):
        if ":" in part:
            collective, name = (x.strip() for x in part.split(":", 1))
            if collective not in known:
                raise ValueError(f"{source} names unknown collective {collective!r}; known: {', '.join(known)}")
            if name not in known[collective]:
                raise ValueError(f"{source}: {collective} has no algorithm {name!r}; "
                                 f"choose one of: {', '.join(known[collective])}")
            chosen[collective] = name
            continue
        matching = [c for c in scope if part in known.get(c, {})]
        if not matching:
            raise ValueError(f"{source} {part!r}: none of {', '.join(scope)} has an algorithm of that name")
        for collective in matching:
            chosen.setdefault(collective, part)
    return chosen


def choose(problem: Problem, itemsize: int, default: dict[str, str]) -> str:
    fast = _FEWEST_STEPS.get(problem.collective)
    if fast is not None and problem.nranks > 1 and problem.counts[0] * itemsize <= SMALL_BYTES:
        return fast
    if problem.hosts and problem.collective in _ACROSS_HOSTS:
        return _ACROSS_HOSTS[problem.collective]
    return default[problem.collective]
