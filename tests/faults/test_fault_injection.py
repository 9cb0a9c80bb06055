"""Faults injected into real jobs: every surviving rank gets a clear error naming the culprit, nothing hangs.

Each scenario runs plain rank processes bounded by the harness (killed and
reaped after `bound` seconds) and, per test, by pytest-timeout. Times are not
asserted here; benchmarks/fault_matrix.py measures them over the full matrix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from meshcomm.trace import doctor
from tests.faults.harness import run_scenario
from tests.marks import needs_compiled
from tests.ranks import run_program

EARLY_EXIT = Path(__file__).with_name("early_exit_program.py")
LEAVE_EARLY = Path(__file__).with_name("leave_early_program.py")
CALLS = ("all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter", "all_to_all",
         "barrier", "send")


def assert_clean(run, victim: int | None) -> None:
    for outcome in run.survivors(victim):
        assert outcome.returncode == 0, f"rank {outcome.rank} exited {outcome.returncode}: {outcome.stderr[-2000:]}"
        assert outcome.result is not None, outcome.stderr[-2000:]
    assert run.leftovers == []


def survivors_of_a_sigkill(run, victim: int) -> list:
    """The victim was SIGKILLed, the others exited cleanly, each with a PeerLostError naming it: their outcomes."""
    assert run.outcomes[victim].returncode == -9 and run.kill_time is not None
    assert_clean(run, victim)
    survivors = list(run.survivors(victim))
    for outcome in survivors:
        assert outcome.error == "PeerLostError" and outcome.result["peer"] == victim, outcome.message
    return survivors


@pytest.mark.timeout(100)
@pytest.mark.parametrize(
    "nranks, collective, victim, transport",
    [(3, "all_reduce", 0, "auto"), (3, "all_reduce", 1, "auto"), (3, "all_reduce", 2, "auto"),
     (2, "broadcast", 1, "auto"), (4, "all_gather", 3, "auto"), (2, "all_gather", 0, "tcp")],
)
def test_every_survivor_of_a_sigkill_names_the_dead_rank(tmp_path, nranks, collective, victim, transport) -> None:
    run = run_scenario(tmp_path, nranks, "kill", collective, victim, timeout=60, transport=transport)
    for outcome in survivors_of_a_sigkill(run, victim):
        assert f"rank {victim}" in outcome.message and "flight recorder dumped" in outcome.message


@pytest.mark.timeout(100)
@pytest.mark.parametrize("nranks, victim", [(2, 1), (3, 0)])
def test_a_sigkill_during_a_small_calls_wait_on_its_lane_is_named(tmp_path, nranks, victim) -> None:
    # 2-element all_reduces in a loop: on the compiled path every call after the first runs on its lane
    # (group/lanes.py), and the survivors wait in C when the victim dies.
    run = run_scenario(tmp_path, nranks, "kill", "all_reduce", victim, timeout=60, env={"FAULT_COUNT": "2"})
    for outcome in survivors_of_a_sigkill(run, victim):
        assert outcome.result["laned"] == outcome.result["native"] and outcome.result["completed"] > 1
        assert f"rank {victim}" in outcome.message and "flight recorder dumped" in outcome.message


@pytest.mark.timeout(100)
@pytest.mark.parametrize("victim", [0, 1])
def test_a_sigkill_during_a_ping_pong_on_its_message_lanes_is_named(tmp_path, victim) -> None:
    # 2-element sends and receives in a loop: on the compiled path every one after the first runs on its
    # message lane (group/lanes.py), which leaves a wait longer than its spin to the Python path.
    run = run_scenario(tmp_path, 2, "kill", "pingpong", victim, timeout=60, env={"FAULT_COUNT": "2"})
    for outcome in survivors_of_a_sigkill(run, victim):
        assert outcome.result["laned"] == outcome.result["native"] and outcome.result["completed"] > 1
        assert f"rank {victim}" in outcome.message


@pytest.mark.timeout(100)
@pytest.mark.parametrize("nranks, victim", [(3, 2), (3, 0), (2, 1)])
def test_a_rank_dead_before_the_group_s_first_board_call_is_named_not_waited_for(tmp_path, nranks, victim) -> None:
    # The board is made at a group's first board call, with the store's help: a member that died before
    # it must be noticed there as a lost peer, not at the call's 60 s deadline.
    run = run_scenario(tmp_path, nranks, "first", "all_reduce", victim, timeout=60, env={"FAULT_COUNT": "2"})
    survivors_of_a_sigkill(run, victim)


@pytest.mark.timeout(100)
def test_the_dead_ranks_survivors_leave_dumps_that_doctor_reads(tmp_path) -> None:
    run = run_scenario(tmp_path, 3, "kill", "all_reduce", 2, timeout=60)
    findings = doctor.diagnose(doctor.load(str(run.dump_dir)))
    assert ("missing", [2]) in [(f.kind, f.ranks) for f in findings]


@pytest.mark.timeout(100)
@pytest.mark.parametrize("nranks, collective, other", [(3, "all_reduce", "broadcast"), (2, "all_gather", "reduce_scatter")])
def test_a_rank_calling_another_collective_is_caught_on_every_rank(tmp_path, nranks, collective, other) -> None:
    run = run_scenario(tmp_path, nranks, "desync", collective, 1, other, timeout=60)
    assert_clean(run, None)
    assert run.outcomes[1].error == "CollectiveMismatchError" and other in run.outcomes[1].message
    for outcome in run.outcomes:
        assert outcome.error in ("CollectiveMismatchError", "PeerLostError"), outcome.message
        assert other in outcome.message and collective in outcome.message


@pytest.mark.timeout(100)
@pytest.mark.parametrize("scenario, collective, victim, words", [
    ("dtype", "all_gather", 2, "float64"), ("size", "all_reduce", 0, "262145 elements")])
def test_wrong_dtype_or_size_on_one_rank_is_named(tmp_path, scenario, collective, victim, words) -> None:
    run = run_scenario(tmp_path, 3, scenario, collective, victim, timeout=60)
    assert_clean(run, None)
    for outcome in run.outcomes:
        assert outcome.error in ("CollectiveMismatchError", "PeerLostError"), outcome.message
        assert words in outcome.message


@pytest.mark.slow
@pytest.mark.timeout(100)
def test_a_rank_that_never_arrives_is_named_by_the_timeout(tmp_path) -> None:
    run = run_scenario(tmp_path, 3, "never", "all_reduce", 2, timeout=3)
    assert_clean(run, 2)
    for outcome in run.survivors(2):
        assert outcome.error == "CommTimeoutError"
        assert "seq 1" in outcome.message and "ranks [2] had not arrived" in outcome.message
    findings = doctor.diagnose(doctor.load(str(run.dump_dir)))
    assert [(f.kind, f.ranks) for f in findings] == [("stalled", [2])]


@pytest.mark.timeout(100)
def test_abort_on_one_rank_unblocks_the_others(tmp_path) -> None:
    run = run_scenario(tmp_path, 3, "abort", "all_reduce", 1, timeout=60)
    assert_clean(run, None)
    assert all(outcome.error == "AbortedError" for outcome in run.outcomes), [o.message for o in run.outcomes]
    for outcome in run.survivors(1):
        assert "rank 1" in outcome.message and "abort" in outcome.message


@pytest.mark.slow
@pytest.mark.timeout(100)
def test_a_dead_store_stops_neither_collectives_nor_a_timeout_report(tmp_path) -> None:
    run = run_scenario(tmp_path, 3, "store", "all_reduce", 2, timeout=3)
    assert_clean(run, 2)
    for outcome in run.outcomes:
        assert outcome.result["completed"] == 10
    for outcome in run.survivors(2):
        assert outcome.error == "CommTimeoutError" and "store" in outcome.message


# Small `direct` calls on one host run on the group's shared-memory board, where ranks wait on
# each other's slots instead of messages: the same faults must be caught there too.
BOARD = {"MESHCOMM_ALGO": "direct", "FAULT_COUNT": "64"}


# two_shot posts by reference at every size. From 768 KiB to 4 MiB among up to 4 ranks (1 MiB by default here)
# its ranks put their inputs and results in their staging areas; above, they write into each other's outputs.
TWO_SHOT = {"MESHCOMM_ALGO": "all_reduce:two_shot"}
TWO_SHOT_WRITING = {**TWO_SHOT, "FAULT_COUNT": str((1 << 20) + 16)}
# A gather's blocks of more than 1 MiB leave their slots, and are not staged even where ranks outnumber cores: the
# members write into the root's output.
PUSHED = {"MESHCOMM_ALGO": "gather:direct", "FAULT_COUNT": str((1 << 18) + 16)}


@pytest.mark.timeout(100)
@pytest.mark.parametrize("collective, victim, env", [("all_reduce", 1, BOARD), ("barrier", 0, BOARD),
                                                      ("all_reduce", 2, TWO_SHOT), ("all_reduce", 0, TWO_SHOT),
                                                      ("all_reduce", 2, TWO_SHOT_WRITING), ("gather", 0, PUSHED),
                                                      ("gather", 2, PUSHED)])
def test_a_sigkill_during_board_collectives_is_named(tmp_path, collective, victim, env) -> None:
    run = run_scenario(tmp_path, 3, "kill", collective, victim, timeout=60, env=env)
    survivors_of_a_sigkill(run, victim)


# An all_to_all of 1 MiB between 2 ranks with a core each stages its posts in turns of its staging area's halves:
# a poster returns without waiting for its reader, and waits for it before it stages into that half again.
DEFERRED = {"MESHCOMM_ALGO": "all_to_all:direct"}


@pytest.mark.timeout(100)
@pytest.mark.parametrize("victim", [0, 1])
def test_a_sigkill_between_staged_posts_whose_readers_were_not_waited_for_is_named(tmp_path, victim) -> None:
    run = run_scenario(tmp_path, 2, "kill", "all_to_all", victim, timeout=60, env=DEFERRED)
    survivors_of_a_sigkill(run, victim)


@pytest.mark.timeout(100)
@needs_compiled
@pytest.mark.parametrize("collective, victim", [("all_reduce", 1), ("broadcast", 0), ("all_to_all", 2)])
def test_a_sigkill_during_a_compiled_board_wait_is_named_in_time(tmp_path, collective, victim) -> None:
    run = run_scenario(tmp_path, 3, "kill", collective, victim, timeout=60, env=BOARD)
    for outcome in survivors_of_a_sigkill(run, victim):
        assert outcome.result["native"], "the survivors ran the pure-Python path"
        # Named by the liveness check, not by the call's 60 s timeout: the usual 5 s bound (docs/failures.md).
        assert outcome.result["ended"] - run.kill_time < 5.0, outcome.message


@pytest.mark.timeout(100)
def test_a_desync_on_the_board_is_caught_on_every_rank(tmp_path) -> None:
    run = run_scenario(tmp_path, 3, "desync", "all_reduce", 1, "all_gather", timeout=60, env=BOARD)
    assert_clean(run, None)
    for outcome in run.outcomes:
        assert outcome.error in ("CollectiveMismatchError", "PeerLostError"), outcome.message
        assert "all_gather" in outcome.message and "all_reduce" in outcome.message


@pytest.mark.timeout(100)
def test_a_rank_running_the_call_as_messages_is_caught_by_a_rank_on_the_board(tmp_path) -> None:
    # The victim's call is too large for the board (it goes as messages); the others' fits.
    run = run_scenario(tmp_path, 3, "size", "all_reduce", 2, timeout=60,
                       env={**BOARD, "FAULT_COUNT": str(16 << 10)})
    assert_clean(run, None)
    for outcome in run.outcomes:
        assert outcome.error in ("CollectiveMismatchError", "PeerLostError"), outcome.message
        assert "16385 elements" in outcome.message


@pytest.mark.slow
@pytest.mark.timeout(100)
def test_a_rank_that_never_arrives_at_the_board_is_named(tmp_path) -> None:
    run = run_scenario(tmp_path, 3, "never", "all_reduce", 2, timeout=3, env=BOARD)
    assert_clean(run, 2)
    for outcome in run.survivors(2):
        assert outcome.error == "CommTimeoutError"
        assert "seq 1" in outcome.message and "ranks [2] had not arrived" in outcome.message


@pytest.mark.timeout(100)
def test_abort_reaches_ranks_waiting_on_the_board(tmp_path) -> None:
    run = run_scenario(tmp_path, 3, "abort", "all_reduce", 1, timeout=60, env=BOARD)
    assert_clean(run, None)
    assert all(outcome.error == "AbortedError" for outcome in run.outcomes), [o.message for o in run.outcomes]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("late", [0.0, 0.3])
def test_a_rank_serving_the_store_that_exits_early_leaves_it_to_the_others(late) -> None:
    # Rank 0 leaves right after its last call, with or without destroy_process_group; the others' later calls
    # still need its store. Repeated: the exit races the late ranks' first board call.
    for _ in range(3):
        exits = run_program(EARLY_EXIT, 4, [str(late)], timeout=90)
        for rank, done in enumerate(exits):
            assert done.returncode == 0, f"rank {rank}: {done.stderr[-2000:]}"
        results = sorted(line for done in exits for line in done.stdout.splitlines() if line.startswith("RESULT"))
        assert results == ["RESULT 0 [3, 3, 3]", "RESULT 1 [3, 3, 3]", "RESULT 2 [7, 7, 7]", "RESULT 3 [7, 7, 7]"]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks, calls", [(3, CALLS), (8, ("scatter", "all_to_all", "send"))])
def test_rank_0_leaving_right_after_its_last_call_never_breaks_its_peers(nranks, calls) -> None:
    # Rank 0 serves the store and is root of every rooted call; it leaves at once, with or without
    # destroy_process_group(), while the others (started a random while later) still make the same calls.
    # benchmarks/early_exit.py runs the whole matrix, repeated, on a loaded machine.
    for call in calls:
        for count, leaving in ((4, "exit"), (40000, "exit"), (4, "destroy")):
            exits = run_program(LEAVE_EARLY, nranks, [call, str(count), leaving], timeout=60)
            for rank, done in enumerate(exits):
                assert done.returncode == 0, f"{call} {count} rank {rank}: {done.stderr[-2000:]}"
                assert f"RESULT {rank} ok" in done.stdout, f"{call} {count} rank {rank}: {done.stdout}"
