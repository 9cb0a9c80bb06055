"""MPI.Intercomm: the null intercommunicator in-process, and real ones between the even and odd ranks of a job."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mpi.programs import run_program

REPO = Path(__file__).resolve().parents[2]


def test_the_null_intercommunicator_refuses_every_call_with_err_comm() -> None:
    from meshcomm import MPI

    null = MPI.Intercomm()
    assert null == MPI.COMM_NULL and null is not MPI.COMM_NULL and not null
    for call, args in ((null.Get_remote_size, ()), (null.Get_remote_group, ()), (null.Merge, (True,)),
                       (null.Dup, ()), (null.Split, (0, 0)), (null.Is_inter, ()), (null.Bcast, (None, 0))):
        with pytest.raises(MPI.Exception) as caught:
            call(*args)
        assert caught.value.Get_error_class() == MPI.ERR_COMM, call


def test_get_parent_is_a_null_intercommunicator_as_nothing_was_spawned() -> None:
    from meshcomm import MPI

    parent = MPI.Comm.Get_parent()
    assert type(parent) is MPI.Intercomm and parent == MPI.COMM_NULL


@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_intercomms_move_data_between_the_two_groups_by_mpis_rules(nranks: int) -> None:
    run_program("intercomm_program.py", nranks, timeout=150)
