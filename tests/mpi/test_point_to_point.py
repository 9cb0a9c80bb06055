"""meshcomm.MPI point-to-point: statuses, request handles, generalized, persistent and matched receives, pkl5."""

from __future__ import annotations

import pickle
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.mpi.programs import HERE, run_program
from tests.ranks import run_command

REPO = Path(__file__).resolve().parents[2]


def test_a_status_exposes_its_fields_as_writable_memory() -> None:
    from meshcomm import MPI

    status = MPI.Status()
    status.source, status.tag, status.error = 11, 22, 33
    memory = status.tomemory()
    fields = list(memory)
    memory[fields.index(22)] = 222
    assert (status.source, status.tag, status.error) == (11, 222, 33)
    status.count = 12
    assert status.Get_count(MPI.INT) == 3 and status.Get_count(MPI.DOUBLE) == MPI.UNDEFINED
    copy = pickle.loads(pickle.dumps(status))
    assert (copy.source, copy.tag, copy.Get_count()) == (11, 222, 12)
    with pytest.raises(TypeError, match="Status"):
        MPI.Status(123)


def test_request_copies_name_one_operation_and_completing_nulls_only_the_completer() -> None:
    from meshcomm import MPI

    comm = MPI.COMM_SELF
    data = np.arange(4, dtype=np.int64)
    send = comm.Isend(data, 0, tag=2)
    alias = MPI.Request(send)
    assert alias == send and MPI.Request.fromhandle(send.handle) == send and send != MPI.REQUEST_NULL
    with pytest.raises(ValueError, match="cannot pickle"):
        pickle.dumps(send)
    got = np.zeros(4, dtype=np.int64)
    status = MPI.Status()
    comm.Recv(got, 0, 2, status)
    send.Wait()
    assert send == MPI.REQUEST_NULL and alias != MPI.REQUEST_NULL
    assert np.array_equal(got, data) and (status.source, status.tag, status.Get_count(MPI.INT64_T)) == (0, 2, 4)
    with pytest.raises(TypeError, match="cannot name"):
        MPI.Grequest(comm.Send_init(data, MPI.PROC_NULL))


def test_a_persistent_send_reads_its_buffer_at_each_start() -> None:
    from meshcomm import MPI

    comm = MPI.COMM_SELF
    out, into = np.zeros(3), np.zeros(3)
    send, receive = comm.Send_init(out, 0, 1), comm.Recv_init(into, 0, 1)
    for value in (1.5, -2.0, 7.0):
        out[:] = value
        MPI.Prequest.Startall([send, receive])
        assert MPI.Request.Waitany([send, receive]) in (0, 1)
        MPI.Request.Waitall([send, receive])
        assert (into == value).all()
        assert MPI.Request.Waitany([send, receive]) == MPI.UNDEFINED  # both inactive: nothing to wait for
    receive.Start()
    with pytest.raises(MPI.Exception, match="already active") as raised:
        receive.Start()
    assert raised.value.Get_error_class() == MPI.ERR_REQUEST
    receive.Cancel()
    status = MPI.Status()
    receive.Wait(status)
    assert status.Is_cancelled()
    send.Free()
    assert send == MPI.REQUEST_NULL


def test_a_matched_probe_takes_its_message_away_from_other_receives() -> None:
    from meshcomm import MPI

    comm = MPI.COMM_SELF.Dup()
    try:
        comm.send("first", 0, 4)
        comm.send("second", 0, 4)
        message = comm.mprobe(0, 4)
        assert comm.recv(None, 0, 4) == "second"  # the first is the Message's alone
        assert not comm.iprobe(0, 4)
        assert message.recv() == "first" and message == MPI.MESSAGE_NULL
        with pytest.raises(MPI.Exception, match="only once"):
            message.recv()
        nothing = comm.Mprobe(MPI.PROC_NULL)
        assert nothing == MPI.MESSAGE_NO_PROC and nothing.recv() is None and nothing == MPI.MESSAGE_NULL
        assert pickle.loads(pickle.dumps(MPI.MESSAGE_NO_PROC)) is MPI.MESSAGE_NO_PROC
        comm.Send(np.arange(6, dtype=np.int32), 0, 5)
        with pytest.raises(MPI.Exception, match="does not fit") as raised:
            comm.Mprobe(0, 5).Recv(np.zeros(2, dtype=np.int32))
        assert raised.value.Get_error_class() == MPI.ERR_TRUNCATE
    finally:
        comm.Free()


def test_a_generalized_request_queries_then_frees_when_completed() -> None:
    from meshcomm import MPI

    calls = []

    def query(status, label):
        calls.append(("query", label))
        status.Set_source(3)
        status.Set_tag(9)

    request = MPI.Grequest.Start(query, lambda label: calls.append(("free", label)),
                                 lambda completed, label: calls.append(("cancel", completed)), args=("x",))
    assert not request.Test() and calls == []
    request.Cancel()
    request.complete("done")
    status = MPI.Status()
    assert request.wait(status) == "done" and request == MPI.REQUEST_NULL
    assert calls == [("cancel", False), ("query", "x"), ("free", "x")]
    assert (status.source, status.tag) == (3, 9)
    failing = MPI.Grequest.Start(lambda status: 1 / 0)
    failing.Complete()
    with pytest.raises(MPI.Exception, match="ZeroDivisionError") as raised:
        failing.Wait()
    assert raised.value.Get_error_class() == MPI.ERR_OTHER


def test_partitions_arrive_in_any_order_and_never_meet_an_any_tag_receive() -> None:
    from meshcomm import MPI

    comm = MPI.COMM_SELF
    out = np.arange(12, dtype=np.float32)
    into = np.full(12, -1, dtype=np.float32)
    send, receive = comm.Psend_init(out, 4, 0, 6), comm.Precv_init(into, 4, 0, 6)
    receive.Start()
    send.Start()
    send.Pready_list([3, 1])
    assert comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG) is False  # partitions are not ordinary messages
    assert [receive.Parrived(j) for j in range(4)] == [False, True, False, True]
    assert (into[:3] == -1).all() and np.array_equal(into[9:], out[9:])
    send.Pready_range(0, 0)
    send.Pready(2)
    statuses = []
    MPI.Request.Waitall([send, receive], statuses)
    status = statuses[1]  # the receive's
    assert np.array_equal(into, out) and (status.source, status.tag, status.Get_count(MPI.FLOAT)) == (0, 6, 12)
    with pytest.raises(MPI.Exception, match="started") as raised:
        send.Pready(0)
    assert raised.value.Get_error_class() == MPI.ERR_REQUEST
    with pytest.raises(MPI.Exception, match="equal partitions"):
        comm.Psend_init(out, 5, 0, 6)


def test_pkl5_sends_large_buffers_in_pieces_of_the_block_size() -> None:
    from meshcomm import MPI
    from meshcomm.mpi.util import pkl5

    previous, pkl5._bigmpi = pkl5._bigmpi, pkl5._BigMPI(blocksize=64)
    previous_threshold, pkl5.pickle.THRESHOLD = pkl5.pickle.THRESHOLD, 1000
    try:
        comm = pkl5.Intracomm(MPI.COMM_SELF)
        payload = {"a": np.arange(1000, dtype=np.int32), "b": np.linspace(0, 1, 333), "c": np.zeros(10)}
        stream = pickle.dumps(payload, 5, buffer_callback=lambda b: b.raw().nbytes < 1000)
        request = comm.issend(payload, 0, 8)
        pieces = len(request._parts) - 1  # after the header
        # the stream (too big for the header) and the two big arrays, each cut into 64-byte pieces
        expected = -(-len(stream) // 64) + -(-4000 // 64) + -(-333 * 8 // 64)
        assert len(stream) > 64 and pieces == expected, (pieces, expected)
        status = MPI.Status()
        got = comm.recv(None, 0, 8, status)
        request.wait()
        assert all(np.array_equal(got[key], payload[key]) for key in payload) and got.keys() == payload.keys()
        assert (status.source, status.tag) == (0, 8)
        with pytest.raises(RuntimeError, match="irecv"):
            comm.irecv(None, 0, 8)
        with pytest.raises(MPI.Exception, match="root") as raised:
            comm.bcast(1, root=1)
        assert raised.value.Get_error_class() == MPI.ERR_ROOT
    finally:
        pkl5._bigmpi, pkl5.pickle.THRESHOLD = previous, previous_threshold


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [2, 3])
def test_matched_persistent_paired_and_pkl5_messages_between_ranks(nranks: int) -> None:
    run_program("p2p_program.py", nranks)


@pytest.mark.timeout(120)
def test_a_receive_from_a_rank_that_was_killed_fails_naming_it() -> None:
    command = [sys.executable, "-m", "meshcomm", "run", "-n", "3", "--timeout", "60", "--on-failure", "continue",
               str(HERE / "p2p_lost_program.py")]
    done = run_command(command, cwd=REPO, timeout=100)
    assert done.returncode == 0 and not done.timed_out, done.output[-4000:]
    assert "LOST 2 after" in done.stdout and sorted(re.findall(r"OK rank (\d)", done.stdout)) == ["0", "1"], \
        done.output[-4000:]
