"""The `direct` and `two_shot` algorithms on real ranks: on a group's shared-memory board when it fits, as messages
when not."""

from __future__ import annotations

import numpy as np
import pytest

import meshcomm as dist
from meshcomm import ReduceOp
from meshcomm.errors import CollectiveMismatchError
from meshcomm.board.run import _PIECE_BYTES
from meshcomm.board.run import SLOT_BYTES as BOARD_SLOT_BYTES
from meshcomm.board.run import DEFER_TO_BYTES as BOARD_DEFER_TO_BYTES
from meshcomm.board.run import STAGE_BYTES as BOARD_STAGE_BYTES
from meshcomm.board.run import STAGE_FROM_BYTES as BOARD_STAGE_FROM_BYTES
from meshcomm.board.run import STAGE_TO_BYTES as BOARD_STAGE_TO_BYTES
from meshcomm.board.run import CROWDED_STAGED_TWO_SHOT_FROM, STAGED_TWO_SHOT_FROM, STAGED_TWO_SHOT_TO
from tests.ranks import Cluster

BOARD_COUNT = 1001  # int64: 8 KB, on the board
# One element more than a slot holds: on the board by reference when ranks can read each other's memory
# (the default here), as messages when not (MESHCOMM_SINGLE_COPY_BYTES=0).
LARGE_COUNT = BOARD_SLOT_BYTES // 8 + 1
# Enough that a post of the whole buffer is staged (copied into its poster's staging area and out of it), and
# more than is staged (read from the poster's memory again).
STAGED_COUNT = BOARD_STAGE_FROM_BYTES // 8 + 1
UNSTAGED_COUNT = BOARD_STAGE_TO_BYTES // 8 + 1
# Enough int64s that each of up to 4 ranks' two-shot blocks spans several pieces, the last one partial: through
# the staging areas among up to 4 ranks.
PIECES_COUNT = 4 * (2 * _PIECE_BYTES // 8 + 3)
# A two-shot all-reduce larger than goes through the staging areas: read and written in each other's memory again.
TWO_SHOT_UNSTAGED_COUNT = STAGED_TWO_SHOT_TO // 8 + 5


def values(rank: int, count: int, salt: int = 0) -> np.ndarray:
    return ((np.arange(count) * 7 + rank * 3 + salt) % 11 + 1).astype(np.int64)


def board_in_use(group=None) -> bool:
    from meshcomm.api.state import resolve_group

    return resolve_group(group).seat._board is not None


def board_posts(group=None) -> int:
    """How many board calls this rank has made on the group's board."""
    from meshcomm.api.state import resolve_group

    board = resolve_group(group).seat._board
    return 0 if board is None else board.posts


def board_file_left() -> bool:
    """Whether the world's board still has a name in /dev/shm (it must not, once every rank mapped it)."""
    import os

    from meshcomm.api.state import resolve_group

    board = resolve_group(None).seat._board
    return board is not None and os.path.exists(board.path)


def every_collective_direct(counts: tuple, group=None) -> list[str]:
    """Each collective with algorithm="direct"; the names of those that disagree with numpy."""
    from meshcomm.api.state import resolve_group

    g = resolve_group(group)
    rank, n = g.rank, g.size
    wrong = []
    for count in counts:
        x = values(rank, count)
        dist.all_reduce(x, group=group, algorithm="direct")
        if not np.array_equal(x, sum(values(q, count) for q in range(n))):
            wrong.append(f"all_reduce {count}")
        y = values(rank, count, salt=1)
        dist.all_reduce(y, op=ReduceOp.MAX, group=group, algorithm="direct")
        if not np.array_equal(y, np.max([values(q, count, salt=1) for q in range(n)], axis=0)):
            wrong.append(f"all_reduce max {count}")
        for root in range(n):
            z = values(rank, count)
            dist.reduce(z, group_dst=root, group=group, algorithm="direct")
            expected = sum(values(q, count) for q in range(n)) if rank == root else values(rank, count)
            if not np.array_equal(z, expected):
                wrong.append(f"reduce {count} root {root}")
            b = values(rank, count)
            dist.broadcast(b, group_src=root, group=group, algorithm="direct")
            if not np.array_equal(b, values(root, count)):
                wrong.append(f"broadcast {count} root {root}")
            # A gather's root posts nothing (its own block is its input), a scatter's root its input less its block
            blocks = [np.full(count, -1, np.int64) for _ in range(n)] if rank == root else None
            dist.gather(values(rank, count, salt=2), blocks, group_dst=root, group=group, algorithm="direct")
            if rank == root and not all(np.array_equal(blocks[q], values(q, count, salt=2)) for q in range(n)):
                wrong.append(f"gather {count} root {root}")
            mine = np.full(count, -1, np.int64)
            parts = [values(root, count, salt=3 + q) for q in range(n)] if rank == root else None
            dist.scatter(mine, parts, group_src=root, group=group, algorithm="direct")
            if not np.array_equal(mine, values(root, count, salt=3 + rank)):
                wrong.append(f"scatter {count} root {root}")
        per = count // n + 1
        gathered = [np.zeros(per + q, np.int64) for q in range(n)]  # uneven: rank q gives per + q elements
        dist.all_gather(gathered, values(rank, per + rank), group=group, algorithm="direct")
        if not all(np.array_equal(gathered[q], values(q, per + q)) for q in range(n)):
            wrong.append(f"all_gather {count}")
        # The peers' blocks of a reduce_scatter's or all_to_all's input are what a rank posts (not its own):
        # `count` elements of them in all.
        block = count // max(1, n - 1) + 1
        out = np.zeros(block + rank, np.int64)
        dist.reduce_scatter(out, [values(rank, block + q, salt=q) for q in range(n)], group=group, algorithm="direct")
        if not np.array_equal(out, sum(values(q, block + rank, salt=rank) for q in range(n))):
            wrong.append(f"reduce_scatter {count}")
        send = [(rank + j) % 3 + block for j in range(n)]  # rank q sends (q + j) % 3 + block elements to rank j
        recv = [(q + rank) % 3 + block for q in range(n)]
        source = np.concatenate([np.full(send[j], 100 * rank + j, np.int64) for j in range(n)])
        target = np.zeros(sum(recv), np.int64)
        dist.all_to_all_single(target, source, output_split_sizes=recv, input_split_sizes=send, group=group,
                               algorithm="direct")
        if not np.array_equal(target, np.concatenate([np.full(recv[q], 100 * q + rank, np.int64) for q in range(n)])):
            wrong.append(f"all_to_all {count}")
    dist.barrier(group=group, algorithm="direct")
    return wrong


def test_every_direct_collective_matches_numpy_on_the_board_in_slots_and_by_reference(cluster) -> None:
    assert cluster.run(every_collective_direct, (0, 1, cluster.size - 1, BOARD_COUNT)) == [[]] * cluster.size
    assert cluster.run(board_in_use) == [cluster.size > 1] * cluster.size
    assert cluster.run(board_file_left) == [False] * cluster.size
    before = cluster.run(board_posts)
    calls = 6 + 4 * cluster.size + 1 if cluster.size > 1 else 0  # 9 collectives, from every root, the barrier
    for count in (LARGE_COUNT, STAGED_COUNT, UNSTAGED_COUNT):
        assert cluster.run(every_collective_direct, (count,), timeout=120) == [[]] * cluster.size
        after = cluster.run(board_posts)
        assert [a - b for a, b in zip(after, before)] == [calls] * cluster.size
        before = after


def posts_staged(count: int) -> list[bool] | None:
    """After an all_gather in which every rank posts `count` int64s (results checked): whether each peer's post
    was staged (published at address 0) rather than left where it is; None without a board."""
    from meshcomm.api.state import resolve_group

    rank, n = dist.get_rank(), dist.get_world_size()
    gathered = [np.empty(count, np.int64) for _ in range(n)]
    dist.all_gather(gathered, values(rank, count), algorithm="direct")
    assert all(np.array_equal(gathered[q], values(q, count)) for q in range(n))
    board = resolve_group(None).seat._board
    if board is None:
        return None
    slot = board._turns.current  # the slot of this call, where every member's post of it is
    return [board._references[m][slot][1] == 0 for m in range(n) if m != rank]


def all_to_all_posts_staged(count: int) -> list[bool] | None:
    """posts_staged for an all_to_all in which every rank posts at least `count` int64s, a block of them its own."""
    from meshcomm.api.state import resolve_group

    rank, n = dist.get_rank(), dist.get_world_size()
    block = count // n + 1
    target = np.empty(block * n, np.int64)
    dist.all_to_all_single(target, np.concatenate([values(rank, block, salt=j) for j in range(n)]), algorithm="direct")
    assert np.array_equal(target, np.concatenate([values(q, block, salt=rank) for q in range(n)]))
    board = resolve_group(None).seat._board
    if board is None:
        return None
    slot = board._turns.current
    return [board._references[m][slot][1] == 0 for m in range(n) if m != rank]


def scatter_root_post_staged(count: int) -> bool | None:
    """After a scatter from rank 0 whose input is at least `count` int64s (results checked): whether rank 0's post
    was staged, as a reader finds it; None on rank 0 and without a board."""
    from meshcomm.api.state import resolve_group

    rank, n = dist.get_rank(), dist.get_world_size()
    block = count // n + 1
    mine = np.empty(block, np.int64)
    dist.scatter(mine, [values(0, block, salt=q) for q in range(n)] if rank == 0 else None, src=0,
                 algorithm="direct")
    assert np.array_equal(mine, values(0, block, salt=rank))
    board = resolve_group(None).seat._board
    if board is None or rank == 0:
        return None
    return board._references[0][board._turns.current][1] == 0


def gathered_how(count: int, root: int, source: str) -> tuple | None:
    """After gathers to `root` of `count` int64s from each rank into blocks of one array (results checked;
    `source`, the root's input: "apart" from them, "own", its own block, "other", the next member's block, which
    that member may write into, or "straddle", half of its own block and half of the one before): whether the host
    is crowded and the root posted its output, and, as the
    root finds them, where each member's post is: "slot", "staged" or "memory" (by reference, where it is);
    None on the other ranks and without a board."""
    from meshcomm.api.state import resolve_group, runtime

    rank, n = dist.get_rank(), dist.get_world_size()
    for _ in range(2):  # the second on slots the first left
        whole = np.full(n * count, -1, np.int64)
        blocks = [whole[q * count : (q + 1) * count] for q in range(n)]
        mine = values(rank, count)
        if rank == root and source == "straddle" and root > 0:
            mine = whole[root * count - count // 2 : (root + 1) * count - count // 2]
            mine[...] = values(rank, count)
        elif rank == root and source != "apart":
            mine = blocks[(root + 1) % n if source == "other" else root]
            mine[...] = values(rank, count)
        dist.gather(mine, blocks if rank == root else None, dst=root, algorithm="direct")
        assert rank != root or all(np.array_equal(blocks[q], values(q, count)) for q in range(n)), source
        assert rank == root or np.array_equal(mine, values(rank, count))  # an input is never changed
    board = resolve_group(None).seat._board
    if board is None or rank != root:
        return None
    slot = board._turns.current
    references = [board._references[m][slot] for m in range(n) if m != root]
    return (runtime().transport.crowded, bool(board._references[root][slot][3]),
            ["slot" if not r[0] else "staged" if not r[1] else "memory" for r in references])


@pytest.mark.parametrize("source", ["apart", "own", "other", "straddle"])
def test_a_gathers_blocks_above_a_slot_are_written_into_the_roots_output_or_staged_where_crowded(cluster,
                                                                                               source) -> None:
    root, others = cluster.size - 1, cluster.size - 1
    for count in (LARGE_COUNT, STAGED_COUNT, LARGE_COUNT - 1):
        results = cluster.run(gathered_how, count, root, source, timeout=120)
        if cluster.size == 1:
            assert results == [None]
            return
        assert results[:root] == [None] * root, results
        crowded, pushed, posts = results[root]
        if count == LARGE_COUNT - 1:  # a block that fits in its slot is read there
            assert (pushed, posts) == (False, ["slot"] * others)
        elif count == LARGE_COUNT and crowded:  # up to 4 crowded ranks stage blocks up to STAGE_FROM_BYTES
            assert (pushed, posts) == (False, ["staged"] * others)
        else:  # the members write into the root's output, posting nothing but the call
            assert (pushed, posts) == (True, ["slot"] * others)


def test_posts_of_one_to_two_mib_are_staged_and_other_posts_by_reference_are_read_where_they_are(cluster) -> None:
    for count, staged in ((LARGE_COUNT, False), (STAGED_COUNT, True), (UNSTAGED_COUNT, False)):
        results = cluster.run(posts_staged, count, timeout=120)
        assert results == ([None] if cluster.size == 1 else [[staged] * (cluster.size - 1)] * cluster.size)
    # An all_to_all's posts leave out their posters' own blocks, and are staged as well.
    results = cluster.run(all_to_all_posts_staged, STAGED_COUNT, timeout=120)
    assert results == ([None] if cluster.size == 1 else [[True] * (cluster.size - 1)] * cluster.size)
    # A scatter's root reads nothing, and each reader only its block: staging the whole would only delay them.
    assert cluster.run(scatter_root_post_staged, STAGED_COUNT, timeout=120) == [None] + [False] * (cluster.size - 1)


def broadcasts_read_late(signal: str, count: int) -> list[bool] | None:
    """Rank 0 broadcasts three staged buffers of `count` int64s, and says so in file `signal` once it has returned
    from two; the others read none of them before that. The others: whether each broadcast they received holds what
    rank 0 sent."""
    import os
    import time

    dist.broadcast(np.zeros(4, np.int64), src=0, algorithm="direct")  # every rank maps the board first
    if dist.get_rank() == 0:
        for salt in range(3):
            dist.broadcast(values(0, count, salt), src=0, algorithm="direct")
            if salt == 1:
                open(signal, "w").close()
        return None
    deadline = time.monotonic() + 30
    while not os.path.exists(signal):
        if time.monotonic() > deadline:
            raise TimeoutError("rank 0 did not return from two staged broadcasts before its readers read them")
        time.sleep(0.01)
    time.sleep(0.2)  # rank 0 is on its third by now, which stages where the first was once all have read it
    received = []
    for salt in range(3):
        got = np.zeros(count, np.int64)
        dist.broadcast(got, src=0, algorithm="direct")
        received.append(bool(np.array_equal(got, values(0, count, salt))))
    return received


@pytest.mark.parametrize("nranks", [2, 3])  # 3 outnumber the cores of a 2-core host: a root still need not wait
def test_a_staged_broadcast_returns_before_its_readers_read_it_and_its_area_waits_for_them(tmp_path, nranks) -> None:
    import os

    # A root with a core per rank defers posts up to DEFER_TO_BYTES; one among more ranks than cores, up to half
    # its staging area (board/run.py's defers_to): the largest of each.
    crowded = nranks > (os.cpu_count() or 1)
    count = (BOARD_STAGE_BYTES // 2 if crowded else BOARD_DEFER_TO_BYTES) // 8
    cluster = Cluster(nranks)
    try:
        results = cluster.run(broadcasts_read_late, str(tmp_path / "returned"), count, timeout=90)
        assert results == [None] + [[True] * 3] * (nranks - 1)
    finally:
        cluster.close()


def own_blocks_left_out_of_slots() -> tuple[list[str], int]:
    """Calls whose posts leave out blocks only their posters read: an all_to_all in which rank 0 sends each peer
    more than a slot holds (readers find its post in its memory, the others' in their slots) and odd ranks send
    themselves nothing, and a reduce_scatter whose rank 1 keeps no block. The names of wrong results, and the
    board calls made."""
    rank, n = dist.get_rank(), dist.get_world_size()
    before = board_posts()
    wrong = []

    def sent(q: int, j: int) -> int:  # elements rank q sends rank j
        if q == 0 and j != 0:
            return LARGE_COUNT
        return 0 if q == j and q % 2 else 3 + q + 2 * j

    source = np.concatenate([values(rank, sent(rank, j), salt=j) for j in range(n)])
    target = np.zeros(sum(sent(q, rank) for q in range(n)), np.int64)
    dist.all_to_all_single(target, source, output_split_sizes=[sent(q, rank) for q in range(n)],
                           input_split_sizes=[sent(rank, j) for j in range(n)], algorithm="direct")
    if not np.array_equal(target, np.concatenate([values(q, sent(q, rank), salt=rank) for q in range(n)])):
        wrong.append("all_to_all")
    kept = [0 if q == 1 else 5 + 2 * q for q in range(n)]  # elements rank q keeps
    out = np.zeros(kept[rank], np.int64)
    dist.reduce_scatter(out, [values(rank, kept[q], salt=q) for q in range(n)], algorithm="direct")
    if not np.array_equal(out, sum(values(q, kept[rank], salt=rank) for q in range(n))):
        wrong.append("reduce_scatter")
    return wrong, board_posts() - before


def test_posts_leave_out_what_only_their_poster_reads_in_slots_and_by_reference_alike(cluster) -> None:
    results = cluster.run(own_blocks_left_out_of_slots, timeout=120)
    assert [wrong for wrong, _ in results] == [[]] * cluster.size
    # Both on the board, and the all_gather of the all_to_all's split sizes before it.
    assert [calls for _, calls in results] == [3 if cluster.size > 1 else 0] * cluster.size


def two_shot_all_reduces(counts: tuple) -> list[str]:
    """all_reduce by two_shot with several ops and dtypes; the names of those that disagree with numpy."""
    rank, n = dist.get_rank(), dist.get_world_size()
    wrong = []
    for count in counts:
        x = values(rank, count)
        dist.all_reduce(x, algorithm="two_shot")
        if not np.array_equal(x, sum(values(q, count) for q in range(n))):
            wrong.append(f"sum {count}")
        x = values(rank, count, salt=2)
        dist.all_reduce(x, op=ReduceOp.MAX, algorithm="two_shot")
        if not np.array_equal(x, np.max([values(q, count, salt=2) for q in range(n)], axis=0)):
            wrong.append(f"max {count}")
        x = (values(rank, count) % 3).astype(np.int32)
        dist.all_reduce(x, op=ReduceOp.PRODUCT, algorithm="two_shot")
        if not np.array_equal(x, np.prod([(values(q, count) % 3).astype(np.int32) for q in range(n)], axis=0)):
            wrong.append(f"product int32 {count}")
        x = values(rank, count).astype(np.float64)
        dist.all_reduce(x, op=ReduceOp.AVG, algorithm="two_shot")
        if not np.allclose(x, sum(values(q, count) for q in range(n)) / n):
            wrong.append(f"avg float64 {count}")
    return wrong


def test_two_shot_matches_numpy_on_the_board_in_pieces_for_every_count(cluster) -> None:
    n = cluster.size
    counts = (1, max(n - 1, 1), n + 1, BOARD_COUNT, LARGE_COUNT, PIECES_COUNT, TWO_SHOT_UNSTAGED_COUNT)
    before = cluster.run(board_posts)
    assert cluster.run(two_shot_all_reduces, counts, timeout=120) == [[]] * n
    if n > 1:  # every call, whatever its size, goes on the board (by reference)
        assert [after - b for after, b in zip(cluster.run(board_posts), before)] == [4 * len(counts)] * n


def two_shot_how(count: int) -> tuple | None:
    """After two-shot all_reduces of `count` int64s (results checked): whether each peer's post of the last was
    staged (published at address 0) and its result put on the board; None without a board."""
    from meshcomm.api.state import resolve_group

    rank, n = dist.get_rank(), dist.get_world_size()
    for salt in range(2):  # the second into areas the first left results in
        x = values(rank, count, salt)
        dist.all_reduce(x, algorithm="two_shot")
        assert np.array_equal(x, sum(values(q, count, salt) for q in range(n)))
    board = resolve_group(None).seat._board
    if board is None:
        return None
    slot = board._turns.current
    seq = board._heads[rank][slot][0] - 1
    return ([board._references[m][slot][1] == 0 for m in range(n) if m != rank],
            [board._results[m][0] == seq + 1 for m in range(n) if m != rank])


def host_crowded() -> bool:
    from meshcomm.api.state import runtime

    return runtime().transport.crowded


def test_two_shot_all_reduces_of_768_kib_or_where_crowded_16_kib_to_4_mib_among_up_to_4_go_through_the_staging_areas(
        cluster) -> None:
    others = cluster.size - 1
    least = CROWDED_STAGED_TWO_SHOT_FROM if cluster.run(host_crowded)[0] else STAGED_TWO_SHOT_FROM
    for count, staged in ((least // 8 - 1, False), (least // 8, True),
                          (STAGED_TWO_SHOT_TO // 8, True), (TWO_SHOT_UNSTAGED_COUNT, False)):
        results = cluster.run(two_shot_how, count, timeout=120)
        if others:
            assert results == [([staged] * others, [staged] * others)] * cluster.size, count
        else:
            assert results == [None]


def test_without_reading_each_other_s_memory_large_direct_calls_go_as_messages() -> None:
    cluster = Cluster(3, env={"MESHCOMM_SINGLE_COPY_BYTES": "0"})
    try:
        assert cluster.run(every_collective_direct, (BOARD_COUNT, LARGE_COUNT), timeout=120) == [[]] * 3
        assert cluster.run(board_posts_of_a_large_all_reduce) == [0] * 3
        # two_shot needs the single copy at every size: as messages, by its schedule.
        before = cluster.run(board_posts)
        assert cluster.run(two_shot_all_reduces, (2, BOARD_COUNT, LARGE_COUNT), timeout=120) == [[]] * 3
        assert cluster.run(board_posts) == before
    finally:
        cluster.close()


def mismatched_algorithm() -> str:
    x = values(dist.get_rank(), LARGE_COUNT)
    try:
        dist.all_reduce(x)  # MESHCOMM_ALGO differs between the ranks
    except CollectiveMismatchError as exc:
        return str(exc)
    return "no error"


def test_ranks_running_direct_and_two_shot_on_the_board_are_told_so() -> None:
    cluster = Cluster(2, env={"MESHCOMM_ALGO": ["all_reduce:direct", "all_reduce:two_shot"]})
    try:
        for message in cluster.run(mismatched_algorithm, timeout=60):
            assert "ran it with another algorithm" in message and "rank " in message, message
    finally:
        cluster.close()


def board_posts_of_a_large_all_reduce() -> int:
    before = board_posts()
    x = values(dist.get_rank(), LARGE_COUNT)
    dist.all_reduce(x, algorithm="direct")
    assert np.array_equal(x, sum(values(q, LARGE_COUNT) for q in range(dist.get_world_size())))
    return board_posts() - before


def in_place_and_inputs_kept(count: int) -> list[str]:
    """Direct calls whose output overlaps their input, and inputs that must come back unchanged."""
    rank, n = dist.get_rank(), dist.get_world_size()
    wrong = []
    whole = np.zeros(n * count, np.int64)
    whole[rank * count : (rank + 1) * count] = values(rank, count)
    dist.all_gather_into_tensor(whole, whole[rank * count : (rank + 1) * count], algorithm="direct")
    if not np.array_equal(whole, np.concatenate([values(q, count) for q in range(n)])):
        wrong.append("in-place all_gather")
    stacked = np.concatenate([values(rank, count, salt=q) for q in range(n)])
    dist.reduce_scatter_tensor(stacked[rank * count : (rank + 1) * count], stacked, algorithm="direct")
    if not np.array_equal(stacked[rank * count : (rank + 1) * count], sum(values(q, count, salt=rank) for q in range(n))):
        wrong.append("in-place reduce_scatter")
    source = np.concatenate([values(rank, count, salt=j) for j in range(n)])
    kept = source.copy()
    target = np.zeros_like(source)
    dist.all_to_all_single(target, source, algorithm="direct")
    if not np.array_equal(target, np.concatenate([values(q, count, salt=rank) for q in range(n)])):
        wrong.append("all_to_all")
    gathered = np.zeros(n * count, np.int64)
    dist.all_gather_into_tensor(gathered, source[:count], algorithm="direct")
    if not np.array_equal(source, kept):
        wrong.append("an input changed")
    # Inputs over another part of the output: the peers' writes must not land on them before they are sent.
    shifted = np.concatenate([values(rank, count, salt=j) for j in range(n)])
    other = (rank + 1) % n
    dist.all_gather_into_tensor(shifted, shifted[other * count : (other + 1) * count], algorithm="direct")
    if not np.array_equal(shifted, np.concatenate([values(q, count, salt=(q + 1) % n) for q in range(n)])):
        wrong.append("all_gather from another block of the output")
    exchanged = np.concatenate([values(rank, count, salt=j) for j in range(n)])
    dist.all_to_all_single(exchanged, exchanged, algorithm="direct")
    if not np.array_equal(exchanged, np.concatenate([values(q, count, salt=rank) for q in range(n)])):
        wrong.append("in-place all_to_all")
    # Uneven and in place: rank q sends 3 blocks to rank q + 1 and 1 to the others, so on 3 ranks or more
    # rank 1's block from rank 0 lands on its own block of the input before it has copied that.
    sent = [count * (3 if j == (rank + 1) % n else 1) for j in range(n)]
    received = [count * (3 if rank == (q + 1) % n else 1) for q in range(n)]
    exchanged = np.concatenate([values(rank, sent[j], salt=j) for j in range(n)])
    dist.all_to_all_single(exchanged, exchanged, output_split_sizes=received, input_split_sizes=sent,
                           algorithm="direct")
    if not np.array_equal(exchanged, np.concatenate([values(q, received[q], salt=rank) for q in range(n)])):
        wrong.append("uneven in-place all_to_all")
    return wrong


@pytest.mark.parametrize("count", [BOARD_COUNT, LARGE_COUNT, STAGED_COUNT, UNSTAGED_COUNT],
                         ids=["in slots", "by reference", "by reference, staged", "larger than a staging area"])
def test_direct_calls_in_place_are_right_and_leave_inputs_alone(cluster, count) -> None:
    assert cluster.run(in_place_and_inputs_kept, count, timeout=120) == [[]] * cluster.size


def float_sum_bytes(count: int, algorithm: str) -> tuple[bytes, bytes]:
    """This rank's all_reduce result, and numpy's sum of the same inputs added in rank order."""
    rank, n = dist.get_rank(), dist.get_world_size()
    inputs = [np.random.default_rng(q).standard_normal(count).astype(np.float32) for q in range(n)]
    x = inputs[rank].copy()
    dist.all_reduce(x, algorithm=algorithm)
    expected = inputs[0].copy()
    for q in range(1, n):
        expected += inputs[q]
    return x.tobytes(), expected.tobytes()


@pytest.mark.parametrize("algorithm", ["direct", "two_shot"])
@pytest.mark.parametrize("count", [7, 4096, LARGE_COUNT, PIECES_COUNT])
def test_board_float_sums_are_bit_identical_on_every_rank_and_in_rank_order(cluster, count, algorithm) -> None:
    results = cluster.run(float_sum_bytes, count, algorithm)
    assert all(mine == expected for mine, expected in results)
    assert len({mine for mine, _ in results}) == 1


def async_calls_on_the_board() -> bool:
    rank, n = dist.get_rank(), dist.get_world_size()
    xs = [np.full(5, rank + k, np.float64) for k in range(6)]
    works = [dist.all_reduce(x, async_op=True, algorithm="direct") for x in xs]
    for work in works:
        work.wait()
    return all(np.array_equal(x, np.full(5, sum(q + k for q in range(n)), np.float64)) for k, x in enumerate(xs))


def test_async_direct_calls_complete_in_order(cluster) -> None:
    assert all(cluster.run(async_calls_on_the_board))


def sub_group_boards() -> list[str]:
    """Every rank makes both groups (torch's rule); members run direct collectives on each group's own board."""
    rank = dist.get_rank()
    evens = dist.new_group([0, 2])
    odds = dist.new_group([1, 3])
    mine = evens if rank % 2 == 0 else odds
    wrong = every_collective_direct((3, 100), group=mine)
    wrong += every_collective_direct((5,))  # the world's board, between the sub-group's calls
    wrong += every_collective_direct((9,), group=mine)
    return wrong + ([] if board_in_use(mine) else ["sub-group board not used"])


def test_sub_groups_have_boards_of_their_own() -> None:
    cluster = Cluster(4)
    try:
        assert cluster.run(sub_group_boards) == [[]] * 4
    finally:
        cluster.close()


def test_ranks_on_different_hosts_run_direct_as_messages() -> None:
    cluster = Cluster(3, env={"MESHCOMM_HOST_ID": ["a", "b", "b"]})
    try:
        assert cluster.run(every_collective_direct, (0, 2, BOARD_COUNT)) == [[]] * 3
        assert cluster.run(board_in_use) == [False] * 3
    finally:
        cluster.close()


def board_calls_between_messages_that_let_a_root_run_ahead() -> bool:
    """A broadcast's root finishes as soon as its messages are queued and may post its next two board
    calls before the others have read its last one: a slot must not be reused under them."""
    rank, n = dist.get_rank(), dist.get_world_size()
    ok = True
    for round_ in range(30):
        for root in range(n):
            b = np.full(9, rank + round_, np.int64)
            dist.broadcast(b, src=root, algorithm="binomial")
            z = np.full(7, rank + root + round_, np.int64)
            dist.reduce(z, dst=root, algorithm="direct")
            w = np.full(3, rank, np.int64)
            dist.all_reduce(w, algorithm="direct")
            ok &= bool((b == root + round_).all()) and bool((w == sum(range(n))).all())
            if rank == root:
                ok &= bool((z == sum(q + root + round_ for q in range(n))).all())
    return ok


def test_a_root_running_ahead_through_message_calls_never_overwrites_a_slot_being_read(cluster) -> None:
    assert all(cluster.run(board_calls_between_messages_that_let_a_root_run_ahead))
