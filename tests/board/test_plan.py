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
