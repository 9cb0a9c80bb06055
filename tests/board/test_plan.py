"""What a rank's board plan decides once per call shape, checked without ranks."""

from __future__ import annotations

from meshcomm.algorithms.problem import problem_of
from meshcomm.board import run


def test_crowded_waits_sleep_only_in_calls_by_reference_larger_than_the_yielding_limit() -> None:
    limit = run.YIELDING_COPY_BYTES
    float64s = limit // 8

    def long_copies(collective: str, counts: tuple, algorithm: str = "direct") -> bool:
        return run.plan(problem_of(collective, 4, counts), 1, 8, algorithm).long_copies

    assert not long_copies("all_reduce", (1001,))  # in slots
    assert not long_copies("broadcast", (float64s,))  # by reference, at the limit
    assert long_copies("broadcast", (float64s + 1,))
    # an all_to_all's 16 counts are 4 blocks for each of 4 ranks: a rank's input is 4 of them
    assert long_copies("all_to_all", (float64s // 4 + 1,) * 16)
    assert not long_copies("all_to_all", (float64s // 4,) * 16)
    # an all_gather's input is a quarter of its output: the larger buffer counts
    assert long_copies("all_gather", (float64s // 4 + 1,) * 4)
    assert not long_copies("all_reduce", (float64s,), "two_shot")
    assert long_copies("all_reduce", (float64s + 1,), "two_shot")


def test_a_gathers_members_write_into_the_roots_output_once_a_block_leaves_its_slot_unless_it_is_staged() -> None:
    in_slot, beyond = run.SLOT_BYTES // 8, run.SLOT_BYTES // 8 + 1  # float64s
    past_staging_from = run.STAGE_FROM_BYTES // 8 + 1

    def planned(counts: tuple, me: int, crowded: bool = False) -> run.Plan:
        return run.plan(problem_of("gather", len(counts), counts, root=2), me, 8, fingerprint=b"f" * 16,
                        crowded=crowded)

    assert not any(planned((in_slot,) * 4, me).pushes for me in range(4))
    # one block past its slot is enough, and every rank decides alike
    uneven = (in_slot, beyond, in_slot, 1)
    for me in range(4):
        plan = planned(uneven, me)
        assert plan.pushes and plan.native is None  # the Python path runs it
        # the root waits for the members' posts and then their writes; a member waits only for the root
        assert plan.read == plan.readers == ((0, 1, 3) if me == 2 else (2,))
    # a crowded host's 4 ranks stage blocks up to STAGE_FROM_BYTES instead, and push larger ones; 8 ranks push
    assert not any(planned(uneven, me, crowded=True).pushes for me in range(4))
    assert planned((1, past_staging_from, 1, 1), 0, crowded=True).pushes
    assert planned((beyond,) * 8, 5, crowded=True).pushes
    # other collectives read where their posts are
    assert not run.plan(problem_of("all_gather", 4, (beyond,) * 4), 1, 8).pushes


def test_a_gathers_posts_are_staged_from_a_slots_size_only_on_a_crowded_host() -> None:
    block = run.SLOT_BYTES // 8 + 1  # float64s: the post leaves the slot

    def stage_from(collective: str, counts: tuple, me: int, crowded: bool) -> int | None:
        return run.plan(problem_of(collective, 4, counts), me, 8, crowded=crowded).stage_from

    assert stage_from("gather", (block,) * 4, 1, crowded=True) == run.SLOT_BYTES
    assert stage_from("gather", (block,) * 4, 1, crowded=False) == run.STAGE_FROM_BYTES
    assert stage_from("all_gather", (block,) * 4, 1, crowded=True) == run.STAGE_FROM_BYTES
    # a scatter's root reads nothing and keeps a block of its own: it never stages, crowded or not
    assert stage_from("scatter", (block,) * 4, 0, crowded=True) is None
    assert stage_from("scatter", (block,) * 4, 1, crowded=True) == run.STAGE_FROM_BYTES
    # a post above STAGE_TO_BYTES is read where it is; an all_to_all's own block, which it leaves out, does not count
    past_staging = run.STAGE_TO_BYTES // 8 + 1
    assert stage_from("all_gather", (past_staging,) * 4, 1, crowded=False) is None
    assert stage_from("all_to_all", (past_staging // 3 + 1,) * 16, 1, crowded=False) is None
    assert stage_from("all_to_all", (past_staging // 3 - 1,) * 16, 1, crowded=False) == run.STAGE_FROM_BYTES


def test_staged_posts_every_other_member_reads_are_deferred_up_to_1_mib_or_a_crowded_root_s_up_to_half_its_area():
    def planned(collective: str, counts: tuple, me: int, crowded: bool) -> run.Plan:
        return run.plan(problem_of(collective, 4, counts), me, 8, crowded=crowded)

    block = run.STAGE_FROM_BYTES // 8  # float64s: staged
    for collective, counts in (("all_gather", (block,) * 4), ("broadcast", (block,))):
        assert planned(collective, counts, 0, crowded=False).defer_to == run.DEFER_TO_BYTES
    # on a crowded host only a poster that reads nothing (a broadcast's root) defers, up to half its area
    assert planned("broadcast", (block,), 0, crowded=True).defer_to == run.STAGE_BYTES // 2
    assert planned("broadcast", (block,), 1, crowded=True).defer_to == 0
    assert planned("all_gather", (block,) * 4, 0, crowded=True).defer_to == 0
    # a post only the root reads is never deferred
    assert planned("gather", (block,) * 4, 1, crowded=False).defer_to == 0
    # so a crowded root stages posts past STAGE_TO_BYTES that it defers, and no larger ones
    deferred, past = run.STAGE_BYTES // 2 // 8, run.STAGE_BYTES // 2 // 8 + 1
    assert planned("broadcast", (deferred,), 0, crowded=True).stage_from == run.STAGE_FROM_BYTES
    assert planned("broadcast", (past,), 0, crowded=True).stage_from is None
    assert planned("broadcast", (deferred,), 0, crowded=False).stage_from is None


def test_two_shot_all_reduces_go_through_the_staging_areas_from_768_kib_or_where_crowded_16_kib_to_4_mib() -> None:
    most = run.STAGED_TWO_SHOT_TO // 4  # float32s

    def planned(nranks: int, count: int, me: int = 1, crowded: bool = False) -> run.Plan:
        return run.plan(problem_of("all_reduce", nranks, (count,)), me, 4, "two_shot", "float32", "sum", b"f" * 16,
                        crowded)

    for crowded, least in ((False, run.STAGED_TWO_SHOT_FROM // 4), (True, run.CROWDED_STAGED_TWO_SHOT_FROM // 4)):
        for nranks in (2, 3, 4):
            for count in (least, most):
                plans = [planned(nranks, count, me, crowded) for me in range(nranks)]
                assert all(p.stages_two_shot for p in plans)  # every rank alike
            assert not planned(nranks, least - 1, crowded=crowded).stages_two_shot
            assert not planned(nranks, most + 1, crowded=crowded).stages_two_shot
        assert not planned(8, least, crowded=crowded).stages_two_shot
    # direct reads the posts where they are, as before
    assert not run.plan(problem_of("all_reduce", 2, (least,)), 1, 4).stages_two_shot
