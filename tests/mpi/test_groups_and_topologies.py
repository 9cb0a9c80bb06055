"""MPI.Group, process topologies and neighbourhood collectives: local rules in-process, the rest under `meshcomm run`."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.mpi.programs import run_program
from tests.ranks import run_command

REPO = Path(__file__).resolve().parents[2]


def _group(ranks, me):
    from meshcomm.mpi.groups import Group

    return Group._of(ranks, me)


def test_group_arithmetic_keeps_each_groups_order() -> None:
    from meshcomm import MPI

    a, b = _group([4, 1, 7, 2], 7), _group([2, 9, 4], 7)
    assert a.Union(b)._handle.ranks == (4, 1, 7, 2, 9)
    assert a.Intersection(b)._handle.ranks == (4, 2) and b.Intersect(a)._handle.ranks == (2, 4)
    assert a.Difference(b)._handle.ranks == (1, 7) and a.Difference(b).Get_rank() == 1
    assert b.Get_rank() == MPI.UNDEFINED and a.Get_rank() == 2
    assert a.Translate_ranks([0, 2, 3, MPI.PROC_NULL], b) == [2, MPI.UNDEFINED, 0, MPI.PROC_NULL]
    assert a.Incl([3, 0])._handle.ranks == (2, 4) and a.Excl([1, 2])._handle.ranks == (4, 2)
    assert a.Range_incl([(3, 0, -2)])._handle.ranks == (2, 1) and a.Range_excl([(0, 2, 2)])._handle.ranks == (1, 2)
    assert MPI.Group.Compare(a, _group([2, 7, 1, 4], 0)) == MPI.SIMILAR
    assert a.Compare(a.Dup()) == MPI.IDENT and a.Compare(b) == MPI.UNEQUAL
    assert a.Difference(a) == MPI.GROUP_EMPTY and a.Incl([]) == MPI.GROUP_EMPTY


def test_bad_group_arguments_raise_before_anything_changes() -> None:
    from meshcomm import MPI

    a = _group([4, 1, 7], 4)
    with pytest.raises(MPI.Exception) as caught:
        a.Incl([0, 0])
    assert caught.value.Get_error_class() == MPI.ERR_RANK
    with pytest.raises(MPI.Exception, match="not in"):
        a.Translate_ranks([3], a)
    with pytest.raises(MPI.Exception) as caught:
        a.Range_incl([(0, 2, 0)])
    assert caught.value.Get_error_class() == MPI.ERR_ARG
    with pytest.raises(TypeError, match="MPI.Group"):
        a.Union([1, 2])
    with pytest.raises(ValueError, match="cannot be pickled"):
        pickle.dumps(a)
    assert pickle.loads(pickle.dumps(MPI.GROUP_EMPTY)) is MPI.GROUP_EMPTY
    copy = MPI.Group(a)
    copy.Free()
    assert copy == MPI.GROUP_NULL and a.Get_size() == 3
    with pytest.raises(MPI.Exception):
        MPI.GROUP_EMPTY.Free()


def test_group_handles_name_the_same_group() -> None:
    from meshcomm import MPI

    a = _group([3, 5], 5)
    assert MPI.Group.fromhandle(a.handle) == a and MPI.Group.f2py(a.py2f()) == a
    assert MPI.Group.fromint(0) == MPI.GROUP_NULL


@pytest.mark.parametrize("nnodes,dims", [(12, 2), (30, 3), (16, [0, 2, 0]), (7, 3), (1, 0), (36, [0, 0])])
def test_compute_dims_splits_evenly_and_keeps_the_given_sizes(nnodes, dims) -> None:
    from meshcomm import MPI

    given = [0] * dims if isinstance(dims, int) else list(dims)
    result = MPI.Compute_dims(nnodes, dims)
    assert int(np.prod(result)) == nnodes and len(result) == len(given)
    assert all(r == g for r, g in zip(result, given) if g)
    free = [r for r, g in zip(result, given) if not g]
    assert free == sorted(free, reverse=True)
    # As even as possible: no other split of the free part has a smaller largest side.
    best = {12: [4, 3], 30: [5, 3, 2], 16: [4, 2], 7: [7, 1, 1], 36: [6, 6]}
    if nnodes in best:
        assert free == best[nnodes]


def test_compute_dims_refuses_sizes_that_do_not_fill_the_grid() -> None:
    from meshcomm import MPI

    with pytest.raises(MPI.Exception) as caught:
        MPI.Compute_dims(10, [3, 0])
    assert caught.value.Get_error_class() == MPI.ERR_DIMS


def test_a_cartesian_grid_numbers_ranks_row_major() -> None:
    from meshcomm import MPI
    from meshcomm.mpi.topology import Cartesian

    grid = Cartesian([3, 4, 2], [True, False, False])
    for rank in range(24):
        assert grid.coords(rank) == list(np.unravel_index(rank, (3, 4, 2)))
        assert grid.rank_at(grid.coords(rank)) == rank
    assert grid.rank_at([-1, 0, 0]) == grid.rank_at([2, 0, 0])
    assert grid.shift(0, 1, 1) == (MPI.PROC_NULL, 2)  # (0, 0, 0): nothing below in the open dimension
    assert grid.labels(0) == ([0, 1, 2, 3, 4, 5], [1, 0, 3, 2, 5, 4])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_groups_topologies_and_neighbourhood_collectives_across_ranks(nranks: int) -> None:
    run_program("topology_program.py", nranks)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 4])
def test_the_halo_exchange_example_equals_the_one_process_solution(nranks: int) -> None:
    example = str(REPO / "examples" / "halo_exchange.py")
    command = [sys.executable, "-m", "meshcomm", "run", "-n", str(nranks), "--timeout", "60", example]
    done = run_command(command, cwd=REPO, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "equal the one-process numpy solution bit for bit" in done.stdout, done.stdout

