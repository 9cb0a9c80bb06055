"""A group's board: shared-memory slots per member, for small collectives.

On a group whose members all share this host, a small collective is done in
one synchronisation instead of one message per schedule step: every member
writes its contribution (what the others read of it) into one of its slots
and raises the slot's sequence number; once every member's slot shows the
call's number, each reads what it needs straight from the others' slots.
Python pays for one post and one wait, not for the framing, matching and
wake-ups of log2(n) or n - 1 messages.

Layout: a control page with a cache line per member (its `bell`, the futex
word it sleeps on, its `sleeping` flag, `latest`, the sequence number + 1
of the last call it posted, `finished`, that of the last call in which it
read a post by reference, `results`, that of the last call whose results
it put in its staging area, and `deferred`, per half of that area, that of
the last post it staged there without waiting for its readers), then per
member `slots` slots, used in turn by its board calls. A slot is a header line (the call's sequence number + 1,
written last to publish the slot; the byte count; the collective's
fingerprint; for a post by reference, the poster's pid and the address of its
bytes, and for a call whose members write into each other's output, the
address of the poster's output) and `slot_bytes` of data; after all the
slots, each member's staging area of `stage_bytes`. Every member makes
every board call of the group, so a call's posts sit in the same slot of
every member: a reader looks there first and searches the member's other
slots only when its `latest` says it has posted the call elsewhere.

A contribution larger than a slot is posted by reference when every rank of
the host can read the others' memory (cma.py): the slot carries where the
bytes are, each reader copies what it needs straight from the poster's
buffer (one copy instead of two, as a large message goes), says so in its
`finished` word, and the poster returns only once all its readers have: its
buffer is the caller's, free to change after the call. A post of the call's
`stage_from` to `stage_bytes` bytes is copied into the poster's staging area
first and its address given as 0 (not a two-shot post, whose output the
members write into): readers copy it out of the staging area with memcpy, which on the
hosts measured beats process_vm_readv while the area stays in the cache
(docs/board.md). The protocol is otherwise the same, so the area is free
again once the poster returns; except that a post every other member reads,
of at most its plan's `defer_to` bytes and half the area, goes into the
half holding the older such post, and its
poster returns without waiting for its readers: it waits before it
overwrites that half instead (_stage_at). A staged post's output word says
where in the area its bytes start. A post may also carry where the poster's
output is, for calls whose members write their results straight into each
other's outputs (the two-shot all-reduce); the poster then waits for its
writers the same way. A two-shot all-reduce may go through the staging
areas whole instead (board/run.py's stages_two_shot): each member stages
its input less its own block, puts its block's results where that block
was left out, and raises `results`; the others copy them out.

A member waits only for the members whose slots it reads (a broadcast's
root reads none, so it does not wait, as with messages). A member reads the
slots of one board call before it posts its next, so it may reuse a slot
(its board call b + slots) once every member has posted board call
b + 1: nobody still reads a slot when it is reused. With two slots a root
would stay within one call of the slowest reader, and on a host with more
ranks than cores every broadcast would wait for a reader to be scheduled;
with sixteen it runs up to fifteen calls ahead and the readers find their
data waiting, as with messages queued in a ring. The group's other calls,
which go as messages, do not count.
"""

from __future__ import annotations

import collections
import ctypes
import os
import time

import numpy as np

from meshcomm import native
from meshcomm.errors import CommTimeoutError, PeerLostError
from meshcomm.transport import cma, futex
from meshcomm.rendezvous.store import wait_for_keys
from meshcomm.transport.shm import DIRECTORY, map_file, unlink_quietly

_PAGE = 4096
_LINE = 64
# u64 seq + 1, u64 nbytes, 16-byte fingerprint, then u64s: pid and address (by reference: pid != 0), the
# output's address and whether peers write into it (1 or 0)
_HEADER = 64
_BELL, _SLEEPING = 0, 1  # u32 words in a member's control line; `latest` and `finished`, u64s, follow them
_SLEEP_SLICE = 0.01  # a sleeper looks at liveness, abort and its deadline this often
_JOIN_SLICE = 0.1  # a member waiting for the others to map the board looks at their liveness this often
SLOTS = 16  # per member: how many board calls a member that reads nothing may run ahead, plus one


def member_bytes(slot_bytes: int, slots: int, stage_bytes: int = 0) -> int:
    """What each member adds to a board: its slots with their headers, and its staging area."""
    return slots * (_HEADER + slot_bytes) + stage_bytes


def board_bytes(nmembers: int, slot_bytes: int, slots: int, stage_bytes: int = 0) -> int:
    return _PAGE + nmembers * member_bytes(slot_bytes, slots, stage_bytes)


class Board:
    """Maps (creating or attaching) the board file at `path`."""

    def __init__(self, path: str, nmembers: int, slot_bytes: int, create: bool, slots: int = SLOTS,
                 stage_bytes: int = 0) -> None:
        if slots < 2:
            raise ValueError(f"a board needs at least 2 slots per member, got {slots}")
        if stage_bytes < 0:
            raise ValueError(f"a board's staging area cannot be negative, got {stage_bytes} bytes")
        self.path = path
        self.nmembers = nmembers
        self.slot_bytes = slot_bytes
        self.slots = slots
        self.stage_bytes = stage_bytes
        self._map = map_file(path, board_bytes(nmembers, slot_bytes, slots, stage_bytes), create, "board")
        view = memoryview(self._map)
        self._view = view
        self._control = [view[m * _LINE : m * _LINE + 8].cast("I") for m in range(nmembers)]
        self._latest = [view[m * _LINE + 8 : m * _LINE + 16].cast("Q") for m in range(nmembers)]
        self._finished = [view[m * _LINE + 16 : m * _LINE + 24].cast("Q") for m in range(nmembers)]
        self._results = [view[m * _LINE + 24 : m * _LINE + 32].cast("Q") for m in range(nmembers)]
        # seq + 1 of the call a member last staged in each half of its area without waiting for its readers
        # (0: none); only the member itself uses its own (_stage_at), in shared memory for both paths to see
        self._deferred = [view[m * _LINE + 32 : m * _LINE + 48].cast("Q") for m in range(nmembers)]
        self._anchors = [ctypes.c_uint32.from_buffer(self._map, m * _LINE) for m in range(nmembers)]
        self._bell_address = [ctypes.addressof(a) for a in self._anchors]
        self._heads: list[list[memoryview]] = []
        self._fingerprints: list[list[memoryview]] = []
        self._references: list[list[memoryview]] = []
        self._data: list[list[memoryview]] = []
        for m in range(nmembers):
            heads, prints, references, data = [], [], [], []
            for slot in range(slots):
                start = _PAGE + (m * slots + slot) * (_HEADER + slot_bytes)
                heads.append(view[start : start + 16].cast("Q"))
                prints.append(view[start + 16 : start + 32])
                references.append(view[start + 32 : start + 64].cast("Q"))
                data.append(view[start + _HEADER : start + _HEADER + slot_bytes])
            self._heads.append(heads)
            self._fingerprints.append(prints)
            self._references.append(references)
            self._data.append(data)
        stages = _PAGE + nmembers * slots * (_HEADER + slot_bytes)
        self._stages = [view[stages + m * stage_bytes : stages + (m + 1) * stage_bytes] for m in range(nmembers)]
        # The compiled path (native/_core.c) runs the calls whose posts fit in slots, and keeps the turns of
        # every call; without it, Python keeps them.
        self.native = (native.core.Board(self._map, nmembers, slot_bytes, slots, stage_bytes)
                       if native.core else None)
        self._turns = self.native if self.native is not None else _Turns(slots)
        self._yield_seconds = 0.0
        # Whether this call's waits yield: a call that copies little, whose peers arrive within microseconds. A
        # large call's waiters would take turns on the cores its copying ranks need.
        self.yielding = False
        # (member, slot, nbytes, dtype) -> a numpy view of those published bytes: readers of small
        # calls of one shape find theirs made, instead of paying np.frombuffer on every call.
        self._arrays: dict[tuple, np.ndarray] = {}

    @classmethod
    def join(cls, store, key: str, me: int, nmembers: int, slot_bytes: int, job: str, timeout: float,
             between, stage_bytes: int = 0) -> "Board":
        """Member 0 creates the board and names it in the store under `key`; the others map it.

        Member 0 unlinks the name once every member has mapped it, or when
        waiting for them fails, so nothing is left in /dev/shm whatever
        happens later (the memory lives until the last process unmaps it).
        All members are in the same call, so the wait is short; between
        looks at the store, `between(missing)` raises when a missing member is
        lost, so a member that died before its first board call is named at
        once instead of at the deadline.
        """
        deadline = time.monotonic() + timeout
        if me != 0:
            _store_wait(store, [f"{key}/path"], [0], deadline, timeout, between)
            board = cls(store.get(f"{key}/path").decode(), nmembers, slot_bytes, create=False,
                        stage_bytes=stage_bytes)
            store.set(f"{key}/mapped/{me}", b"1")
            return board
        path = os.path.join(DIRECTORY, f"meshcomm-{job}-board-{os.urandom(6).hex()}")
        board = cls(path, nmembers, slot_bytes, create=True, stage_bytes=stage_bytes)
        try:
            store.set(f"{key}/path", path)
            _store_wait(store, [f"{key}/mapped/{m}" for m in range(1, nmembers)], range(1, nmembers), deadline,
                        timeout, between)
        except BaseException:
            board.close()
            raise
        finally:
            board.unlink()
        return board

    def unlink(self) -> None:
        unlink_quietly(self.path)

    @property
    def posts(self) -> int:
        """This member's board calls so far."""
        return self._turns.posts

    @property
    def yield_seconds(self) -> float:
        """On a host with more ranks than cores: how long a wait hands its core to the ranks it waits for
        (sched_yield between looks) before it sleeps; the group's seat sets it."""
        return self._yield_seconds

    @yield_seconds.setter
    def yield_seconds(self, seconds: float) -> None:
        self._yield_seconds = seconds
        if self.native is not None:
            # Only a host with more ranks than cores sets it; the calls that copy little wait by yielding.
            self.native.set_waits(seconds, True, True)

    # ----- one call

    def post(self, me: int, seq: int, fingerprint: bytes, payload: memoryview, spin: float, deadline: float,
             between, by_reference: bool = False, output: memoryview | None = None,
             left_out: tuple[int, int] | None = None, stage_from: int | None = None,
             defer_to: int = 0) -> bool:
        """Publish this member's contribution to call `seq` and wake the members asleep on the board.

        `by_reference`: publish where `payload` is instead of its bytes (it may be larger than a slot); the
        caller keeps it unchanged until its readers have finished (wait_finished). Unless the members write into
        its output, a payload of `stage_from` to `stage_bytes` bytes (none when `stage_from` is None) is copied
        into this member's staging area instead, and the address published is 0. `output` (by reference only):
        where the members may write this member's results (write_into), also until they finish. `left_out`: bytes
        [start, stop) of `payload` that nobody reads, which a slot skips, holding the bytes after them straight
        after the bytes before them, and which staging skips, leaving their place in the area to its poster.
        `defer_to`: staging defers a post of up to that many bytes (_stage_at); every other member reads it
        (board/run.py's defers_to).

        Returns whether the post was staged and deferred: its poster need not wait for its readers
        (wait_finished), since it waits before it overwrites that half of its area.

        The slot it takes held this member's board call `slots` calls ago;
        every member has read that once it has posted the call after it, so
        the post waits (usually not at all) until every member's `latest`
        reaches that call. So a member that reads nothing (a broadcast's root)
        may post its board call b once every member has posted call
        b - slots + 1, no sooner.
        """
        nbytes = payload.nbytes
        staged = by_reference and stage_from is not None and output is None and stage_from <= nbytes <= self.stage_bytes
        at, deferred = self._stage_at(me, nbytes, defer_to, spin, deadline, between) if staged else (0, False)
        oldest = self._turns.oldest_unread()
        if oldest >= 0:
            latest = self._latest
            for words in latest:  # a loop, not all(...): this runs on every post, and a generator costs more
                if words[0] <= oldest:
                    self._wait(me, lambda member: latest[member][0] > oldest, spin, deadline, between)
                    break
        slot = self._turns.advance(seq)
        reference = self._references[me][slot]
        if by_reference:
            if staged:
                stage = self._stages[me][at:]
                if left_out is None:
                    stage[:nbytes] = payload
                else:  # the bytes nobody reads stay out, and the others keep their offsets
                    start, stop = left_out
                    stage[:start] = payload[:start]
                    stage[stop:nbytes] = payload[stop:]
                if deferred:
                    self._deferred[me][1 if at else 0] = seq + 1
                reference[1] = 0
                reference[2] = at  # a staged post's output word says where in the area its bytes are
            else:
                reference[1] = cma.address_of(payload)
            reference[0] = os.getpid()
        else:
            reference[0] = 0
            data = self._data[me][slot]
            if left_out is None:
                if nbytes:
                    data[:nbytes] = payload
            else:
                start, stop = left_out
                nbytes -= stop - start
                if start:
                    data[:start] = payload[:start]
                if stop < payload.nbytes:
                    data[start:nbytes] = payload[stop:]
        if output is not None:
            reference[2] = cma.address_of(output)
        reference[3] = output is not None
        self._fingerprints[me][slot][:] = fingerprint
        head = self._heads[me][slot]
        head[1] = nbytes
        head[0] = seq + 1  # after the data: x86-64 keeps stores in order, so the data is there once this is
        self._latest[me][0] = seq + 1
        self._wake_others(me)
        return deferred

    def _stage_at(self, me: int, nbytes: int, defer_to: int, spin: float, deadline: float,
                  between) -> tuple[int, bool]:
        """(Where in this member's staging area a post of `nbytes` goes, whether it is deferred): a post of up
        to `defer_to` bytes, and within half the area, goes into the half whose last deferred post is older, and
        its poster returns without waiting for its readers; any other goes at the area's start, its readers
        waited for. Either way, it first waits until every other member has finished reading the deferred posts it
        overwrites (docs/board.md)."""
        half = self.stage_bytes // 2
        deferred = self._deferred[me]
        defer = nbytes <= min(defer_to, half)
        newer = 1 if deferred[1] > deferred[0] else 0
        for h in (0, 1):
            if deferred[h] and (not defer or h != newer):
                others = [m for m in range(self.nmembers) if m != me]
                self._wait_past(me, self._finished, deferred[h] - 1, others, spin, deadline, between,
                                "finished reading this member's earlier post")
                deferred[h] = 0
        return ((1 - newer) * half if defer else 0), defer

    def _wake_others(self, me: int) -> None:
        for member, words in enumerate(self._control):
            if member != me and words[_SLEEPING]:
                words[_BELL] = (words[_BELL] + 1) & 0xFFFFFFFF
                futex.wake(self._bell_address[member])

    def posted(self, member: int, seq: int) -> bool:
        return self._slot(member, seq) is not None

    def _slot(self, member: int, seq: int) -> int | None:
        """The member's slot holding call `seq`, or None if it has not posted it (or has reused its slot)."""
        heads = self._heads[member]
        current = self._turns.current
        if heads[current][0] == seq + 1:
            return current
        if self._latest[member][0] <= seq:  # not posted yet: the usual case while waiting, and no search
            return None
        # Posted, but not where this member's own post of the call went: the members' board calls are
        # out of step (a call that failed on some of them), so look in every slot.
        for slot, head in enumerate(heads):
            if head[0] == seq + 1:
                return slot
        return None

    def _found(self, member: int, seq: int) -> int:
        slot = self._slot(member, seq)
        if slot is None:
            raise LookupError(f"member {member} has no post of call {seq} on the board")
        return slot

    def fingerprint(self, member: int, seq: int) -> bytes:
        return bytes(self._fingerprints[member][self._found(member, seq)])

    def data(self, member: int, seq: int) -> memoryview:
        """The member's published bytes for call `seq` (valid until the caller posts its next board call)."""
        slot = self._found(member, seq)
        return self._data[member][slot][: self._heads[member][slot][1]]

    def by_reference(self, member: int, seq: int) -> bool:
        """Whether the member posted call `seq` by reference (its bytes are in its own memory, not in the slot)."""
        return self._references[member][self._found(member, seq)][0] != 0

    def read_into(self, member: int, seq: int, start: int, target: memoryview) -> None:
        """Copy `target.nbytes` of the bytes the member posted by reference for call `seq`, from byte `start` on,
        into `target` (a post in a slot is read through array(), or data())."""
        slot = self._found(member, seq)
        reference = self._references[member][slot]
        if not reference[0]:
            raise LookupError(f"member {member} posted call {seq} in its slot, not by reference")
        if reference[1]:
            cma.read(reference[0], reference[1] + start, target)
        elif start + target.nbytes <= min(self._heads[member][slot][1], self.stage_bytes - reference[2]):
            at = reference[2] + start
            target[:] = self._stages[member][at : at + target.nbytes]
        else:
            raise ValueError(f"member {member}'s staged post of call {seq} has no bytes {start} to "
                             f"{start + target.nbytes}")

    def write_into(self, member: int, seq: int, start: int, source: memoryview) -> None:
        """Copy `source` into the output the member posted with call `seq`, from byte `start` on."""
        reference = self._references[member][self._found(member, seq)]
        cma.write(reference[0], reference[2] + start, source)

    def withdraw_output(self, me: int, seq: int) -> None:
        """Take back the output this member posted with call `seq`: a member agreeing on the call after this finds
        it gone (agree) and writes nothing into it."""
        self._references[me][self._found(me, seq)][3] = 0

    def finish(self, me: int, seq: int) -> None:
        """This member is done with call `seq`'s posts by reference (read them, or written into their outputs):
        their posters may return."""
        self._finished[me][0] = seq + 1
        self._wake_others(me)

    def post_result(self, me: int, seq: int) -> None:
        """This member's result of call `seq` is in its staging area (a staged two-shot all-reduce): its peers may
        copy it out."""
        self._results[me][0] = seq + 1
        self._wake_others(me)

    def wait_results(self, me: int, seq: int, members, spin: float, deadline: float, between) -> None:
        """Until each of `members` has posted its result of call `seq` (post_result); as `wait` otherwise."""
        self._wait_past(me, self._results, seq, members, spin, deadline, between, "put their results on the board")

    def staged(self, member: int, dtype: np.dtype, count: int) -> np.ndarray:
        """The member's staging area as `count` elements of `dtype`, for as long as the board is open."""
        key = ("staged", member, count, dtype)
        array = self._arrays.get(key)
        if array is None:
            array = self._keep_array(key, self._stages[member][: count * dtype.itemsize], dtype)
        return array

    def wait_finished(self, me: int, seq: int, members, spin: float, deadline: float, between) -> None:
        """Until each of `members` is done with this member's post of call `seq` (see finish); as `wait` otherwise."""
        self._wait_past(me, self._finished, seq, members, spin, deadline, between,
                        "finished reading this member's post")

    def _wait_past(self, me: int, words: list, seq: int, members, spin: float, deadline: float, between,
                   what: str) -> None:
        """Until the word in `words` of each of `members` is past call `seq`; as `wait` otherwise."""
        if not all(words[member][0] > seq for member in members):
            self._wait(me, lambda member: words[member][0] > seq, spin, deadline, between, members, what)

    def array(self, member: int, seq: int, dtype: np.dtype) -> np.ndarray | None:
        """`data(member, seq)` as a numpy array of `dtype`, valid as long (ValueError if the bytes do not divide);
        None when the member posted by reference."""
        slot = self._found(member, seq)
        if self._references[member][slot][0]:
            return None
        key = (member, slot, self._heads[member][slot][1], dtype)
        array = self._arrays.get(key)
        if array is None:
            array = self._keep_array(key, self._data[member][slot][: key[2]], dtype)
        return array

    def _keep_array(self, key: tuple, data: memoryview, dtype: np.dtype) -> np.ndarray:
        """`data` as a numpy array of `dtype`, kept under `key` for the calls after this one."""
        if len(self._arrays) >= 256:  # many shapes: keep the newest, not all
            self._arrays.clear()
        array = self._arrays[key] = np.frombuffer(data, dtype=dtype)
        return array

    def agree(self, members, seq: int, fingerprint: bytes, output: bool = False) -> int | None:
        """The first of `members` whose post of call `seq` carries another fingerprint, or (`output`: whether
        this member posted its output) does not post its output alike; None when all agree."""
        for member in members:
            slot = self._found(member, seq)
            if self._fingerprints[member][slot] != fingerprint or self._references[member][slot][3] != output:
                return member
        return None

    def wait(self, me: int, seq: int, members, spin: float, deadline: float, between) -> None:
        """Until each of `members` has posted call `seq`: spin `spin` seconds, then sleep on our bell.

        `between(missing)` runs before every sleep, given the members still
        missing: it raises when waiting is pointless (one of them is lost, the
        job aborted). Past `deadline` a TimeoutError names the members that
        have not posted.
        """
        # Usually all there: one look each, and no waiting set up (nor a generator made).
        for member in members:
            if not self.posted(member, seq):
                self._wait(me, lambda member: self.posted(member, seq), spin, deadline, between, members)
                return

    def _wait(self, me: int, ready, spin: float, deadline: float, between, members=None, what: str = "posted") -> None:
        candidates = range(self.nmembers) if members is None else members
        missing = [m for m in candidates if m != me and not ready(m)]
        if not missing:
            return
        if self.yielding and self.yield_seconds:  # instead of spinning on a core a missing member needs
            end = time.perf_counter() + self.yield_seconds
            while missing and time.perf_counter() < end:
                os.sched_yield()
                missing = [m for m in missing if not ready(m)]
        else:
            end = time.perf_counter() + spin
            while missing and time.perf_counter() < end:
                missing = [m for m in missing if not ready(m)]
        words = self._control[me]
        while missing:
            # Only members still missing matter: one that posted and then left (its
            # program ended) is no reason to fail this call.
            try:
                between(missing)
            except Exception:
                # `missing` was taken before `between` looked: a member may have posted since and
                # left at once. A post is visible before its member is seen gone, so a second
                # look tells a member that left after posting from one that never posted.
                missing = [m for m in missing if not ready(m)]
                if missing:
                    raise
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"members {missing} of the board had not {what}")
            seen = words[_BELL]
            words[_SLEEPING] = 1
            try:
                # Checked again after announcing the sleep: a member that posted
                # before seeing the flag has already published, so we do not sleep.
                missing = [m for m in missing if not ready(m)]
                if missing:
                    futex.wait(self._bell_address[me], seen, min(remaining, _SLEEP_SLICE))
            finally:
                words[_SLEEPING] = 0
            missing = [m for m in missing if not ready(m)]

    def close(self) -> None:
        if self.native is not None:
            self.native.release()
        self._arrays.clear()  # they hold the data views, which cannot be released under them
        views = [self._view, *self._control, *self._latest, *self._finished, *self._results, *self._deferred,
                 *self._stages]
        for per_member in (self._heads, self._fingerprints, self._references, self._data):
            views.extend(v for pair in per_member for v in pair)
        self._heads, self._fingerprints, self._references, self._data = [], [], [], []
        self._control, self._latest, self._finished, self._results, self._deferred = [], [], [], [], []
        self._stages = []
        for view in views:
            view.release()
        self._anchors.clear()
        try:
            self._map.close()
        except BufferError:
            pass  # a view is still exported somewhere; the mapping goes with the process


class _Turns:
    """Which slot a member's next board call takes, and what it waits for first (the compiled Board's twin)."""

    __slots__ = ("slots", "posts", "current", "_recent")

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.posts = 0  # this member's board calls so far: which of its slots the next one takes
        self.current = 0  # the slot of its latest board call, where every member's post of that call is
        # The sequence numbers of its last slots - 1 board calls: a post waits for the oldest.
        self._recent: collections.deque[int] = collections.deque(maxlen=slots - 1)

    def oldest_unread(self) -> int:
        """The call every member must have posted past before the next post takes its slot, or -1."""
        return self._recent[0] if self.posts >= self.slots else -1

    def advance(self, seq: int) -> int:
        """The slot call `seq` takes."""
        self._recent.append(seq)
        self.current = self.posts % self.slots
        self.posts += 1
        return self.current


def _store_wait(store, keys: list[str], members, deadline: float, timeout: float, between) -> None:
    """Until every key of `keys` (one per member of `members`) is in the store; `between(missing)` between looks."""
    members = list(members)
    try:
        missing = wait_for_keys(store, keys, deadline, lambda left: between([members[i] for i in left]), _JOIN_SLICE)
    except PeerLostError:
        between(members)  # the store's host left: the transport names it, if it is a member
        raise
    if missing:
        raise CommTimeoutError(f"members {[members[i] for i in missing]} had not joined the group's board within "
                               f"{timeout:g} s (missing store keys {[keys[i] for i in missing]})")
