"""Alltoallw: every rank sends each rank a piece with its own count, datatype and byte displacement.

Each piece is packed into bytes (typemap.gather: a view where the layout
allows), the pieces go out as one all_to_all of bytes, and each received
piece is unpacked where its receive datatype says. Before moving anything
the ranks share both their send sizes and the sizes they expect, so a
mismatch is an error on every rank instead of a hang on some. Cost: one
all_gather of 2·P integers per rank, then the all_to_all of the data.
"""

from __future__ import annotations

import numpy as np

from meshcomm.algorithms.problem import Problem
from meshcomm.api import collectives as coll
from meshcomm.group.call import Call
from meshcomm.mpi import collectives
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import messages as msg
from meshcomm.mpi.comm import Intracomm


def _matrix(g, sending: list[int], expecting: list[int]) -> tuple[int, ...]:
    """The bytes rank i sends rank j, row-major; ERR_TRUNCATE on every rank if any pair disagrees."""
    mine = np.array(sending + expecting, dtype=np.int64)
    table = np.empty(2 * g.size * g.size, dtype=np.int64)
    coll.all_gather_into_tensor(table, mine, group=g)
    rows = table.reshape(g.size, 2, g.size)
    sends, expects = rows[:, 0, :], rows[:, 1, :]
    if not np.array_equal(sends, expects.T):
        i, j = (int(x[0]) for x in np.nonzero(sends != expects.T))
        raise err.Exception(err.ERR_TRUNCATE, f"Alltoallw: rank {i} sends rank {j} {int(sends[i, j])} bytes, "
                                              f"but rank {j} expects {int(expects[j, i])}")
    return tuple(int(x) for x in sends.reshape(-1))


def _Alltoallw(self, sendbuf, recvbuf) -> None:
    g = self._g
    recv = msg.read_w(recvbuf, "recvbuf", g.size, writable=True)
    send = recv if collectives._in_place(sendbuf) else msg.read_w(sendbuf, "sendbuf", g.size)
    pieces = [send.piece(r) for r in range(g.size)]  # all read before any is written: IN_PLACE shares the buffer
    expected = [recv.nbytes(r) for r in range(g.size)]
    matrix = _matrix(g, [p.size for p in pieces], expected)
    joined = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.uint8)
    out = np.empty(sum(expected), dtype=np.uint8)
    g.collective(Call(Problem("all_to_all", g.size, matrix), {"input": joined, "output": out}, "uint8"))
    offset = 0
    for r, nbytes in enumerate(expected):
        recv.put(r, out[offset : offset + nbytes])
        offset += nbytes


Intracomm.Alltoallw = collectives._in_lane("Alltoallw", _Alltoallw)
Intracomm.Ialltoallw = collectives._started("Alltoallw", _Alltoallw)
Intracomm.Alltoallw_init = collectives._persistent("Alltoallw", _Alltoallw)
