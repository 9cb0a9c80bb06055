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


def parse_override(text: str, known: dict[str, dict]) -> dict[str, str]:
    """MESHCOMM_ALGO: 'ring' (every collective that has it) or 'all_reduce:ring;broadcast:chain'."""
    chosen: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        if ":" in part:
            collective, name = (x.strip() for x in part.split(":", 1))
            if collective not in known:
                raise ValueError(f"MESHCOMM_ALGO names unknown collective {collective!r} in {text!r}")
            if name not in known[collective]:
                raise ValueError(f"MESHCOMM_ALGO: {collective} has no algorithm {name!r}; "
                                 f"choose one of: {', '.join(known[collective])}")
            chosen[collective] = name
        else:
            matching = [c for c, names in known.items() if part in names]
            if not matching:
                raise ValueError(f"MESHCOMM_ALGO: no collective has an algorithm named {part!r}")
            for collective in matching:
                chosen.setdefault(collective, part)
    return chosen


def choose(problem: Problem, itemsize: int, default: dict[str, str]) -> str:
    fast = _FEWEST_STEPS.get(problem.collective)
    if fast is not None and problem.nranks > 1 and problem.counts[0] * itemsize <= SMALL_BYTES:
        return fast
    return default[problem.collective]
