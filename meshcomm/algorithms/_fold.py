"""The power-of-two fold and the recursive halving and doubling rounds built on it.

Recursive halving and doubling pair vrank v with v xor 2**k, which needs a
power of two. With p the largest power of two <= n and rem = n - p, the ranks
(relative to a root, rel = (rank - root) mod n) pair up as (2i, 2i + 1) for
i < rem: the even one is kept and the odd one folds into it, handing over its
data before the rounds and getting the result after them. The kept ranks and
the ranks >= 2 rem are the p participants, vranks 0 .. p-1:

    vrank v  <->  rel 2v       for v < rem
    vrank v  <->  rel v + rem  for v >= rem

so rel 0 (the root) is always vrank 0, and a range of vranks [a, b) stands
for the contiguous range of rels [first(a), first(b)): laid out in rank
order, the blocks a range of vranks is responsible for are contiguous.
"""

from __future__ import annotations

from typing import Callable

from meshcomm.algorithms._build import StepBuilder
from meshcomm.algorithms.schedule import Slice

Region = Callable[[int, int], Slice]


class Fold:
    def __init__(self, nranks: int, root: int = 0) -> None:
        self.n = nranks
        self.root = root
        self.p = 1 << (nranks.bit_length() - 1)
        self.rem = nranks - self.p
        self.rounds = self.p.bit_length() - 1

    def rel(self, rank: int) -> int:
        return (rank - self.root) % self.n

    def real(self, rel: int) -> int:
        return (rel + self.root) % self.n

    def vrank(self, rank: int) -> int | None:
        """The rank's vrank, or None for a rank that folds into its even neighbour."""
        rel = self.rel(rank)
        if rel < 2 * self.rem:
            return None if rel % 2 else rel // 2
        return rel - self.rem

    def folded(self, rank: int) -> bool:
        """True for a kept rank that has a folded partner (rel 2i + 1)."""
        rel = self.rel(rank)
        return rel < 2 * self.rem and rel % 2 == 0

    def partner(self, rank: int) -> int:
        """The other rank of a fold pair (kept <-> folded)."""
        rel = self.rel(rank)
        return self.real(rel + 1 if rel % 2 == 0 else rel - 1)

    def first(self, vrank: int) -> int:
        """The first rel a vrank stands for (first(p) = n), so [first(a), first(b)) is vranks [a, b)."""
        return 2 * vrank if vrank <= self.rem else vrank + self.rem

    def peer(self, vrank: int) -> int:
        """The group rank of a participant."""
        return self.real(self.first(vrank))


def recursive_halving(builder: StepBuilder, fold: Fold, vrank: int, step: int, region: Region) -> int:
    """Reduce-scatter over the participants, in place: returns the step after the last round.

    In round j (distance d = p / 2**(j+1)) the vranks' common range [lo, lo + 2d)
    is split in two; vrank v keeps the half holding v, sends the other half to
    v xor d and receives that partner's partial of its own half, reducing it in
    place. After log2 p rounds vrank v holds the reduction of its own range
    [v, v + 1). `region(a, b)` is the buffer slice for vranks [a, b).
    """
    lo, hi = 0, fold.p
    for j in range(fold.rounds):
        distance = fold.p >> (j + 1)
        middle = lo + distance
        keep, give = ((lo, middle), (middle, hi)) if vrank < middle else ((middle, hi), (lo, middle))
        partner = fold.peer(vrank ^ distance)
        builder.send(step + j, partner, region(*give))
        builder.recv_reduce(step + j, partner, region(*keep))
        lo, hi = keep
    return step + fold.rounds


def recursive_doubling(builder: StepBuilder, fold: Fold, vrank: int, step: int, region: Region) -> int:
    """All-gather over the participants, in place: returns the step after the last round.

    In round k (distance d = 2**k) vrank v holds the range of the d vranks of
    its aligned group, [v - v mod d, + d); it sends that range to v xor d and
    receives the partner's, so the range doubles each round.
    """
    for k in range(fold.rounds):
        distance = 1 << k
        mine = vrank & ~(distance - 1)
        theirs = mine ^ distance
        partner = fold.peer(vrank ^ distance)
        builder.send(step + k, partner, region(mine, mine + distance))
        builder.recv(step + k, partner, region(theirs, theirs + distance))
    return step + fold.rounds
