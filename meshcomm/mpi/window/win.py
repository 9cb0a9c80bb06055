"""MPI.Win: a window of memory that other ranks read and write (Put, Get, Accumulate, ...) without a matching call.

Each window has its own communicator (a Dup of the one it was made on), so
its messages never meet the program's. An origin sends each operation to
the target's window thread (target.py) as one message; operations that
fetch (Get, Get_accumulate, Fetch_and_op, Compare_and_swap) and the
synchronisation requests (Flush, Lock, Unlock) are answered. The target
applies one origin's requests in the order sent, so an answer also says
that everything that origin sent before it is done: Flush, Unlock and
Fence end with such an answer from every target written since. Fence adds a
barrier; Post/Start/Complete/Wait exchange small notices on the window's
communicator. Every wait is bounded by the communicator's timeout.
"""

from __future__ import annotations

import numpy as np

from meshcomm.mpi import constants as C
from meshcomm.mpi import datatypes
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import messages as msg
from meshcomm.mpi import ops
from meshcomm.mpi.buffer import buffer
from meshcomm.mpi.handles import NamesState
from meshcomm.mpi.request import Request
from meshcomm.mpi.window import constants as W
from meshcomm.mpi.window import protocol as P
from meshcomm.mpi.window.memory import Memory, address_of
from meshcomm.mpi.window.shared import SharedMemory
from meshcomm.mpi.window.target import LocalReply, TargetThread

# Post's notice uses a tag above every reply tag.
_LAST_REPLY_TAG = 2**30
_POST_TAG = _LAST_REPLY_TAG + 1
_LOCK_KINDS = {W.LOCK_EXCLUSIVE: P.EXCLUSIVE_LOCK, W.LOCK_SHARED: P.SHARED_LOCK}


class _Pending:
    """An origin's request waiting for its answer; settling it checks the answer and hands over what came back.

    It is also what a request-based operation's MPI.Request waits on (the
    Work-like `wait`, `is_completed`, `exception` and `message`).
    """

    def __init__(self, target: TargetThread, posted, what: str, timeout: float, deliver=None) -> None:
        self.posted = posted  # the mailbox receive of the answer, or a LocalReply
        self._target = target
        self._what = what
        self._timeout = timeout
        self._deliver = deliver  # (fetched bytes) -> None
        self._settled = False

    def wait(self) -> None:
        self._target.wait(lambda: self.posted.done, self._what, self._timeout)

    def is_completed(self) -> bool:
        return self.posted.done

    def exception(self) -> None:
        return None  # a failure at the target is raised by settle, when the request is completed

    @property
    def message(self):
        return self.posted.message

    def settle(self, message=None) -> None:
        """Wait for the answer and act on it, once (a Request completing passes `message`; it is ours too)."""
        if self._settled:
            return
        self.wait()
        self._settled = True
        error_class, rest = P.read_reply(self.posted.message.payload)
        if error_class:
            raise err.Exception(error_class, f"{self._what}: {bytes(rest).decode(errors='replace')}")
        if self._deliver is not None:
            self._deliver(rest)


class _State:
    """Everything a live window holds on this rank."""

    def __init__(self, comm, memory: Memory, flavor: int, exposed, shared: SharedMemory | None) -> None:
        self.comm = comm  # the window's own communicator
        self.mailbox = comm._g.mailbox
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.memory = memory
        self.flavor = flavor
        self.exposed = exposed  # what tomemory() hands back: the caller's object, or our own bytes
        self.shared = shared
        table = comm.allgather((memory.region.size, memory.disp_unit))
        self.sizes = [size for size, _ in table]
        self.disp_units = [unit for _, unit in table]
        self.target = TargetThread(self.mailbox, memory, comm._g.group_name, self.rank)
        self.timeout = comm._g.timeout
        self.name = ""
        self.attached: dict[int, object] = {}  # address -> the caller's object, kept alive while attached
        self.next_tag = P.FIRST_REPLY_TAG
        self.pending: dict[int, list] = {}  # target -> its unsettled _Pending
        self.unconfirmed: set[int] = set()  # targets sent a request that is not answered since
        self.fence_open = False
        self.locks: dict[int, int] = {}  # target -> LOCK_EXCLUSIVE or LOCK_SHARED
        self.lock_all = False
        self.access: list[int] | None = None  # the targets of a Start, until Complete
        self.exposure: list[int] | None = None  # the origins of a Post, until Wait or Test


class Win(NamesState):
    """A window for one-sided communication; WIN_NULL when it has none."""

    _names = "_state"

    def _build(self, win: "Win | None" = None) -> None:
        if win is not None and not isinstance(win, Win):
            raise TypeError(f"Win() takes a Win to share, got {type(win).__name__}")
        self._state: _State | None = None if win is None else win._state

    @property
    def _s(self) -> _State:
        if self._state is None:
            raise err.Exception(err.ERR_WIN, "this is WIN_NULL (or a freed window)")
        return self._state

    def __reduce__(self):
        if self._state is None:
            return "WIN_NULL" if self is WIN_NULL else (type(self), ())
        raise ValueError("a window is memory of this job's ranks and cannot be pickled")

    def __repr__(self) -> str:
        return f"<meshcomm.MPI.Win {self.Get_name()}>"

    # ----- creation and destruction

    @classmethod
    def Create(cls, memory, disp_unit: int = 1, info=None, comm=None) -> "Win":
        """Expose the caller's `memory` (a writable buffer, or BOTTOM/None for nothing) to the ranks of `comm`."""
        comm = _intracomm(comm)
        disp_unit = _disp_unit(disp_unit)
        region = msg._raw(None if memory is msg.BOTTOM else memory, "memory", writable=True)[0]
        return cls._made(comm, Memory(region, disp_unit), W.WIN_FLAVOR_CREATE, memory)

    @classmethod
    def Allocate(cls, size: int, disp_unit: int = 1, info=None, comm=None) -> "Win":
        """A window over `size` new bytes on each rank."""
        comm = _intracomm(comm)
        size, disp_unit = _size(size), _disp_unit(disp_unit)
        region = np.zeros(size, dtype=np.uint8)
        return cls._made(comm, Memory(region, disp_unit), W.WIN_FLAVOR_ALLOCATE, region)

    @classmethod
    def Allocate_shared(cls, size: int, disp_unit: int = 1, info=None, comm=None) -> "Win":
        """A window over new bytes in memory every rank of `comm` (all on one host) can load and store directly."""
        comm = _intracomm(comm)
        size, disp_unit = _size(size), _disp_unit(disp_unit)
        wincomm = comm.Dup()
        try:
            shared = SharedMemory.allocate(wincomm, [int(s) for s in wincomm.allgather(size)])
        except BaseException:
            wincomm.Free()
            raise
        region = shared.parts[wincomm.Get_rank()]
        region[...] = 0
        win = cls()
        win._state = _State(wincomm, Memory(region, disp_unit), W.WIN_FLAVOR_SHARED, region, shared)
        return win

    @classmethod
    def Create_dynamic(cls, info=None, comm=None) -> "Win":
        """A window exposing no memory until Attach; targets are addressed by MPI.Get_address of attached memory."""
        comm = _intracomm(comm)
        return cls._made(comm, Memory(None, 1), W.WIN_FLAVOR_DYNAMIC, None)

    @classmethod
    def _made(cls, comm, memory: Memory, flavor: int, exposed) -> "Win":
        win = cls()
        win._state = _State(comm.Dup(), memory, flavor, exposed, None)
        return win

    def Attach(self, memory) -> None:
        s = self._s
        if s.flavor != W.WIN_FLAVOR_DYNAMIC:
            raise err.Exception(err.ERR_RMA_FLAVOR, "Attach needs a window made by Create_dynamic")
        region = msg._raw(memory, "memory", writable=True)[0]
        s.memory.attach(region)
        s.attached[address_of(region)] = memory

    def Detach(self, memory) -> None:
        s = self._s
        if s.flavor != W.WIN_FLAVOR_DYNAMIC:
            raise err.Exception(err.ERR_RMA_FLAVOR, "Detach needs a window made by Create_dynamic")
        region = msg._raw(memory, "memory", writable=True)[0]
        s.memory.detach(region)
        s.attached.pop(address_of(region), None)

    def Free(self) -> None:
        """Collective: finish every operation this rank started, wait for the others, stop serving the window."""
        s = self._s
        if s.locks or s.lock_all or s.access is not None or s.exposure is not None:
            raise err.Exception(err.ERR_RMA_SYNC, "Free with a lock held or a Post/Start epoch still open")
        self._confirm(list(s.pending) + list(s.unconfirmed))
        s.comm.Barrier()  # after it no origin sends this rank another request
        s.target.stop(s.comm._g.timeout)
        s.comm.Free()
        if s.shared is not None:
            s.shared.close()
        self._state = None

    # ----- identity and attributes

    def Get_group(self):
        return self._s.comm.Get_group()

    group = property(Get_group)
    group_size = property(lambda self: self._s.size)
    group_rank = property(lambda self: self._s.rank)

    def Get_name(self) -> str:
        return "MPI_WIN_NULL" if self._state is None else self._state.name

    def Set_name(self, name: str) -> None:
        self._s.name = str(name)

    name = property(Get_name, Set_name)

    def Get_attr(self, keyval: int):
        """WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL; None for any other key."""
        s = self._s
        memory = s.memory
        values = {
            W.WIN_BASE: address_of(memory.region), W.WIN_SIZE: int(memory.region.size),
            W.WIN_DISP_UNIT: memory.disp_unit, W.WIN_CREATE_FLAVOR: s.flavor, W.WIN_MODEL: W.WIN_UNIFIED,
        }
        return values.get(keyval)

    attrs = property(lambda self: tuple(self.Get_attr(k) for k in (W.WIN_BASE, W.WIN_SIZE, W.WIN_DISP_UNIT)))
    flavor = property(lambda self: self.Get_attr(W.WIN_CREATE_FLAVOR))
    model = property(lambda self: self.Get_attr(W.WIN_MODEL))

    def tomemory(self) -> buffer:
        """This rank's window memory as an MPI.buffer (empty, at address 0, for a dynamic window)."""
        s = self._s
        region = s.memory.region
        return buffer._nothing() if s.memory.dynamic else buffer._over(region, s.exposed)

    def Shared_query(self, rank: int) -> tuple[buffer, int]:
        """(rank's part of a shared window, its displacement unit); PROC_NULL: the first part with any bytes."""
        s = self._s
        if s.flavor != W.WIN_FLAVOR_SHARED:
            raise err.Exception(err.ERR_RMA_FLAVOR, "Shared_query needs a window made by Allocate_shared")
        if rank == C.PROC_NULL:
            rank = next((r for r in range(s.size) if s.sizes[r]), 0)
        rank = _rank(rank, s.size, "rank")
        return buffer._over(s.shared.parts[rank], s.exposed), s.disp_units[rank]

    # ----- communication

    def Put(self, origin, target_rank: int, target=None) -> None:
        """Write the origin buffer into the target's window."""
        self._put(origin, target_rank, target)

    def Rput(self, origin, target_rank: int, target=None) -> Request:
        """Put, with a request that completes when the origin buffer may be reused (at once: it is copied)."""
        self._put(origin, target_rank, target)
        return Request.completed()

    def Get(self, origin, target_rank: int, target=None) -> None:
        """Read the target's window into the origin buffer (filled by the next synchronisation)."""
        self._get(origin, target_rank, target)

    def Rget(self, origin, target_rank: int, target=None) -> Request:
        return self._request(self._get(origin, target_rank, target))

    def Accumulate(self, origin, target_rank: int, target=None, op=ops.SUM) -> None:
        """target = target (op) origin, elementwise and atomically per element, with a predefined op."""
        self._accumulate(origin, None, target_rank, target, op)

    def Raccumulate(self, origin, target_rank: int, target=None, op=ops.SUM) -> Request:
        self._accumulate(origin, None, target_rank, target, op)
        return Request.completed()

    def Get_accumulate(self, origin, result, target_rank: int, target=None, op=ops.SUM) -> None:
        """Accumulate, fetching the target's values from before it into `result`."""
        self._accumulate(origin, result, target_rank, target, op)

    def Rget_accumulate(self, origin, result, target_rank: int, target=None, op=ops.SUM) -> Request:
        return self._request(self._accumulate(origin, result, target_rank, target, op))

    def Fetch_and_op(self, origin, result, target_rank: int, target_disp: int = 0, op=ops.SUM) -> None:
        """Get_accumulate of one element."""
        source = msg.read_spec(origin, "origin")
        fetched = msg.read_spec(result, "result", writable=True)
        if target_rank == C.PROC_NULL:
            return
        _single(source, "origin")
        _single(fetched, "result")
        if source.datatype != fetched.datatype:
            raise ValueError("mismatch in origin and result MPI datatypes")
        self._accumulate(origin, result, target_rank, target_disp, op)

    def Compare_and_swap(self, origin, compare, result, target_rank: int, target_disp: int = 0) -> None:
        """Atomically: result = target; if target == compare, target = origin. One element each."""
        specs = [msg.read_spec(origin, "origin"), msg.read_spec(compare, "compare"),
                 msg.read_spec(result, "result", writable=True)]
        if target_rank == C.PROC_NULL:
            return
        for spec, name in zip(specs, ("origin", "compare", "result")):
            _single(spec, name)
        if not specs[0].datatype == specs[1].datatype == specs[2].datatype:
            raise ValueError("mismatch in origin, compare and result MPI datatypes")
        t = self._target_rank(target_rank)
        dtype = specs[0].array.dtype
        disp = _index(target_disp, "target_disp")
        self._check_range(t, disp, dtype.itemsize)
        self._ask(t, "Compare_and_swap", _delivery(specs[2]), P.COMPARE_AND_SWAP, disp=disp, nbytes=dtype.itemsize,
                  dtype=dtype, data=(specs[0].array, specs[1].array))

    def _put(self, origin, target_rank: int, target) -> None:
        source = msg.read_spec(origin, "origin")
        t = self._target_rank(target_rank)
        if t is None:
            return
        disp, nbytes, dtype = self._target(target, source, t, "Put")
        self._tell(t, P.encode(P.PUT, 0, disp, nbytes, dtype, (source.array,)))

    def _get(self, origin, target_rank: int, target) -> _Pending | None:
        into = msg.read_spec(origin, "origin", writable=True)
        t = self._target_rank(target_rank)
        if t is None:
            return None
        disp, nbytes, dtype = self._target(target, into, t, "Get")
        return self._ask(t, "Get", _delivery(into), P.GET, disp=disp, nbytes=nbytes, dtype=dtype)

    def _accumulate(self, origin, result, target_rank: int, target, op) -> _Pending | None:
        op = ops.resolve(op)
        if op.name not in P.OP_NAMES:
            raise err.Exception(err.ERR_OP, f"one-sided accumulation takes a predefined op, not {op.name}")
        source = msg.read_spec(origin, "origin")
        fetched = None if result is None else msg.read_spec(result, "result", writable=True)
        t = self._target_rank(target_rank)
        if t is None:
            return None
        # NO_OP reads the target only: its origin may be empty, the result then says how much.
        shape = fetched if op is ops.NO_OP and source.array.size == 0 and fetched is not None else source
        disp, nbytes, dtype = self._target(target, shape, t, "Accumulate")
        if op is not ops.NO_OP and source.array.dtype != dtype:
            raise err.Exception(err.ERR_TYPE, f"origin elements are {source.datatype.name}, target elements "
                                              f"{dtype}: accumulation needs one element type")
        if fetched is not None and fetched.array.nbytes != nbytes:
            raise err.Exception(err.ERR_COUNT, f"result holds {fetched.array.nbytes} bytes, the target "
                                               f"region {nbytes}")
        data = () if op is ops.NO_OP else (source.array,)
        code = P.OP_NAMES.index(op.name)
        if fetched is None:
            self._tell(t, P.encode(P.ACCUMULATE, 0, disp, nbytes, dtype, data, op=code))
            return None
        return self._ask(t, "Get_accumulate", _delivery(fetched), P.GET_ACCUMULATE, disp=disp, nbytes=nbytes,
                         dtype=dtype, data=data, op=code)

    def _request(self, pending: _Pending | None) -> Request:
        if pending is None:
            return Request.completed(None, C.PROC_NULL)
        return Request(self._s.mailbox, pending, pending.settle)

    # ----- the origin's side of the conversation

    def _target_rank(self, rank) -> int | None:
        """The target's rank, None for PROC_NULL; ERR_RMA_SYNC outside an epoch that allows it."""
        s = self._s
        if rank == C.PROC_NULL:
            return None
        t = _rank(rank, s.size, "target_rank")
        if not (s.fence_open or s.lock_all or t in s.locks or (s.access is not None and t in s.access)):
            raise err.Exception(err.ERR_RMA_SYNC, f"no access epoch to rank {t} is open: call Fence, Lock, "
                                                  f"Lock_all or Start first")
        return t

    def _target(self, target, origin: msg.Spec, t: int, what: str) -> tuple[int, int, np.dtype]:
        """(displacement, bytes, element dtype) at the target from mpi4py's target spec; checks the range."""
        disp, count, datatype = 0, origin.array.size, origin.datatype
        if target is None:
            pass
        elif isinstance(target, (int, np.integer)) and not isinstance(target, bool):
            disp = int(target)
        elif isinstance(target, (list, tuple)):
            if len(target) > 3:
                raise ValueError("target: expecting 3 items at most")
            if len(target) >= 1:
                disp = _index(target[0], "target displacement")
            if len(target) >= 2:
                count = _index(target[1], "target count")
            if len(target) == 3:
                datatype = datatypes.resolve(target[2])
        else:
            raise ValueError("target: expecting integral or list/tuple")
        dtype = datatype.dtype
        if dtype is None or datatype.Get_size() != datatype.Get_extent()[1] or datatype.Get_extent()[0] != 0:
            raise err.Exception(err.ERR_TYPE, f"target datatype {datatype.Get_name()} is not contiguous "
                                              f"elements of one type, which windows need")
        nbytes = count * datatype.Get_size()
        if nbytes != origin.array.nbytes:
            raise err.Exception(err.ERR_COUNT, f"{what}: the origin holds {origin.array.nbytes} bytes, the "
                                               f"target region {nbytes} ({count} x {datatype.Get_name()})")
        self._check_range(t, disp, nbytes)
        return disp, nbytes, dtype

    def _check_range(self, t: int, disp: int, nbytes: int) -> None:
        """ERR_RMA_RANGE before anything is sent, when the target's window (not dynamic) cannot hold it."""
        s = self._s
        if s.flavor == W.WIN_FLAVOR_DYNAMIC:
            return
        start = disp * s.disp_units[t]
        if disp < 0 or start + nbytes > s.sizes[t]:
            raise err.Exception(err.ERR_RMA_RANGE, f"{nbytes} bytes at displacement {disp} do not fit rank {t}'s "
                                                   f"window of {s.sizes[t]} bytes (unit {s.disp_units[t]})")

    def _tell(self, t: int, frame: bytearray) -> None:
        """Send a request that is not answered; the next answer from `t` confirms it.

        The mailbox copies the frame and the window's thread drives the transport, so the send needs no wait.
        """
        s = self._s
        if t == s.rank:
            s.target.serve_local(P.decode(memoryview(frame)))
            return
        s.mailbox.send(t, P.REQUEST_TAG, frame)
        s.unconfirmed.add(t)

    def _ask(self, t: int, what: str, deliver, kind: int, **fields) -> _Pending:
        """Send a request whose answer is awaited; it confirms every earlier request to `t`."""
        s = self._s
        tag = s.next_tag
        s.next_tag = tag + 1 if tag + 1 < _LAST_REPLY_TAG else P.FIRST_REPLY_TAG
        frame = P.encode(kind, tag, **fields)
        if t == s.rank:
            pending = _Pending(s.target, LocalReply(), f"{what} at rank {t}", s.timeout, deliver)
            s.target.serve_local(P.decode(memoryview(frame)), pending.posted)
        else:
            pending = _Pending(s.target, s.mailbox.recv(t, tag), f"{what} at rank {t}", s.timeout, deliver)
            s.mailbox.send(t, P.REQUEST_TAG, frame)
        s.pending.setdefault(t, []).append(pending)
        s.unconfirmed.discard(t)
        return pending

    def _confirm(self, targets) -> None:
        """Wait until every request sent to `targets` is done there (asking a Flush of those not yet answered)."""
        s = self._s
        for t in set(targets) & s.unconfirmed:
            self._ask(t, "Flush", None, P.FLUSH)
        self._settle(targets)

    def _settle(self, targets) -> None:
        s = self._s
        first_error = None
        for t in set(targets):
            for item in s.pending.pop(t, []):
                try:
                    item.settle()
                except err.Exception as exc:  # settle the rest first, so nothing is left half done
                    first_error = first_error or exc
        if first_error is not None:
            raise first_error

    # ----- synchronisation

    def Fence(self, assertion: int = 0) -> None:
        """Collective: every operation of the epoch is done everywhere; a new epoch opens unless MODE_NOSUCCEED."""
        s = self._s
        _assertion(assertion)
        self._confirm(list(s.pending) + list(s.unconfirmed))
        s.comm.Barrier()
        s.fence_open = not assertion & W.MODE_NOSUCCEED

    def Lock(self, rank: int, lock_type: int = W.LOCK_EXCLUSIVE, assertion: int = 0) -> None:
        """Begin an access epoch to `rank`, waiting until the target grants the lock."""
        s = self._s
        _assertion(assertion)
        if lock_type not in _LOCK_KINDS:
            raise err.Exception(err.ERR_LOCKTYPE, f"lock_type must be LOCK_EXCLUSIVE or LOCK_SHARED, got {lock_type}")
        if rank == C.PROC_NULL:
            return
        t = _rank(rank, s.size, "rank")
        if t in s.locks or s.lock_all:
            raise err.Exception(err.ERR_RMA_SYNC, f"rank {t} is already locked by this rank")
        self._ask(t, "Lock", None, P.LOCK, lock=_LOCK_KINDS[lock_type]).settle()
        s.locks[t] = lock_type

    def Unlock(self, rank: int) -> None:
        """End the access epoch to `rank`: its operations are done there, and the lock is released."""
        s = self._s
        if rank == C.PROC_NULL:
            return
        t = _rank(rank, s.size, "rank")
        if t not in s.locks:
            raise err.Exception(err.ERR_RMA_SYNC, f"rank {t} is not locked by this rank")
        lock = _LOCK_KINDS[s.locks.pop(t)]
        self._ask(t, "Unlock", None, P.UNLOCK, lock=lock)
        self._settle([t])

    def Lock_all(self, assertion: int = 0) -> None:
        """A shared lock on every rank of the window."""
        s = self._s
        _assertion(assertion)
        if s.locks or s.lock_all:
            raise err.Exception(err.ERR_RMA_SYNC, "Lock_all while this rank holds a lock")
        waits = [self._ask(t, "Lock_all", None, P.LOCK, lock=P.SHARED_LOCK) for t in range(s.size)]
        for pending in waits:
            pending.settle()
        s.lock_all = True

    def Unlock_all(self) -> None:
        s = self._s
        if not s.lock_all:
            raise err.Exception(err.ERR_RMA_SYNC, "Unlock_all without Lock_all")
        s.lock_all = False
        for t in range(s.size):
            self._ask(t, "Unlock_all", None, P.UNLOCK, lock=P.SHARED_LOCK)
        self._settle(range(s.size))

    def Flush(self, rank: int) -> None:
        """Every operation this rank started on `rank` is done there."""
        if rank != C.PROC_NULL:
            self._confirm([_rank(rank, self._s.size, "rank")])

    def Flush_all(self) -> None:
        self._confirm(range(self._s.size))

    # Local completion is no sooner than remote completion here: the buffers are free once the answer is in.
    Flush_local, Flush_local_all = Flush, Flush_all

    def Sync(self) -> None:
        """The window's memory is one copy (WIN_UNIFIED), so there are no public and private copies to join."""
        if self._state is None:
            raise err.Exception(err.ERR_WIN, "Sync on WIN_NULL (or a freed window)")

    def Post(self, group, assertion: int = 0) -> None:
        """Begin an exposure epoch to the ranks of `group`: they may Start."""
        s = self._s
        _assertion(assertion)
        if s.exposure is not None:
            raise err.Exception(err.ERR_RMA_SYNC, "Post while an exposure epoch is open: call Wait first")
        origins = self._members(group)
        s.exposure = origins
        for o in origins:
            s.mailbox.send(o, _POST_TAG, b"")

    def Start(self, group, assertion: int = 0) -> None:
        """Begin an access epoch to the ranks of `group`, once each has posted."""
        s = self._s
        _assertion(assertion)
        if s.access is not None:
            raise err.Exception(err.ERR_RMA_SYNC, "Start while an access epoch is open: call Complete first")
        targets = self._members(group)
        for posted in [s.mailbox.recv(t, _POST_TAG) for t in targets]:
            posted.wait()
        s.access = targets

    def Complete(self) -> None:
        """End the access epoch: each target's thread has applied the operations and counted this Complete.

        Waiting for that answer (not for the target's Wait) makes a Test after,
        say, a barrier see the Complete, as MPI requires.
        """
        s = self._s
        if s.access is None:
            raise err.Exception(err.ERR_RMA_SYNC, "Complete without Start")
        targets, s.access = s.access, None
        for t in targets:
            self._ask(t, "Complete", None, P.COMPLETE)
        self._settle(targets)

    def Wait(self) -> bool:
        """End the exposure epoch once every origin of the Post has completed."""
        s = self._s
        if s.exposure is None:
            raise err.Exception(err.ERR_RMA_SYNC, "Wait without Post")
        origins = s.exposure
        s.target.wait(lambda: s.target.take_completions(origins), "Wait for the Post's origins", s.timeout)
        s.exposure = None
        return True

    def Test(self) -> bool:
        """Wait without blocking: True, ending the exposure epoch, once every origin has completed."""
        s = self._s
        if s.exposure is None:
            raise err.Exception(err.ERR_RMA_SYNC, "Test without Post")
        if not s.target.take_completions(s.exposure):
            return False
        s.exposure = None
        return True

    def _members(self, group) -> list[int]:
        """The window ranks of the members of an MPI.Group."""
        s = self._s
        ranks = group.Translate_ranks(None, self.Get_group())
        missing = [r for r, w in enumerate(ranks) if w == C.UNDEFINED]
        if missing:
            raise err.Exception(err.ERR_GROUP, f"members {missing} of the group are not in the window's group")
        if s.rank in ranks:
            raise err.Exception(err.ERR_GROUP, "a Post or Start group must not contain the calling rank")
        return ranks


def _delivery(spec: msg.Spec):
    """Copies fetched bytes into the caller's buffer (and through it into a derived datatype's layout)."""
    def deliver(data: memoryview) -> None:
        spec.array.view(np.uint8)[...] = np.frombuffer(data, dtype=np.uint8)
        spec.store()

    return deliver


def _single(spec: msg.Spec, name: str) -> None:
    if spec.array.size != 1:
        raise ValueError(f"{name}: expecting a single element, got {spec.array.size}")


def _index(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return int(value)


def _rank(rank, size: int, name: str) -> int:
    rank = _index(rank, name)
    if not 0 <= rank < size:
        raise err.Exception(err.ERR_RANK, f"{name} must be in [0, {size}) or PROC_NULL, got {rank}")
    return rank


def _size(size) -> int:
    size = _index(size, "size")
    if size < 0:
        raise err.Exception(err.ERR_SIZE, f"size must be >= 0, got {size}")
    return size


def _disp_unit(disp_unit) -> int:
    disp_unit = _index(disp_unit, "disp_unit")
    if disp_unit <= 0:
        raise err.Exception(err.ERR_ARG, f"disp_unit must be > 0, got {disp_unit}")
    return disp_unit


def _assertion(assertion) -> None:
    known = W.MODE_NOCHECK | W.MODE_NOSTORE | W.MODE_NOPUT | W.MODE_NOPRECEDE | W.MODE_NOSUCCEED
    if _index(assertion, "assertion") & ~known:
        raise err.Exception(err.ERR_ASSERT, f"assertion {assertion:#x} has bits no MODE_* constant names")


def _intracomm(comm):
    """The communicator a window is made on (COMM_SELF by default); ERR_COMM for COMM_NULL."""
    from meshcomm import mpi
    from meshcomm.mpi.comm import Intracomm

    comm = mpi.COMM_SELF if comm is None else comm
    if not isinstance(comm, Intracomm):
        raise TypeError(f"comm must be an MPI.Intracomm, got {type(comm).__name__}")
    if not comm:
        raise err.Exception(err.ERR_COMM, "a window cannot be made on COMM_NULL")
    return comm


WIN_NULL = Win()
