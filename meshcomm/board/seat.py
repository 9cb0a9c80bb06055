"""A group's seat at its board: whether a call fits it, joining it at the first call, and running a call on it.

Every member decides alike (same problem, same hosts), so the first call that
runs on the board is one every member makes with the same sequence number:
that is when the board is made or joined, not at group creation.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from meshcomm import config, native
from meshcomm.algorithms.problem import Problem
from meshcomm.board import run as board_run
from meshcomm.board.segment import Board
from meshcomm.executor import fingerprint as fp
from meshcomm.rendezvous.store import PrefixStore


class Seat:
    """This rank's place at the board of one group (`ranks`, its `group_id`), made at its first board call."""

    def __init__(self, transport, store, ranks: tuple[int, ...], rank: int, group_id: int, group_name: str,
                 trace=None) -> None:
        self._transport = transport
        self._revoked = transport.revoked_groups  # the transport's own dict: a call checks it without a call
        self._store = store
        self._ranks = ranks
        self._rank = rank
        self._group_id = group_id
        self._group_name = group_name
        self._trace = trace
        self._on_one_host: bool | None = None  # every member shares memory with this rank (decided at first need)
        self._single_copy: bool | None = None  # and the host's ranks can read and write each other's memory
        self._board: Board | None = None

    @property
    def single_copy(self) -> bool:
        """Whether the board may take posts by reference: the same answer on every member."""
        if self._single_copy is None:
            self._single_copy = self._transport.reaches_memory_of(self._ranks)
        return self._single_copy

    def fits(self, problem: Problem, itemsize: int, algorithm: str) -> bool:
        """Whether this call runs on the board."""
        if algorithm not in board_run.ALGORITHMS or not board_run.fits(problem, itemsize, self.single_copy, algorithm):
            return False
        if self._on_one_host is None:
            self._on_one_host = self._transport.shares_memory_with(self._ranks)
        return self._on_one_host

    def run(self, plan, seq: int, buffers: dict, combine, timeout: float, overlapped: bool = False) -> None:
        """Run call `seq` on the board by the group's `plan` (its `board` plan, `fingerprint` and `algorithm`);
        the group calls this directly, as it runs a call as messages. `overlapped`: the caller goes on with its
        own work meanwhile (async_op), so no core is spare for spinning through the peers' copies."""
        transport = self._transport
        check_peers = self._ready(seq, timeout)
        trace = self._trace
        start = trace.now() if trace is not None else 0
        board_run.run(self._board, plan.board, seq, plan.fingerprint, buffers, combine, timeout,
                      transport.spin_seconds, not (transport.crowded or overlapped), check_peers, self._group_name,
                      self._ranks)
        if trace is not None:
            trace.complete("collective", plan.board.problem.collective, start, trace.now(),
                           {"group": self._group_name, "group_id": self._group_id, "seq": seq,
                            "algorithm": plan.algorithm, "call": fp.describe(plan.fingerprint), "board": True})

    def run_compiled(self, plan, seq: int, buffers: dict, combine, timeout: float, overlapped: bool = False) -> None:
        """run() for a call the compiled path takes (board_run.compiled_takes), untraced: straight to it."""
        check_peers = self._ready(seq, timeout)
        board_run.run_compiled(self._board, plan.board, seq, plan.fingerprint, buffers, combine, timeout,
                               self._transport.spin_seconds, check_peers, self._group_name, self._ranks)

    def lane(self, turns, plan, records, fallout, input_bytes: int, output_bytes: int, listed: int, timeout: float):
        """A compiled Lane for the repeats of a call the compiled path ran by the group's `plan` (group/lanes.py):
        `records` is the flight recorder's compiled ring; `listed` the side its runs take as a list of numpy arrays
        (native/blocks.c)."""
        transport = self._transport
        return native.core.Lane(turns, self._board.native, plan.board.native, transport, self._revoked,
                                self._group_id, records, self._group_name, plan.fingerprint, plan.algorithm,
                                self._ranks, self._check_peers, fallout, timeout, transport.spin_seconds,
                                input_bytes, output_bytes, listed, np.ndarray)

    def settler(self, plan):
        """settle(seq, buffers, combine, timeout, deadline, outcome): what a lane's run by `plan` answered other
        than success (board_run.settle), on the board the lane runs on, even if the group is closed meanwhile."""
        board, check_peers, name, ranks = self._board, self._check_peers, self._group_name, self._ranks

        def settle(seq: int, buffers: dict, combine, timeout: float, deadline: float, outcome) -> None:
            board_run.settle(board, plan.board, seq, plan.fingerprint, buffers, combine, timeout, deadline,
                             functools.partial(check_peers, seq=seq), name, ranks, outcome)

        return settle

    def _ready(self, seq: int, timeout: float):
        """Before call `seq`: nothing is posted after an abort or a revoke (what a message's send would raise), and the board
        is joined at the group's first call on it. Returns the call's liveness check, `check_peers(missing)`."""
        self._transport.raise_if_aborted()
        group_id, revoked = self._group_id, self._revoked
        if revoked and group_id in revoked:
            raise revoked[group_id]
        check_peers = functools.partial(self._check_peers, seq=seq)
        if self._board is None:
            self._join(timeout, check_peers)
        return check_peers

    def _check_peers(self, missing, seq: int) -> None:
        """Raise what makes waiting for call `seq` pointless, looking at the group's members `missing`."""
        self._transport.check_call([self._ranks[m] for m in missing], self._group_id, seq)

    def _join(self, timeout: float, check_peers) -> Board:
        """Make or map the group's board, at its first call on it."""
        transport = self._transport
        digest = hashlib.sha256(repr(self._ranks).encode()).hexdigest()[:16]
        self._board = Board.join(PrefixStore("meshcomm/board", self._store), f"{self._group_id}/{digest}",
                                 self._rank, len(self._ranks), board_run.SLOT_BYTES, transport.job, timeout,
                                 check_peers, board_run.STAGE_BYTES)
        if transport.crowded:
            # Every rank waits for every other on the board: with fewer cores than ranks, the one it waits
            # for runs sooner if it is handed the core than if it is woken from a futex.
            self._board.yield_seconds = max(config.get_int("MESHCOMM_YIELD_US") or 0, 0) / 1e6
        return self._board

    def close(self) -> None:
        if self._board is not None:
            self._board.close()
            self._board = None
