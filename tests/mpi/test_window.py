"""MPI.Win: one-rank behaviour in-process, and a multi-rank program under `meshcomm run`."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from tests.mpi.programs import run_program

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def MPI():
    from meshcomm import MPI

    return MPI


def _error_class(MPI, call) -> int:
    with pytest.raises(MPI.Exception) as caught:
        call()
    return caught.value.Get_error_class()


def test_a_window_on_comm_self_reads_writes_and_accumulates_its_own_memory(MPI) -> None:
    memory = np.zeros(6, dtype=np.int32)
    win = MPI.Win.Create(memory, 4, MPI.INFO_NULL, MPI.COMM_SELF)
    origin = np.array([5, 6, 7], dtype=np.int32)
    win.Fence()
    win.Put(origin, 0, 1)
    win.Accumulate(np.ones(6, dtype=np.int32), 0, op=MPI.SUM)
    win.Fence()
    expected = np.ones(6, dtype=np.int32)
    expected[1:4] += origin
    assert np.array_equal(memory, expected)
    assert list(origin) == [5, 6, 7]  # the origin buffer is read, never written

    old, fetched = memory.copy(), np.zeros(1, dtype=np.int32)
    win.Lock(0)
    win.Fetch_and_op(np.array([10], dtype=np.int32), fetched, 0, 2, MPI.PROD)
    win.Compare_and_swap(np.array([-1], dtype=np.int32), np.array([old[0]], dtype=np.int32), fetched, 0, 0)
    got = np.zeros(6, dtype=np.int32)
    request = win.Rget(got, 0)
    request.Wait()
    win.Unlock(0)
    expected = old.copy()
    expected[2] *= 10
    expected[0] = -1
    assert int(fetched[0]) == old[0]
    assert np.array_equal(got, expected) and np.array_equal(memory, expected)
    win.Free()
    assert win == MPI.WIN_NULL


def test_window_attributes_name_and_memory(MPI) -> None:
    win = MPI.Win.Allocate(24, 8, MPI.INFO_NULL, MPI.COMM_SELF)
    memory = win.tomemory()
    assert len(memory) == 24 and memory.format == "B"
    assert win.attrs == (MPI.Get_address(memory), 24, 8)
    assert win.Get_attr(MPI.WIN_CREATE_FLAVOR) == MPI.WIN_FLAVOR_ALLOCATE == win.flavor
    assert win.model == MPI.WIN_UNIFIED
    win.Set_name("halo")
    assert win.Get_name() == "halo"
    assert MPI.Group.Compare(win.Get_group(), MPI.COMM_SELF.Get_group()) == MPI.IDENT
    with pytest.raises(ValueError):
        pickle.dumps(win)
    win.Free()
    assert MPI.WIN_NULL.Get_name() == "MPI_WIN_NULL"
    assert pickle.loads(pickle.dumps(MPI.WIN_NULL)) == MPI.WIN_NULL


def test_bad_window_arguments_raise_the_right_error_class(MPI) -> None:
    assert _error_class(MPI, lambda: MPI.Win.Allocate(-1, 1, MPI.INFO_NULL, MPI.COMM_SELF)) == MPI.ERR_SIZE
    assert _error_class(MPI, lambda: MPI.Win.Create(bytearray(8), 0, MPI.INFO_NULL, MPI.COMM_SELF)) == MPI.ERR_ARG
    assert _error_class(MPI, lambda: MPI.Win.Create(None, 1, MPI.INFO_NULL, MPI.COMM_NULL)) == MPI.ERR_COMM
    with pytest.raises(TypeError):
        MPI.Win((1, 2, 3))
    assert _error_class(MPI, MPI.WIN_NULL.Fence) == MPI.ERR_WIN


def test_misused_operations_are_refused_before_data_moves(MPI) -> None:
    memory = np.arange(4, dtype=np.int64)
    win = MPI.Win.Create(memory, 8, MPI.INFO_NULL, MPI.COMM_SELF)
    data = np.full(2, 9, dtype=np.int64)
    assert _error_class(MPI, lambda: win.Put(data, 0)) == MPI.ERR_RMA_SYNC
    assert _error_class(MPI, lambda: win.Unlock(0)) == MPI.ERR_RMA_SYNC
    assert _error_class(MPI, lambda: win.Lock(0, 99)) == MPI.ERR_LOCKTYPE
    win.Lock(0)
    assert _error_class(MPI, lambda: win.Lock(0)) == MPI.ERR_RMA_SYNC
    assert _error_class(MPI, lambda: win.Put(data, 0, 3)) == MPI.ERR_RMA_RANGE
    assert _error_class(MPI, lambda: win.Put(data, 1)) == MPI.ERR_RANK
    assert _error_class(MPI, lambda: win.Accumulate(data, 0, op=MPI.Op.Create(lambda a, b, t: None))) == MPI.ERR_OP
    doubles = data.astype(np.float64)
    assert _error_class(MPI, lambda: win.Accumulate(doubles, 0, (0, 2, MPI.INT64_T), MPI.SUM)) == MPI.ERR_TYPE
    with pytest.raises(ValueError):
        win.Fetch_and_op(data, np.zeros(2, dtype=np.int64), 0)
    with pytest.raises(ValueError):
        win.Compare_and_swap(data[:1], np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int64), 0)
    win.Unlock(0)
    assert list(memory) == [0, 1, 2, 3] and list(data) == [9, 9]
    win.Free()


def test_freeing_a_window_with_a_lock_held_is_refused(MPI) -> None:
    win = MPI.Win.Allocate(8, 1, MPI.INFO_NULL, MPI.COMM_SELF)
    win.Lock_all()
    assert _error_class(MPI, win.Free) == MPI.ERR_RMA_SYNC
    win.Unlock_all()
    win.Free()


def test_a_dynamic_window_addresses_attached_memory_by_address(MPI) -> None:
    win = MPI.Win.Create_dynamic(MPI.INFO_NULL, MPI.COMM_SELF)
    region = np.zeros(3, dtype=np.int16)
    win.Attach(region)
    win.Lock(0)
    win.Put(np.array([4, 5], dtype=np.int16), 0, MPI.Get_address(region) + 2)
    win.Unlock(0)
    assert list(region) == [0, 4, 5]
    assert win.attrs[:2] == (0, 0) and MPI.Get_address(win.tomemory()) == 0
    win.Detach(region)
    win.Lock(0)
    with pytest.raises(MPI.Exception) as caught:
        win.Put(np.array([1], dtype=np.int16), 0, MPI.Get_address(region))
        win.Flush(0)
    assert caught.value.Get_error_class() == MPI.ERR_RMA_RANGE
    win.Unlock(0)
    win.Free()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [2, 3])
def test_one_sided_operations_between_ranks(nranks: int) -> None:
    run_program("window_program.py", nranks)
