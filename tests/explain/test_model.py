"""The trace: drawn from the executor's schedules, stepped by the checker, generic over the registry."""

from __future__ import annotations

import pytest

from meshcomm.algorithms import ALGORITHMS, get_schedule
from meshcomm.algorithms.checker import ScheduleError
from meshcomm.algorithms.problem import ROOTED, Problem
from meshcomm.algorithms.schedule import INPUT, OUTPUT, SCRATCH, Copy, Recv, Schedule, Send, Slice
from meshcomm.explain import build_trace, make_problem
from meshcomm.explain.model import ranks_label

CASES = [(collective, name) for collective, names in ALGORITHMS.items() for name in names]


@pytest.mark.parametrize(("collective", "name"), CASES)
def test_trace_holds_exactly_the_schedules_get_schedule_returns(collective: str, name: str) -> None:
    problem = make_problem(collective, 5, root=2 if collective in ROOTED else 0)
    trace = build_trace(problem, name)
    assert trace.schedules == tuple(get_schedule(problem, rank, name) for rank in range(5))
    assert len(trace.steps) == max(len(s.steps) for s in trace.schedules)


@pytest.mark.parametrize(("collective", "name"), CASES)
def test_every_send_of_every_schedule_is_one_drawn_message(collective: str, name: str) -> None:
    trace = build_trace(make_problem(collective, 5), name)
    for step in trace.steps:
        drawn = sorted((m.sender, m.receiver, str(m.src)) for m in step.messages)
        scheduled = sorted(
            (rank, op.peer, str(op.src))
            for rank, schedule in enumerate(trace.schedules)
            if step.index < len(schedule.steps)
            for op in schedule.steps[step.index]
            if isinstance(op, Send)
        )
        assert drawn == scheduled


@pytest.mark.parametrize(("collective", "name"), CASES)
def test_every_defined_output_chunk_ends_final(collective: str, name: str) -> None:
    n, root = 5, 3
    problem = make_problem(collective, n, root=root if collective in ROOTED else 0)
    trace = build_trace(problem, name)
    end = trace.steps[-1].state if trace.steps else trace.start
    for rank in range(n):
        # The definition leaves these outputs unconstrained: reduce off the root, exscan on rank 0.
        if (collective == "reduce" and rank != root) or (collective == "exscan" and rank == 0):
            continue
        cells = [cell for cell in end[rank].get(OUTPUT, ()) if cell is not None]
        assert all(cell.final for cell in cells), (rank, cells)


def test_all_reduce_chunks_are_the_rings_blocks_and_labels_name_the_summed_ranks() -> None:
    trace = build_trace(make_problem("all_reduce", 3, 6), "ring")
    assert [(c.start, c.stop) for c in trace.chunks[OUTPUT]] == [(0, 2), (2, 4), (4, 6)]
    assert [cell.label for cell in trace.start[1][INPUT]] == ["1"]
    assert [cell.label for cell in trace.start[1][OUTPUT]] == ["-", "-", "-"]
    assert [cell.label for cell in trace.steps[-1].state[0][OUTPUT]] == ["0+1+2"] * 3


def test_gather_labels_each_block_with_its_source_rank() -> None:
    trace = build_trace(make_problem("gather", 4, 2, root=1), "linear")
    root_output = trace.steps[-1].state[1][OUTPUT]
    assert [cell.label for cell in root_output] == ["0", "1", "2", "3"]
    assert all(cell is None for cell in trace.steps[-1].state[0][OUTPUT])  # non-roots have no output


def test_messages_carry_what_the_sender_holds_after_its_local_operations() -> None:
    # Ring step 0 copies input to output and sends from output in the same step.
    trace = build_trace(make_problem("all_reduce", 4, 4), "ring")
    assert {(m.sender, m.carries, m.reduce) for m in trace.steps[0].messages} == {(r, str(r), True) for r in range(4)}
    assert all(local.carries == str(local.rank) for local in trace.steps[0].local)


def test_changed_marks_only_chunks_written_by_the_step() -> None:
    trace = build_trace(make_problem("all_reduce", 4, 4), "ring")
    step = trace.steps[1]  # no local operations: only the received chunks change
    changed = {(rank, i) for rank in range(4) for i, cell in enumerate(step.state[rank][OUTPUT]) if cell.changed}
    written = {(m.receiver, m.dst.offset) for m in step.messages}
    assert changed == written


def test_barrier_knowledge_grows_to_everyone() -> None:
    trace = build_trace(make_problem("barrier", 6), "dissemination")
    assert not trace.moves_data
    assert trace.heard_at_start == tuple((r,) for r in range(6))
    assert trace.steps[-1].heard == (tuple(range(6)),) * 6


def test_count_means_buffer_block_or_pair_block_by_collective() -> None:
    assert make_problem("all_reduce", 4, 8).counts == (8,)
    assert make_problem("all_gather", 4, 3).counts == (3, 3, 3, 3)
    assert make_problem("all_to_all", 2, 5).counts == (5, 5, 5, 5)
    assert make_problem("barrier", 3).counts == ()
    assert make_problem("all_reduce", 4).counts == (4,)  # default: one element per rank's chunk


def test_cost_bytes_follow_the_dtype() -> None:
    small = build_trace(make_problem("all_reduce", 4, 8), "ring", dtype="float32").cost
    large = build_trace(make_problem("all_reduce", 4, 8), "ring", dtype="float64").cost
    assert large.bytes_sent == 2 * small.bytes_sent and large.bytes_reduced == 2 * small.bytes_reduced


def test_unknown_dtype_is_a_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match="dtype must be one of .*got 'complex7'"):
        build_trace(make_problem("all_reduce", 2), "ring", dtype="complex7")


@pytest.mark.parametrize(
    ("ranks", "label"),
    [((0,), "0"), ((2, 0, 1), "0+1+2"), ((0, 1, 2, 3), "0+1+2+3"), ((0, 1, 2, 3, 4), "0..4"),
     ((0, 2, 3, 4, 5, 7), "0+2..5+7"), ((0, 1, 5, 6, 7), "0+1+5..7")],
)
def test_rank_labels_shorten_long_runs(ranks: tuple[int, ...], label: str) -> None:
    assert ranks_label(ranks) == label


def _short_receive(problem: Problem, rank: int) -> Schedule:
    """A two-rank all_reduce whose receive expects fewer elements than its peer sends."""
    whole = Slice(OUTPUT, 0, problem.count)
    short = Slice(SCRATCH, 0, 1)
    steps = ((Copy(Slice(INPUT, 0, problem.count), whole),), (Send(1 - rank, whole), Recv(1 - rank, short)))
    return Schedule("all_reduce", "short_receive", rank, problem.nranks, steps, scratch=1)


def _exchange(problem: Problem, rank: int) -> Schedule:
    """A two-rank exchange into scratch, registered by the test as if another module had added it."""
    whole = Slice(OUTPUT, 0, problem.count)
    received = Slice(SCRATCH, 0, problem.count)
    steps = ((Copy(Slice(INPUT, 0, problem.count), whole),), (Send(1 - rank, whole), Recv(1 - rank, received)))
    return Schedule("all_reduce", "exchange", rank, problem.nranks, steps, scratch=problem.count)


def test_an_algorithm_registered_later_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ALGORITHMS["all_reduce"], "exchange", _exchange)
    trace = build_trace(make_problem("all_reduce", 2, 3), "exchange")
    assert [cell.label for cell in trace.steps[-1].state[0][SCRATCH]] == ["1"]
    assert [cell.label for cell in trace.steps[-1].state[1][SCRATCH]] == ["0"]


def test_a_schedule_the_checker_rejects_is_not_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ALGORITHMS["all_reduce"], "short_receive", _short_receive)
    with pytest.raises(ScheduleError, match="elements sent but 1 expected"):
        build_trace(make_problem("all_reduce", 2, 3), "short_receive")
