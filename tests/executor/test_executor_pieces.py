"""The executor's pieces and slots, run between two real ranks on hand-written schedules.

A message larger than the chunk size travels as pieces; pieces to be reduced
land in a few slots used in turn. These schedules are built to stress the
order in which receives are posted: a step that receives twice from the same
peer must post every piece in listed order, or a piece would be matched to
the wrong receive.
"""

from __future__ import annotations

import numpy as np

from meshcomm.algorithms.schedule import Recv, RecvReduce, Schedule, Send, Slice
from meshcomm.executor import executor
from meshcomm.executor.reduce_ops import combiner
from tests.ranks import get_cluster

CHUNK = 4096  # bytes: small pieces, so each message below is many of them
COUNT = 10_000  # float32 elements per message: 10 pieces, more than the executor's slots


def _run(schedule: Schedule, buffers: dict) -> None:
    from meshcomm.api.state import runtime

    rt = runtime()
    call = executor.Execution(
        schedule=schedule, buffers=buffers, combine=combiner("sum", np.dtype(np.float32), None), peers=[0, 1],
        group_id=999, group_name="hand-written", seq=0, fingerprint=bytes(16), chunk_bytes=CHUNK, timeout=30,
    )
    executor.run(call, rt.transport)


def two_messages_one_reduced() -> bool:
    """Rank 0 sends A then B; rank 1 reduces A into its output and receives B as is, in one step."""
    import meshcomm as dist

    rank = dist.get_rank()
    first = np.arange(COUNT, dtype=np.float32)
    second = np.full(COUNT, -3, dtype=np.float32)
    if rank == 0:
        data = np.concatenate([first, second])
        step = (Send(1, Slice("input", 0, COUNT)), Send(1, Slice("input", COUNT, COUNT)))
        _run(Schedule("hand", "two_messages", 0, 2, (step,)), {"input": data, "output": np.empty(0, np.float32)})
        return True
    output = np.ones(2 * COUNT, dtype=np.float32)
    step = (RecvReduce(0, Slice("output", 0, COUNT)), Recv(0, Slice("output", COUNT, COUNT)))
    _run(Schedule("hand", "two_messages", 1, 2, (step,)), {"input": np.empty(0, np.float32), "output": output})
    return bool(np.array_equal(output[:COUNT], first + 1) and np.array_equal(output[COUNT:], second))


def one_message_many_pieces_reduced() -> bool:
    """One large reduced message: every piece goes through the slots in turn."""
    import meshcomm as dist

    rank = dist.get_rank()
    if rank == 0:
        data = np.arange(COUNT, dtype=np.float32)
        step = (Send(1, Slice("input", 0, COUNT)),)
        _run(Schedule("hand", "one_message", 0, 2, (step,)), {"input": data, "output": np.empty(0, np.float32)})
        return True
    output = np.full(COUNT, 2, dtype=np.float32)
    step = (RecvReduce(0, Slice("output", 0, COUNT)),)
    _run(Schedule("hand", "one_message", 1, 2, (step,)), {"input": np.empty(0, np.float32), "output": output})
    return bool(np.array_equal(output, np.arange(COUNT, dtype=np.float32) + 2))


def test_a_step_receiving_twice_from_one_peer_matches_every_piece_to_its_receive() -> None:
    assert all(get_cluster(2).run(two_messages_one_reduced))


def test_a_reduced_message_of_many_pieces_is_reduced_piece_by_piece() -> None:
    assert all(get_cluster(2).run(one_message_many_pieces_reduced))


def _ops_and_pieces(collective: str, counts: tuple, algorithm: str) -> tuple[int, int]:
    """Rank 0's messages in its schedule, and the pieces its compiled plan moves them in."""
    from meshcomm.algorithms import get_schedule
    from meshcomm.algorithms.problem import Problem

    schedule = get_schedule(Problem(collective, 2, counts), 0, algorithm)
    ops = sum(isinstance(op, (Send, Recv, RecvReduce)) for step in schedule.steps for op in step)
    pieces = 0
    for step in executor._plan(schedule, 4, CHUNK):
        pieces += sum(kind != executor._RECV_REDUCE for kind, *_ in step.comms)
        pieces += sum(len(recv_reduce[2]) for recv_reduce in step.recv_reduces)
    return ops, pieces


def test_all_gather_and_all_to_all_send_whole_messages_and_other_collectives_cut_them() -> None:
    """all_gather's and all_to_all's steps exchange, so their large messages go by reference
    and travel whole; a broadcast's (streamed) and an all_reduce's (reduced) are cut to the chunk size."""
    assert _ops_and_pieces("all_gather", (COUNT, COUNT), "ring") == (2, 2)
    assert _ops_and_pieces("all_to_all", (COUNT,) * 4, "pairwise") == (2, 2)
    assert _ops_and_pieces("broadcast", (COUNT,), "binomial") == (1, 10)
    assert _ops_and_pieces("all_reduce", (2 * COUNT,), "ring") == (4, 40)
