"""Run by test_dynamic.py under `meshcomm run -n N`: Spawn, Accept/Connect, Join and published names.

The parent job spawns this file again (argument "child"); every value a rank
checks is computed here with numpy from ranks and sizes, independently of
the code under test.
"""

import fcntl
import glob
import os
import socket
import sys

import numpy as np

from meshcomm import MPI
from program_checks import raises

HERE = __file__


def children_of_this_process() -> list[int]:
    pids = []
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            with open(path) as listing:
                pids += [int(pid) for pid in listing.read().split()]
        except FileNotFoundError:  # that thread ended after the listing
            continue
    return pids


def values(n: int, seed: int) -> np.ndarray:
    return np.arange(n, dtype=np.float64) * 1.5 + seed


def child() -> None:
    world, parent = MPI.COMM_WORLD, MPI.Comm.Get_parent()
    rank, size = world.Get_rank(), world.Get_size()
    assert parent != MPI.COMM_NULL and parent.Is_inter() and parent.Get_size() == size
    appnum = world.Get_attr(MPI.APPNUM)
    if sys.argv[2] == "sum":
        data = np.empty(17)
        parent.Bcast(data, root=0)  # from the parent's root
        total = np.empty(17)
        world.Allreduce(data * (rank + 1), total, op=MPI.SUM)
        if rank == 0:
            parent.Send(total, dest=0, tag=5)
        merged = parent.Merge(high=True)
        assert merged.Get_rank() == parent.Get_remote_size() + rank, merged.Get_rank()
        merged_sum = merged.allreduce(merged.Get_rank(), op=MPI.SUM)
        assert merged_sum == sum(range(merged.Get_size())), merged_sum
        merged.Free()
    else:  # "where": say which command this process runs
        parent.gather((appnum, rank, size), root=0)
    parent.Disconnect()
    assert parent == MPI.COMM_NULL and MPI.Comm.Get_parent() == MPI.COMM_NULL


def parent() -> None:
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    root = MPI.ROOT if rank == 0 else MPI.PROC_NULL
    assert MPI.Comm.Get_parent() == MPI.COMM_NULL

    # ----- bad input: named, on every rank, before anything starts
    raises(MPI.ERR_PORT, MPI.Close_port, "meshcomm-port:127.0.0.1:1:ab")
    assert "is not a port name" in raises(MPI.ERR_PORT, MPI.COMM_SELF.Connect, "not-a-port")
    raises(MPI.ERR_NAME, MPI.Lookup_name, f"nobody-{rank}")
    assert "nothing answers" in raises(MPI.ERR_PORT, MPI.COMM_SELF.Connect, "meshcomm-port:127.0.0.1:1:ab")
    text = raises(MPI.ERR_SPAWN, world.Spawn, "/nonexistent/meshcomm-child", None, 1)
    assert "/nonexistent/meshcomm-child" in text, text
    text = raises(MPI.ERR_SPAWN, world.Spawn, sys.executable, ["-c", "raise SystemExit(3)"], 2)
    assert "exited with code 3 before its job connected" in text, text
    # One child fails at once: the Spawn fails, and the other child, still starting, is stopped with it.
    text = raises(MPI.ERR_SPAWN, world.Spawn_multiple, [sys.executable] * 2,
                  [[HERE, "child", "where"], ["-c", "raise SystemExit(4)"]], [1, 1])
    assert "exited with code 4" in text, text
    assert children_of_this_process() == [], children_of_this_process()
    read_end, write_end = os.pipe()
    assert "is not a socket" in raises(MPI.ERR_ARG, MPI.Comm.Join, read_end)
    os.close(read_end)
    os.close(write_end)
    if rank == 0:
        try:
            world.Spawn_multiple([sys.executable], [[HERE]] * 2, 1)
            raise AssertionError("Spawn_multiple took two args for one command")
        except ValueError as exc:
            assert "one entry per command" in str(exc), exc
    else:
        raises(MPI.ERR_ARG, world.Spawn_multiple, None, None, -1)

    # ----- published names
    port = MPI.Open_port()
    assert port.startswith("meshcomm-port:") and len(port) <= MPI.MAX_PORT_NAME
    MPI.Publish_name(f"svc-{rank}", port)
    assert MPI.Lookup_name(f"svc-{rank}") == port
    raises(MPI.ERR_SERVICE, MPI.Unpublish_name, f"svc-{rank}", "meshcomm-port:x:1:y")
    MPI.Unpublish_name(f"svc-{rank}", port)
    raises(MPI.ERR_NAME, MPI.Lookup_name, f"svc-{rank}")
    MPI.Close_port(port)

    # ----- Spawn: the children reduce what the parents' root sends, and merge with the parents
    errcodes = []
    children = world.Spawn(sys.executable, [HERE, "child", "sum"], size + 1, root=0, errcodes=errcodes)
    assert errcodes == [MPI.SUCCESS] * (size + 1), errcodes
    assert (children.Get_size(), children.Get_remote_size()) == (size, size + 1)
    children.Bcast(values(17, 3) if rank == 0 else None, root=root)
    if rank == 0:
        total = np.empty(17)
        children.Recv(total, source=0, tag=5)
        expected = values(17, 3) * sum(range(1, size + 2))
        assert np.array_equal(total, expected), (total, expected)
    merged = children.Merge(high=False)
    assert merged.Get_rank() == rank and merged.Get_size() == 2 * size + 1
    assert merged.allreduce(merged.Get_rank(), op=MPI.SUM) == sum(range(2 * size + 1))
    merged.Free()
    children.Disconnect()
    assert children == MPI.COMM_NULL

    # ----- Spawn_multiple from each rank alone: two commands, one job, APPNUM says which
    codes = []
    children = MPI.COMM_SELF.Spawn_multiple([sys.executable] * 2, [[HERE, "child", "where"]] * 2, [1, 2],
                                            errcodes=codes)
    assert codes == [[MPI.SUCCESS], [MPI.SUCCESS] * 2], codes
    where = children.gather(None, root=MPI.ROOT)
    assert where == [(0, 0, 3), (1, 1, 3), (1, 2, 3)], where
    children.Disconnect()

    # ----- a command that runs Python as a child of its own (a shell that stays): the child must not take the
    # shell for a dead parent
    shell = f"{sys.executable} {HERE} child where; true"
    children = MPI.COMM_SELF.Spawn("/bin/sh", ["-c", shell], 1)
    assert children.gather(None, root=MPI.ROOT) == [(0, 0, 1)]
    children.Disconnect()

    if size < 2:
        return
    # ----- Accept/Connect: rank 0 alone accepts the other ranks' group
    others = world.Split(0 if rank == 0 else 1, rank)
    if rank == 0:
        port = MPI.Open_port()
        world.send(port, dest=1)
        inter = MPI.COMM_SELF.Accept(port)
        MPI.Close_port(port)
        assert (inter.Get_size(), inter.Get_remote_size()) == (1, size - 1)
        got = np.empty(size - 1, dtype=np.int64)
        for r in range(size - 1):
            inter.Recv(got[r:r + 1], source=r, tag=r)
        assert np.array_equal(got, np.arange(1, size) ** 2), got
    else:
        port = world.recv(source=0) if rank == 1 else None
        inter = others.Connect(port, root=0)
        assert (inter.Get_size(), inter.Get_remote_size()) == (size - 1, 1)
        inter.Send(np.array([rank * rank], dtype=np.int64), dest=0, tag=inter.Get_rank())
    inter.Free()
    others.Free()

    # ----- Join: ranks 0 and 1 over a socket of their own
    if rank == 0:
        server = socket.create_server(("127.0.0.1", 0))
        world.send(server.getsockname(), dest=1)
        sock = server.accept()[0]
        server.close()
    elif rank == 1:
        sock = socket.create_connection(world.recv(source=0))
    if rank in (0, 1):
        socket.setdefaulttimeout(30.0)  # Python would make a socket object built on the fd non-blocking
        joined = MPI.Comm.Join(sock.fileno())
        socket.setdefaulttimeout(None)
        assert not fcntl.fcntl(sock.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK, "Join left the socket non-blocking"
        assert (joined.Get_size(), joined.Get_remote_size()) == (1, 1)
        mine = values(5, rank)
        theirs = np.empty(5)
        joined.Sendrecv(mine, dest=0, recvbuf=theirs, source=0)
        assert np.array_equal(theirs, values(5, 1 - rank)), theirs
        sock.sendall(b"x")  # the socket is still the caller's
        assert sock.recv(1) == b"x"
        sock.close()
        joined.Disconnect()
    world.Barrier()


if sys.argv[1:2] == ["child"]:
    child()
else:
    parent()
    print(f"OK rank {MPI.COMM_WORLD.Get_rank()} of {MPI.COMM_WORLD.Get_size()}", flush=True)
