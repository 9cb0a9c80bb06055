"""The `direct` algorithms run on a group's board (meshcomm/board/segment.py).

Every rank publishes what its peers need from it (its input, in a slot
less the block of an all_to_all, reduce_scatter or scatter that only it
reads and takes from its input itself; or nothing when nobody reads it, as
a gather's root), waits until
every rank has published the same call, checks that they all called the
same collective, and computes its output from the published bytes exactly
as the `direct` schedule does: contributions combined in rank order, so
every rank's result is bit-identical and equal to the schedule's. One
synchronisation per call, whatever the group's size.

A contribution larger than a slot goes by reference (board/segment.py)
when the host's ranks can read each other's memory: readers copy straight
from the poster's buffer, and the poster waits for them to finish before it
returns, a second synchronisation that costs less than the copy it saves.
A rank whose output overlaps what it reads in place (what it posted by
reference, as an in-place all_reduce does; its own block of a
reduce_scatter or scatter) computes into a scratch array and copies it over
once its readers are done; an all_to_all and a gather copy their own block
first instead.

The two-shot all-reduce (algorithms/direct.py) goes by reference at every
size: each rank posts its input and its output, reads its block of every
peer's input, reduces it a cache-sized piece at a time and writes each piece
into every member's output; it returns once every peer has written its block
into its output. Two synchronisations, and each block is reduced once.
"""

from __future__ import annotations

import functools
import time
from typing import Callable, NamedTuple

import numpy as np

from meshcomm import native
from meshcomm.algorithms.problem import Problem
from meshcomm.algorithms.schedule import block_bounds
from meshcomm.errors import CollectiveMismatchError, CommTimeoutError
from meshcomm.executor import fingerprint as fp
from meshcomm.executor.executor import reusable
from meshcomm.executor.reduce_ops import Combine
from meshcomm.transport.buffers import byte_view


# Bytes of a slot of a group's board. The board holds board/segment.py's SLOTS (16) of them per member: 8 MiB, in
# tmpfs pages touched only when used.
SLOT_BYTES = 512 << 10
# Bytes a member's post may put in a slot; a larger `direct` call goes by reference when the host allows it
# (fits), as messages when not. Up to 256 KiB two copies through a slot and one synchronisation beat one copy by
# reference and two; a gather's, posted while its root copies its own block, beat it up to the whole slot
# (docs/board.md).
SLOT_POST_BYTES = 256 << 10


def slot_post_bytes(collective: str) -> int:
    """The most bytes a member's post of `collective` puts in a slot: larger ones go by reference."""
    return SLOT_BYTES if collective == "gather" else SLOT_POST_BYTES


# A post by reference of its plan's stage_from to STAGE_TO_BYTES (or to what it defers, if more) is copied into its
# poster's staging area on the board and out again by its readers. That beats process_vm_readv while the area and
# the buffers stay in the cache; smaller, the copy in costs more than it saves. A gather on a host with more ranks
# than cores that does not push (pushes_gather) stages from its slot's size: its members copy in at once while the
# root copies out (docs/board.md).
STAGE_FROM_BYTES = 1 << 20
STAGE_TO_BYTES = 2 << 20
# Each member's staging area, in tmpfs pages touched only when used: twice the largest deferred post (defers_to).
STAGE_BYTES = 8 << 20
# A staged post that every other member reads may be deferred: its poster does not wait for its readers, and the
# next goes into the other half of its area (segment.py's _stage_at). With a core per rank, up to DEFER_TO_BYTES:
# two halves of 2 MiB in turn lost the caches. On a host with more ranks than cores, only a poster that reads
# nothing (a broadcast's root), up to half its area (docs/board.md).
DEFER_TO_BYTES = 1 << 20
# A two-shot all-reduce of STAGED_TWO_SHOT_FROM to STAGED_TWO_SHOT_TO among up to _STAGED_TWO_SHOT_RANKS ranks goes
# through the staging areas whole (stages_two_shot). From 512 KiB it tied on 2 ranks; above 4 MiB, and among 8
# ranks on 2 cores, it lost. On a host with more ranks than cores it won from CROWDED_STAGED_TWO_SHOT_FROM, where
# each rank's copies are its own and it waits on nobody's reads or writes of its memory (docs/board.md).
STAGED_TWO_SHOT_FROM = 768 << 10
CROWDED_STAGED_TWO_SHOT_FROM = 16 << 10
STAGED_TWO_SHOT_TO = 4 << 20
_STAGED_TWO_SHOT_RANKS = 4
# Bytes per second a reader copies out of a poster's memory: a low estimate, so that a poster spinning through
# its readers' copy does not go to sleep just before they finish (benchmarks/results/design-figures-2026-11-25.md).
_READ_RATE = 4e9
# Elements of a two-shot block are read, reduced and written on in pieces of this many bytes, which stay in
# the core's cache between the three: the fastest of the sizes tried (benchmarks/results/design-figures-2026-11-25.md).
_PIECE_BYTES = 256 << 10
# The algorithms the board runs: `direct` (one synchronisation, or two by reference) and `two_shot`
# (always by reference).
ALGORITHMS = frozenset({"direct", "two_shot"})
_NOTHING = memoryview(b"")
# The collectives whose computation copies this rank's own block (own_block) before anything else
# (_all_to_all, _all_gather), so an output over it cannot overwrite it before it is read.
_OWN_BLOCK_FIRST = frozenset({"all_to_all", "gather"})
# The most ranks among which a crowded host's gather stages its blocks of up to STAGE_FROM_BYTES rather than pushing
# them: among 8, each staged block waits for its member's turn on a core (benchmarks/results/pushed-gathers-2026-11-28.md).
_STAGED_GATHER_RANKS = 4
# The longest a failed pushed gather's root waits for the members already writing into its output.
_WRITERS_GRACE_SECONDS = 2.0


def published_count(problem: Problem, rank: int) -> int:
    """Elements `rank` puts in a slot: what at least one peer reads from it."""
    c = problem.collective
    if c == "broadcast":
        return problem.count if rank == problem.root else 0
    if c == "barrier":
        return 0
    own = own_block(problem, rank)
    return problem.input_count(rank) - (own[1] - own[0] if own is not None else 0)


@functools.lru_cache(maxsize=1024)
def own_block(problem: Problem, rank: int) -> tuple[int, int] | None:
    """The elements [lo, hi) of `rank`'s input that only `rank` reads (its block of an all_to_all, reduce_scatter
    or scatter; all of a gather's root's; none of the other members' of a gather or scatter): a post in a slot
    leaves them out, and `rank` reads them from its input. None for the other collectives, whose posts are read
    whole (or not at all)."""
    c = problem.collective
    if c == "all_to_all":
        lo = sum(problem.matrix(rank, j) for j in range(rank))
        return lo, lo + problem.matrix(rank, rank)
    if c == "reduce_scatter" or (c == "scatter" and rank == problem.root):
        lo, hi = problem.offsets()[rank : rank + 2]
        return lo, hi
    if c == "gather":
        return (0, problem.counts[rank]) if rank == problem.root else (0, 0)
    if c == "scatter":
        return 0, 0
    return None


@functools.lru_cache(maxsize=1024)
def read_from(problem: Problem, rank: int) -> tuple[int, ...]:
    """The members whose slots `rank` reads (and so waits for): everyone, or just the root, or nobody."""
    c, n, root = problem.collective, problem.nranks, problem.root
    if c in ("broadcast", "scatter"):
        return () if rank == root else (root,)
    if c in ("reduce", "gather") and rank != root:
        return ()
    return tuple(m for m in range(n) if m != rank)


@functools.lru_cache(maxsize=1024)
def readers_of(problem: Problem, rank: int) -> tuple[int, ...]:
    """The members that read `rank`'s post (and that a post by reference waits for)."""
    return tuple(m for m in range(problem.nranks) if rank in read_from(problem, m))


@functools.lru_cache(maxsize=256)
def largest_post(problem: Problem) -> int:
    """The most elements any rank of `problem` publishes (every rank computes the same)."""
    return max(published_count(problem, r) for r in range(problem.nranks))


def fits(problem: Problem, itemsize: int, by_reference: bool = False, algorithm: str = "direct") -> bool:
    """Whether the board can take this call by `algorithm` (its group sharing memory aside); `by_reference`:
    the host's ranks can read and write each other's memory, so a post need not fit in a slot."""
    if problem.nranks < 2:
        return False
    if algorithm == "two_shot":
        return by_reference and problem.collective == "all_reduce"
    return (algorithm == "direct" and problem.collective in COLLECTIVES
            and (by_reference or largest_post(problem) * itemsize <= slot_post_bytes(problem.collective)))


def goes_by_reference(problem: Problem, itemsize: int) -> bool:
    """Whether some member's post of this direct call is too large for a slot (so, on the board, goes by
    reference; a two-shot call always does)."""
    return largest_post(problem) * itemsize > slot_post_bytes(problem.collective)


class Plan(NamedTuple):
    """What rank `me` derives from a problem for its board calls, once per problem instead of on every call."""

    problem: Problem
    me: int
    count: int  # elements it publishes in a slot
    read: tuple[int, ...]  # members whose slots it reads
    readers: tuple[int, ...]  # members that read its slot
    compute: Callable  # compute(posts, out, combine): its output from the members' posts (a _Posts)
    algorithm: str  # "direct", or "two_shot": the members write into each other's outputs
    own_blocks: tuple | None  # each member's own_block, or None when the collective has none
    by_reference: bool  # it posts by reference: a two-shot call, or a post too large for a slot
    some_by_reference: bool  # some member's post is too large for a slot (goes_by_reference)
    long_copies: bool  # by reference, and larger than YIELDING_COPY_BYTES: crowded waits sleep instead of yielding
    stage_from: int | None  # its smallest post by reference that is staged, or None (staged_from)
    defer_to: int  # its largest staged post that is deferred, or 0 (defers_to)
    native: object  # the compiled path's plan (native_plan), or None: the call runs in Python
    pushes: bool = False  # a gather whose members write their blocks into the root's output (pushes_gather)
    stages_two_shot: bool = False  # a two-shot all-reduce through the staging areas (stages_two_shot)


def plan(problem: Problem, me: int, itemsize: int, algorithm: str = "direct", dtype: str = "", op: str = "none",
         fingerprint: bytes = b"", crowded: bool = False) -> Plan:
    """Rank `me`'s plan for `problem` by `algorithm` (a call the board runs, see fits) on elements of `itemsize`
    bytes; with the call's `dtype` and `op` names and its `fingerprint`, the compiled path runs it when it can.
    `crowded`: the host has more ranks than cores."""
    compute = _two_shot(problem, me) if algorithm == "two_shot" else _COMPUTE[problem.collective](problem, me)
    own_blocks = None
    if algorithm == "direct" and own_block(problem, me) is not None:
        own_blocks = tuple(own_block(problem, m) for m in range(problem.nranks))
    count = published_count(problem, me)
    by_reference = algorithm == "two_shot" or count * itemsize > slot_post_bytes(problem.collective)
    some_by_reference = goes_by_reference(problem, itemsize)
    largest = max(problem.input_count(me), problem.output_count(me)) * itemsize
    long_copies = (algorithm == "two_shot" or some_by_reference) and largest > YIELDING_COPY_BYTES
    read = read_from(problem, me)
    own = own_blocks[me] if own_blocks is not None else None
    post_bytes = (problem.input_count(me) - own[1] + own[0] if own is not None else count) * itemsize
    readers = readers_of(problem, me)
    defer_to = defers_to(problem, read, readers, crowded)
    made = Plan(problem, me, count, read, readers, compute, algorithm, own_blocks, by_reference,
                some_by_reference, long_copies,
                staged_from(problem, me, read, own_blocks, crowded, post_bytes, defer_to), defer_to, None)
    if algorithm == "direct" and pushes_gather(problem, itemsize, crowded):
        # The root waits for every member's post and then for their writes; each member for the root's post.
        members = tuple(m for m in range(problem.nranks) if m != problem.root)
        read = members if me == problem.root else (problem.root,)
        made = made._replace(read=read, readers=read, pushes=True)
    if algorithm == "two_shot" and stages_two_shot(problem, itemsize, crowded):
        made = made._replace(stages_two_shot=True)
    return made._replace(native=native_plan(made, itemsize, dtype, op, fingerprint)) if fingerprint else made


def pushes_gather(problem: Problem, itemsize: int, crowded: bool) -> bool:
    """Whether a direct gather's members write their blocks into the root's output instead of the root reading
    them: whenever a block goes by reference, as the root would otherwise copy every byte itself, one core's
    work; but not on a crowded host among up to _STAGED_GATHER_RANKS ranks whose blocks are at most
    STAGE_FROM_BYTES, where the root reading staged blocks measured faster (docs/board.md). Every rank decides
    alike."""
    if problem.collective != "gather" or not goes_by_reference(problem, itemsize):
        return False
    staged = largest_post(problem) * itemsize <= STAGE_FROM_BYTES and problem.nranks <= _STAGED_GATHER_RANKS
    return not (crowded and staged)


def stages_two_shot(problem: Problem, itemsize: int, crowded: bool) -> bool:
    """Whether a two-shot all-reduce goes through the members' staging areas: each copies its input there (less
    its own block), reduces its block from the others' areas into its own, and copies the others' results out of
    theirs, all at memory speed; where process_vm_readv and writev would copy 3-4 times slower (docs/board.md).
    `crowded`: the host has more ranks than cores."""
    least = CROWDED_STAGED_TWO_SHOT_FROM if crowded else STAGED_TWO_SHOT_FROM
    return problem.nranks <= _STAGED_TWO_SHOT_RANKS and least <= problem.count * itemsize <= STAGED_TWO_SHOT_TO


# The compiled path's codes (native/_core.c): the reductions it runs, and the element types it reduces.
_NATIVE_OPS = {"sum": 0, "avg": 0, "premul_sum": 0, "product": 1, "min": 2, "max": 3, "band": 4, "bor": 5,
               "bxor": 6}
_NATIVE_TYPES = {"int8": 0, "int16": 1, "int32": 2, "int64": 3, "uint8": 4, "uint16": 5, "uint32": 6, "uint64": 7,
                 "float32": 8, "float64": 9, "float16": 10, "bfloat16": 11, "bool": 12}
_REDUCING = frozenset({"all_reduce", "reduce", "reduce_scatter"})
RECOMPUTE = -2  # the compiled run()'s answer when numpy computes the result (native/_core.c)
# The largest input of a two-shot all-reduce the compiled path takes: there it saves the interpreter's 10-25 µs a
# call, and above it it measured slower than numpy's pieces (benchmarks/results/board-by-reference-2026-11-26.md).
COMPILED_TWO_SHOT_BYTES = 2 << 20
# A call by reference whose buffers are larger copies for long: on a host with more ranks than cores its waits
# sleep, since a yielding waiter would take turns on the cores its copying peers need. Up to this size yielding
# hands the core over sooner than a futex wake-up does (benchmarks/results/crowded-copies-2026-11-27.md).
YIELDING_COPY_BYTES = 4 << 20


def native_plan(made: Plan, itemsize: int, dtype: str, op: str, fingerprint: bytes):
    """The compiled path's plan for a call, or None: it runs in Python (a pushed gather, a two-shot all-reduce above
    COMPILED_TWO_SHOT_BYTES that does not go through the staging areas, complex numbers and float8 reduced, or no
    extension built)."""
    problem, me = made.problem, made.me
    c = problem.collective
    reducing = c in _REDUCING
    staged = made.stages_two_shot
    writes = made.algorithm == "two_shot" and not staged
    if native.core is None or made.pushes:
        return None
    if writes and made.count * itemsize > COMPILED_TWO_SHOT_BYTES:
        return None
    if reducing and (dtype not in _NATIVE_TYPES or op not in _NATIVE_OPS):
        return None
    computes = made.compute is not _nothing
    lo = hi = 0
    pieces: list[int] = []
    if writes or staged:
        bounds = block_bounds(problem.count, problem.nranks)
        lo, hi = bounds[me : me + 2]
    elif reducing:
        lo, hi = (problem.offsets()[me], problem.offsets()[me + 1]) if c == "reduce_scatter" else (0, problem.count)
    elif c == "broadcast":
        pieces = [problem.root, 0, problem.count, 0] if computes else []
    elif c in ("all_gather", "gather") and computes:
        offsets = problem.offsets()
        for member in _own_first(problem.nranks, me):
            pieces += [member, 0, offsets[member + 1] - offsets[member], offsets[member]]
    elif c == "scatter":
        start, stop = problem.offsets()[me : me + 2]
        pieces = [problem.root, start, stop - start, 0]
    elif c == "all_to_all":
        at, mine = 0, []
        for member in range(problem.nranks):
            count = problem.matrix(member, me)
            piece = [member, sum(problem.matrix(member, j) for j in range(me)), count, at]
            at += count
            if member == me:
                mine = piece  # its own block first, from its input, which the output may overlap
            else:
                pieces += piece
        pieces = mine + pieces
    own_lo, own_hi = made.own_blocks[me] if made.own_blocks is not None else (-1, -1)
    own_blocks = [bound for block in made.own_blocks for bound in block] if made.own_blocks is not None else []
    published, stage_from, defer_to = made.count, made.stage_from, made.defer_to
    if staged:  # its input staged whole less the block it reduces into that place (_run_staged_two_shot)
        own_lo, own_hi, published, stage_from, defer_to = lo, hi, made.count - (hi - lo), 0, 0
        own_blocks = [bound for m in range(problem.nranks) for bound in bounds[m : m + 2]]
    return native.core.Plan(me, problem.nranks, reducing and computes, lo, hi, published, own_lo, own_hi, made.read,
                            made.readers, own_blocks, pieces, computes, made.some_by_reference or writes or staged,
                            made.by_reference, writes, made.long_copies, -1 if stage_from is None else stage_from,
                            defer_to, staged, _NATIVE_TYPES.get(dtype, 4), _NATIVE_OPS.get(op, 0), itemsize,
                            fingerprint)


def run(board, plan: Plan, seq: int, fingerprint: bytes, buffers: dict, combine: Combine | None,
        timeout: float, spin: float, spare_core: bool, between, group_name: str, peers) -> None:
    """One collective on the board; `between(missing)` raises when a missing member is lost or the call is given up.

    `spare_core`: the host has a core per rank, so a poster by reference may spin while its readers copy
    instead of sleeping: the spin takes no core from anyone and saves a futex wake-up at the end of the call.
    `peers` maps group ranks to transport ranks (for naming a rank that sent a message instead)."""
    if compiled_takes(plan, buffers):
        run_compiled(board, plan, seq, fingerprint, buffers, combine, timeout, spin, between, group_name, peers)
        return
    if plan.pushes:
        _run_pushed(board, plan, seq, fingerprint, buffers, timeout, spin, between, group_name, peers)
        return
    if plan.stages_two_shot:
        _run_staged_two_shot(board, plan, seq, fingerprint, buffers, combine, timeout, spin, between, group_name,
                             peers)
        return
    me, count, read = plan.me, plan.count, plan.read
    deadline = time.monotonic() + timeout
    writes = plan.algorithm == "two_shot"
    published = None
    output = buffers.get("output")  # a barrier has none, and computes nothing
    own = plan.own_blocks[me] if plan.own_blocks is not None else None
    left_out = None
    if own is not None:  # all of its input, its own block left out of a slot (see own_block)
        published = buffers["input"]
        payload = byte_view(published)
        left_out = (own[0] * published.itemsize, own[1] * published.itemsize)
    elif count:
        source = buffers["input"]
        published = source if count == source.size else source[:count]
        payload = byte_view(published)
    else:
        payload = _NOTHING
    by_reference = plan.by_reference
    board.yielding = not plan.long_copies
    try:
        deferred = board.post(me, seq, fingerprint, payload, spin, deadline, between, by_reference,
                              byte_view(output) if writes else None, left_out, plan.stage_from, plan.defer_to)
        board.wait(me, seq, read, spin, deadline, between)
        member = board.agree(read, seq, fingerprint, writes)
        if member is not None:
            raise _mismatch(group_name, seq, fingerprint, member, board.fingerprint(member, seq), "")
        waited_on = by_reference and bool(plan.readers) and not deferred
        in_place = False
        if output is not None and plan.compute is not _nothing:
            # A two-shot rank writes only the block nobody else reads, a piece at a time after reading it.
            mine, read_in_place = _reads_of_its_own(plan, published)
            target = _compute(board, plan, seq, output, mine, not writes and read_in_place, combine, deadline,
                              between)
            in_place = target is not output
            # A two-shot call says it finished (its peers wait for its writes); a direct one only when it has a
            # post too large for a slot, so posts by reference to say it finished reading.
            if writes or (plan.some_by_reference and any(board.by_reference(m, seq) for m in read)):
                board.finish(me, seq)
        if waited_on:
            reading = count * published.itemsize / _READ_RATE if spare_core and count else 0.0
            board.wait_finished(me, seq, plan.readers, spin + reading, deadline, between)
        if in_place:
            np.copyto(output, target)
    except TimeoutError as exc:
        raise _timed_out(fingerprint, seq, group_name, timeout, exc) from None
    except CollectiveMismatchError as exc:
        raise _mismatch_as_messages(exc, group_name, seq, fingerprint, peers) from None


def _reads_of_its_own(plan: Plan, published: np.ndarray | None) -> tuple[np.ndarray | None, bool]:
    """(What of its own this rank reads in place, whether an output over it is computed aside): what it posted by
    reference, or its input whose own block its slot leaves out, must not be overwritten first, so such an output is
    copied over once its readers are done; except an all_to_all's or gather's own block in a slot, copied before the
    others."""
    own = plan.own_blocks is not None
    mine = published if plan.by_reference or own else None
    return mine, plan.by_reference or (own and plan.problem.collective not in _OWN_BLOCK_FIRST)


def _run_staged_two_shot(board, plan: Plan, seq: int, fingerprint: bytes, buffers: dict, combine: Combine,
                         timeout: float, spin: float, between, group_name: str, peers) -> None:
    """A two-shot all-reduce through the staging areas (stages_two_shot). Each rank stages its input less its own
    block; reduces that block a piece at a time, in rank order, from the members' areas into the place its own
    block left in its area, and into its output; says so (post_result); copies every other member's block of
    results out of that member's area; and returns once every member has copied its block out of its area. An
    all_reduce runs in place: each piece of its own block is read before it is written, and the rest of its input
    only to stage it, so nothing goes aside."""
    me, n, inputs = plan.me, plan.problem.nranks, buffers["input"]
    lo, hi = block_bounds(plan.problem.count, n)[me : me + 2]
    others = tuple(m for m in range(n) if m != me)
    deadline = time.monotonic() + timeout
    board.yielding = not plan.long_copies
    try:
        board.post(me, seq, fingerprint, byte_view(inputs), spin, deadline, between, True, None,
                   (lo * inputs.itemsize, hi * inputs.itemsize), 0)
        board.wait(me, seq, others, spin, deadline, between)
        member = board.agree(others, seq, fingerprint)
        if member is not None:
            raise _mismatch(group_name, seq, fingerprint, member, board.fingerprint(member, seq), "")
        _reduce_staged(board, plan, seq, buffers, combine, lo, spin, deadline, between)
    except TimeoutError as exc:
        raise _timed_out(fingerprint, seq, group_name, timeout, exc) from None
    except CollectiveMismatchError as exc:
        raise _mismatch_as_messages(exc, group_name, seq, fingerprint, peers) from None


def _reduce_staged(board, plan: Plan, seq: int, buffers: dict, combine: Combine, start: int, spin: float,
                   deadline: float, between) -> None:
    """A staged two-shot all-reduce from element `start` of this rank's block on, once every member has staged its
    input (_run_staged_two_shot; the compiled path leaves it at `start` when numpy's bits are not certain there)."""
    me, n, count = plan.me, plan.problem.nranks, plan.problem.count
    inputs, output = buffers["input"], buffers["output"]
    bounds = block_bounds(count, n)
    others = tuple(m for m in range(n) if m != me)
    areas = [inputs if m == me else board.staged(m, inputs.dtype, count) for m in range(n)]
    results = board.staged(me, inputs.dtype, count)
    step = max(1, _PIECE_BYTES // inputs.itemsize)
    for lo in range(start, bounds[me + 1], step):
        hi = min(lo + step, bounds[me + 1])
        piece = results[lo:hi]
        piece[...] = areas[0][lo:hi]
        for m in range(1, n):
            combine(piece, areas[m][lo:hi])
        output[lo:hi] = piece
    board.post_result(me, seq)
    board.wait_results(me, seq, others, spin, deadline, between)
    for m in others:
        output[bounds[m] : bounds[m + 1]] = areas[m][bounds[m] : bounds[m + 1]]
    board.finish(me, seq)
    board.wait_finished(me, seq, others, spin, deadline, between)


def _run_pushed(board, plan: Plan, seq: int, fingerprint: bytes, buffers: dict, timeout: float, spin: float, between,
                group_name: str, peers) -> None:
    """A gather whose members write their blocks into the root's output (Plan.pushes): the root posts its output
    and copies its own block while they write, then waits until every member has finished writing; a member
    waits only for the root's post. The copies run on every core at once, not all on the root's."""
    deadline = time.monotonic() + timeout
    board.yielding = not plan.long_copies
    try:
        if plan.me == plan.problem.root:
            _gather_pushed(board, plan, seq, fingerprint, buffers, spin, deadline, between, group_name)
        else:
            _push_block(board, plan, seq, fingerprint, buffers["input"], spin, deadline, between, group_name)
    except TimeoutError as exc:
        raise _timed_out(fingerprint, seq, group_name, timeout, exc) from None
    except CollectiveMismatchError as exc:
        raise _mismatch_as_messages(exc, group_name, seq, fingerprint, peers) from None


def _gather_pushed(board, plan: Plan, seq: int, fingerprint: bytes, buffers: dict, spin: float, deadline: float,
                   between, group_name: str) -> None:
    """The root's part of a pushed gather (_run_pushed)."""
    me, output, mine = plan.me, buffers["output"], buffers["input"]
    lo = plan.problem.offsets()[me]
    own = output[lo : lo + mine.size]
    # An input that is exactly its own block is in place; one over any other part of the output is copied before
    # the members may write there (numpy copies overlapping arrays correctly); any other, while they write.
    in_place = own.__array_interface__ == mine.__array_interface__
    early = not in_place and np.may_share_memory(output, mine)
    if early:
        own[...] = mine
    view = byte_view(output)
    board.post(me, seq, fingerprint, view, spin, deadline, between, True, view)
    try:
        board.wait(me, seq, plan.read, spin, deadline, between)
        member = board.agree(plan.read, seq, fingerprint, False)
        if member is not None:
            raise _mismatch(group_name, seq, fingerprint, member, board.fingerprint(member, seq), "")
        if not (in_place or early):
            own[...] = mine
        board.wait_finished(me, seq, plan.readers, spin, deadline, between)
    except BaseException:
        _let_writers_finish(board, plan, seq, fingerprint, spin)
        raise


def _let_writers_finish(board, plan: Plan, seq: int, fingerprint: bytes, spin: float) -> None:
    """After a pushed gather failed at its root, before its caller takes the output back: take the output's post
    back, so that a member not yet agreed writes nothing, and wait a bounded time for the members that posted the
    call alike, which may be writing into it (docs/failures.md)."""
    board.withdraw_output(plan.me, seq)
    writers = [m for m in plan.readers if board.posted(m, seq) and board.agree((m,), seq, fingerprint) is None]
    try:
        board.wait_finished(plan.me, seq, writers, spin, time.monotonic() + _WRITERS_GRACE_SECONDS, lambda _: None)
    except TimeoutError:
        pass  # a member lost meanwhile writes no more


def _push_block(board, plan: Plan, seq: int, fingerprint: bytes, mine: np.ndarray, spin: float, deadline: float,
                between, group_name: str) -> None:
    """A member's part of a pushed gather (_run_pushed): its block written into the root's output."""
    me, root = plan.me, plan.problem.root
    board.post(me, seq, fingerprint, _NOTHING, spin, deadline, between)
    board.wait(me, seq, plan.read, spin, deadline, between)
    if board.agree(plan.read, seq, fingerprint, True) is not None:
        raise _mismatch(group_name, seq, fingerprint, root, board.fingerprint(root, seq), "")
    posts = _Posts(board, seq, mine.dtype, me, None, None,
                   lambda member, exc: _poster_lost(member, exc, deadline, between))
    posts.write(root, plan.problem.offsets()[me], mine)
    board.finish(me, seq)


def _timed_out(fingerprint: bytes, seq: int, group_name: str, timeout: float, exc: TimeoutError) -> CommTimeoutError:
    return CommTimeoutError(
        f"{fp.describe(fingerprint)} seq {seq} in group {group_name!r}, on the group's shared-memory board, "
        f"did not finish within its timeout of {timeout:g} s: {exc}"
    )


def _mismatch_as_messages(exc: CollectiveMismatchError, group_name: str, seq: int, fingerprint: bytes,
                          peers) -> CollectiveMismatchError:
    """A peer that ran the call as messages (the transport's notice): named as a board mismatch is."""
    if getattr(exc, "from_notice", False) or getattr(exc, "theirs", None) is None:
        return exc
    return _mismatch(group_name, seq, fingerprint, peers.index(exc.peer), exc.theirs, " as messages")


def _compute(board, plan: Plan, seq: int, output: np.ndarray, mine: np.ndarray | None, read_in_place: bool,
             combine: Combine | None, deadline: float, between) -> np.ndarray:
    """Compute this rank's output from the members' posts of call `seq`; returns where the result is: `output`, or
    an array aside when the output is over what this rank reads in place (`mine`, when `read_in_place`), for the
    caller to copy over once nobody reads it any more."""
    in_place = read_in_place and np.may_share_memory(output, mine)
    target = reusable(output.dtype, output.size, "board output") if in_place else output
    posts = _Posts(board, seq, output.dtype, plan.me, mine, plan.own_blocks,
                   lambda member, exc: _poster_lost(member, exc, deadline, between))
    plan.compute(posts, target, combine)
    return target


def defers_to(problem: Problem, read: tuple, readers: tuple, crowded: bool) -> int:
    """The largest staged post of a rank that reads the members `read` and is read by `readers` that it defers
    (DEFER_TO_BYTES), or 0: none, as some member does not read it, or it reads some on a `crowded` host."""
    if len(readers) != problem.nranks - 1 or (crowded and read):
        return 0
    return STAGE_BYTES // 2 if crowded else DEFER_TO_BYTES


def staged_from(problem: Problem, me: int, read: tuple, own_blocks: tuple | None, crowded: bool,
                post_bytes: int, defer_to: int) -> int | None:
    """The smallest post by reference of rank `me` that is staged (segment.py's post), or None: what it stages
    of its post (`post_bytes`: all but its own block, which only it reads) is above STAGE_TO_BYTES and what it
    defers (`defer_to`), or it is a rank that never stages (below). On a host with
    more ranks than cores, a gather's members stage theirs from where they leave the slots, unless they push them
    (pushes_gather): they copy in at once while the root copies out. A rank that reads nothing and leaves a block
    of its own out (a scatter's root, unless its own block is empty) never stages: each reader reads only its
    part, and staging the whole would come before any of them could start, with nothing of this rank's to do
    meanwhile (docs/board.md)."""
    own = own_blocks[me] if own_blocks is not None else None
    if post_bytes > max(STAGE_TO_BYTES, defer_to) or (not read and own is not None and own[0] != own[1]):
        return None
    return slot_post_bytes("gather") if crowded and problem.collective == "gather" else STAGE_FROM_BYTES


def compiled_takes(plan: Plan, buffers: dict) -> bool:
    """Whether the compiled path runs this call: it has a plan for it, and it reduces only numbers in this
    machine's byte order (a big-endian array has the same dtype name)."""
    return plan.native is not None and (plan.problem.collective not in _REDUCING or buffers["input"].dtype.isnative)


def run_compiled(board, plan: Plan, seq: int, fingerprint: bytes, buffers: dict, combine: Combine | None,
                 timeout: float, spin: float, between, group_name: str, peers) -> None:
    """run() for a call the compiled path takes (plan.native): the same steps, the same errors, the same bytes."""
    deadline = time.monotonic() + timeout
    try:
        outcome = board.native.run(plan.native, seq, buffers.get("input"), buffers.get("output"), spin, deadline,
                                   between)
    except (TimeoutError, CollectiveMismatchError) as exc:
        outcome = exc
    if outcome is not None:
        settle(board, plan, seq, fingerprint, buffers, combine, timeout, deadline, between, group_name, peers,
               outcome)


def settle(board, plan: Plan, seq: int, fingerprint: bytes, buffers: dict, combine: Combine | None, timeout: float,
           deadline: float, between, group_name: str, peers, outcome) -> None:
    """What a compiled run answered other than success, made what the Python path gives: its error raised as this
    module raises it; a member that called another collective; or RECOMPUTE, when the C code cannot be sure of
    numpy's bits (a NaN pair, signed zeros) and numpy computes the result from the same posts; or (RECOMPUTE, start),
    when that happened in a two-shot call's piece from element `start` on, and numpy does the rest of its share."""
    if isinstance(outcome, TimeoutError):
        raise _timed_out(fingerprint, seq, group_name, timeout, outcome) from None
    if isinstance(outcome, CollectiveMismatchError):
        raise _mismatch_as_messages(outcome, group_name, seq, fingerprint, peers) from None
    if isinstance(outcome, BaseException):
        raise outcome
    if isinstance(outcome, tuple):
        _finish_two_shot(board, plan, seq, fingerprint, buffers, combine, timeout, deadline, between, group_name,
                         outcome[1])
        return
    if outcome != RECOMPUTE:
        raise _mismatch(group_name, seq, fingerprint, outcome, board.fingerprint(outcome, seq), "")
    # as run() goes on from computing: the compiled call left before saying it finished reading posts by reference
    # and before waiting for its own post's readers
    output, me = buffers["output"], plan.me
    mine, read_in_place = _reads_of_its_own(plan, buffers["input"])
    try:
        target = _compute(board, plan, seq, output, mine, read_in_place, combine, deadline, between)
        if plan.some_by_reference:
            board.finish(me, seq)
            if plan.by_reference and plan.readers:
                board.wait_finished(me, seq, plan.readers, 0.0, deadline, between)
    except TimeoutError as exc:
        raise _timed_out(fingerprint, seq, group_name, timeout, exc) from None
    if target is not output:
        np.copyto(output, target)


def _finish_two_shot(board, plan: Plan, seq: int, fingerprint: bytes, buffers: dict, combine: Combine,
                     timeout: float, deadline: float, between, group_name: str, start: int) -> None:
    """The rest of a two-shot call the compiled path left at element `start` of this rank's block: reduced by numpy
    from there, then what run() does after computing (say it finished, wait for the writers), or the rest of
    _run_staged_two_shot."""
    try:
        if plan.stages_two_shot:
            _reduce_staged(board, plan, seq, buffers, combine, start, 0.0, deadline, between)
            return
        posts = _Posts(board, seq, buffers["output"].dtype, plan.me, buffers["input"], plan.own_blocks,
                       lambda member, exc: _poster_lost(member, exc, deadline, between))
        _two_shot(plan.problem, plan.me, start)(posts, buffers["output"], combine)
        board.finish(plan.me, seq)
        board.wait_finished(plan.me, seq, plan.readers, 0.0, deadline, between)
    except TimeoutError as exc:
        raise _timed_out(fingerprint, seq, group_name, timeout, exc) from None


def _poster_lost(member: int, exc: OSError, deadline: float, between) -> None:
    """A member's memory could not be read (its post) or written (its output): it died holding its post (it
    waits for its peers otherwise). Raise what the transport says of it once it sees the member gone, which
    names it as a lost message does."""
    while time.monotonic() < deadline:
        between([member])
        time.sleep(0.001)
    raise TimeoutError(f"could not reach member {member}'s memory for its post: {exc}")


class _Posts:
    """The members' posts of one call, read the cheapest way: from a slot, from this rank's own buffer when it
    posted by reference or keeps its own block out of its slot (`own`), or straight from the memory of a member
    that posted by reference; and their outputs, written straight into their memory (`lost(member, error)`
    raises when reading or writing fails). Elements are numbered as in the poster's input; `own_blocks`
    (Plan's) says which block each member's slot leaves out."""

    __slots__ = ("board", "seq", "dtype", "me", "own", "own_blocks", "lost")

    def __init__(self, board, seq: int, dtype: np.dtype, me: int, own: np.ndarray | None, own_blocks, lost) -> None:
        self.board, self.seq, self.dtype, self.me, self.own, self.lost = board, seq, dtype, me, own, lost
        self.own_blocks = own_blocks

    def _in_slot(self, member: int, start: int) -> int:
        """Where the member's element `start` is in its slot, which leaves out its own block (own_block)."""
        if self.own_blocks is None:
            return start
        lo, hi = self.own_blocks[member]
        return start if start < hi else start - (hi - lo)

    def _read(self, member: int, start: int, out: np.ndarray) -> None:
        """out = the member's elements [start, start + out.size), from its memory (it posted by reference)."""
        try:
            self.board.read_into(member, self.seq, start * self.dtype.itemsize, byte_view(out))
        except OSError as exc:
            self.lost(member, exc)

    def write(self, member: int, start: int, source: np.ndarray) -> None:
        """The member's posted output [start, start + source.size) = source."""
        try:
            self.board.write_into(member, self.seq, start * self.dtype.itemsize, byte_view(source))
        except OSError as exc:
            self.lost(member, exc)

    def copy(self, member: int, start: int, out: np.ndarray) -> None:
        """out = the member's published elements [start, start + out.size)."""
        # Assignments, not np.copyto: as fast for large arrays, and faster for small ones, on every board read
        # (benchmarks/results/design-figures-2026-11-25.md).
        if member == self.me and self.own is not None:
            out[...] = self.own[start : start + out.size]
            return
        posted = self.board.array(member, self.seq, self.dtype)
        if posted is None:
            self._read(member, start, out)
        else:
            start = self._in_slot(member, start)
            out[...] = posted[start : start + out.size]

    def part(self, member: int, lo: int, hi: int) -> np.ndarray:
        """The member's published elements [lo, hi), valid until the next part() call."""
        if member == self.me and self.own is not None:
            return self.own[lo:hi]
        posted = self.board.array(member, self.seq, self.dtype)
        if posted is None:
            part = reusable(self.dtype, hi - lo, "board part")
            self._read(member, lo, part)
            return part
        start = self._in_slot(member, lo)
        return posted[start : start + hi - lo]


def _mismatch(group_name: str, seq: int, fingerprint: bytes, member: int, theirs: bytes,
              how: str) -> CollectiveMismatchError:
    called = f"called {fp.describe(theirs)}" if theirs != fingerprint else "ran it with another algorithm"
    return CollectiveMismatchError(
        f"collective mismatch in group {group_name!r} at seq {seq}: this rank called {fp.describe(fingerprint)} "
        f"on the group's shared-memory board but rank {member} {called}{how}"
    )


# Each collective's computation, specialised for one problem and rank: posts (a _Posts) holds what
# the members published, out is this rank's output.


def _combined(n: int, lo: int, hi: int, posts: _Posts, out: np.ndarray, combine: Combine) -> None:
    """out = elements [lo, hi) of post 0 op post 1 op ... op post n - 1, in rank order as the schedule reduces."""
    posts.copy(0, lo, out)
    for member in range(1, n):
        combine(out, posts.part(member, lo, hi))


def _nothing(posts, out, combine) -> None:
    pass


def _all_reduce(problem: Problem, me: int) -> Callable:
    n, count = problem.nranks, problem.count
    return lambda posts, out, combine: _combined(n, 0, count, posts, out, combine)


def _two_shot(problem: Problem, me: int, first: int | None = None) -> Callable:
    """Rank `me` reduces its block of the inputs (block_bounds, as the schedule cuts them) a piece at a time,
    and writes each piece into its own output and every peer's; from element `first` on when given (the first of
    a piece: the rest of a call the compiled path began)."""
    n = problem.nranks
    lo, hi = block_bounds(problem.count, n)[me : me + 2]
    lo = lo if first is None else first
    peers = [m for m in range(n) if m != me]

    def compute(posts, out, combine) -> None:
        if lo == hi:
            return  # fewer elements than ranks: this one's block is empty
        step = max(1, _PIECE_BYTES // out.itemsize)
        # In place, member 0's piece would land on this rank's own before it is read: reduce aside.
        aside = me != 0 and np.may_share_memory(out, posts.own)
        for start in range(lo, hi, step):
            stop = min(start + step, hi)
            piece = reusable(out.dtype, stop - start, "two-shot piece") if aside else out[start:stop]
            _combined(n, start, stop, posts, piece, combine)
            if aside:
                np.copyto(out[start:stop], piece)
            for member in peers:
                posts.write(member, start, piece)

    return compute


def _reduce(problem: Problem, me: int) -> Callable:
    return _all_reduce(problem, me) if me == problem.root else _nothing


def _broadcast(problem: Problem, me: int) -> Callable:
    root = problem.root
    if me == root:
        return _nothing
    return lambda posts, out, combine: posts.copy(root, 0, out)


def _own_first(nranks: int, me: int) -> list[int]:
    """The members in the order an all_gather or gather copies their blocks, on both paths: this rank's own first,
    as a gather root's is its input, which may be another member's block of the output (_OWN_BLOCK_FIRST)."""
    return sorted(range(nranks), key=lambda member: member != me)


def _all_gather(problem: Problem, me: int) -> Callable:
    offsets = problem.offsets()
    blocks = [(member, offsets[member], offsets[member + 1]) for member in _own_first(problem.nranks, me)]

    def compute(posts, out, combine) -> None:
        for member, lo, hi in blocks:
            posts.copy(member, 0, out[lo:hi])

    return compute


def _gather(problem: Problem, me: int) -> Callable:
    return _all_gather(problem, me) if me == problem.root else _nothing


def _scatter(problem: Problem, me: int) -> Callable:
    root = problem.root
    lo = problem.offsets()[me]
    return lambda posts, out, combine: posts.copy(root, lo, out)


def _reduce_scatter(problem: Problem, me: int) -> Callable:
    n = problem.nranks
    lo, hi = problem.offsets()[me : me + 2]
    return lambda posts, out, combine: _combined(n, lo, hi, posts, out, combine)


def _all_to_all(problem: Problem, me: int) -> Callable:
    pieces = []  # (member, start in its row, count, where it goes in our output)
    at = 0
    for member in range(problem.nranks):
        start = sum(problem.matrix(member, j) for j in range(me))
        count = problem.matrix(member, me)
        pieces.append((member, start, count, at))
        at += count
    # Its own block first: it is read from its input, which the output may overlap (in place), and the
    # others are read from slots or copies of them (run computes aside when they are read in place;
    # _OWN_BLOCK_FIRST says that it need not in a slot).
    pieces.sort(key=lambda piece: piece[0] != me)

    def compute(posts, out, combine) -> None:
        for member, start, count, at in pieces:
            posts.copy(member, start, out[at : at + count])

    return compute


def _barrier(problem: Problem, me: int) -> Callable:
    return _nothing


_COMPUTE = {
    "all_reduce": _all_reduce,
    "reduce": _reduce,
    "broadcast": _broadcast,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
    "gather": _gather,
    "scatter": _scatter,
    "barrier": _barrier,
}
COLLECTIVES = frozenset(_COMPUTE)
