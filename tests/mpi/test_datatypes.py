"""Derived datatypes: bounds, type maps, packing, decoding, numpy conversion, and messages between ranks."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.mpi.programs import run_program

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def MPI():
    from meshcomm import MPI

    return MPI


def _packed(MPI, datatype, buf) -> np.ndarray:
    """The bytes Pack writes for buf seen through datatype, as the elements of buf's dtype."""
    out = bytearray(datatype.Pack_size(1, MPI.COMM_SELF))
    position = datatype.Pack(buf, out, 0, MPI.COMM_SELF)
    assert position == len(out)
    return np.frombuffer(bytes(out), dtype=buf.dtype)


def test_a_vector_has_mpis_bounds_and_packs_the_strided_elements(MPI) -> None:
    column_pairs = MPI.INT.Create_vector(3, 2, 4)
    assert (column_pairs.size, column_pairs.lb, column_pairs.extent) == (24, 0, 40)
    data = np.arange(10, dtype=np.int32)
    assert np.array_equal(_packed(MPI, column_pairs, data), np.concatenate([data[0:2], data[4:6], data[8:10]]))
    backwards = MPI.INT.Create_vector(3, 2, -4)
    assert (backwards.lb, backwards.extent, backwards.true_lb) == (-32, 40, -32)


def test_a_struct_is_padded_to_its_widest_alignment_unless_resized(MPI) -> None:
    pair = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.DOUBLE, MPI.CHAR])
    assert (pair.size, pair.extent) == (9, 16)
    assert MPI.Datatype.Create_struct([1, 1], [0, 4], [MPI.INT, MPI.CHAR]).extent == 8
    assert pair.Create_resized(0, 9).extent == 9
    with pytest.raises(ValueError, match="as many"):
        MPI.Datatype.Create_struct([1], [0], [MPI.INT, MPI.FLOAT])


def test_a_subarray_moves_the_same_elements_numpy_slicing_picks(MPI) -> None:
    whole = np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6)
    for order, view in ((MPI.ORDER_C, whole), (MPI.ORDER_F, np.asfortranarray(whole))):
        # The same shape in either order: Fortran's first dimension is numpy's first axis of a Fortran array.
        block = MPI.DOUBLE.Create_subarray(list(whole.shape), [2, 3, 2], [1, 2, 3], order=order)
        assert block.extent == whole.nbytes and block.size == 12 * 8
        got = np.zeros(12)
        MPI.COMM_SELF.Sendrecv([view, 1, block], 0, 0, got, 0, 0)
        expected = whole[1:3, 2:5, 3:5]
        assert np.array_equal(got, expected.reshape(-1) if order == MPI.ORDER_C else expected.reshape(-1, order="F"))


def test_receiving_through_an_indexed_type_leaves_the_gaps_alone(MPI) -> None:
    evens = MPI.INT.Create_indexed([2, 1], [0, 5]).Commit()
    target = np.full(8, -1, dtype=np.int32)
    MPI.COMM_SELF.Sendrecv(np.array([7, 8, 9], dtype=np.int32), 0, 0, [target, 1, evens], 0, 0)
    assert target.tolist() == [7, 8, -1, -1, -1, 9, -1, -1]


def test_absolute_addresses_with_bottom_reach_the_arrays_themselves(MPI) -> None:
    a, b = np.arange(3, dtype=np.int64), np.arange(2, dtype=np.float32) + 0.5
    both = MPI.Datatype.Create_struct([3, 2], [MPI.Get_address(a), MPI.Get_address(b)], [MPI.INT64_T, MPI.FLOAT])
    assert MPI.Aint_diff(MPI.Get_address(a[1:]), MPI.Get_address(a)) == 8
    out = bytearray(both.size)
    MPI.COMM_SELF.Sendrecv([MPI.BOTTOM, 1, both], 0, 0, out, 0, 0)
    assert bytes(out) == a.tobytes() + b.tobytes()


def test_decode_and_pickle_make_the_same_type_again(MPI) -> None:
    made = MPI.DOUBLE.Create_hvector(2, 3, 40).Create_resized(-8, 100)
    base, name, params = made.decode()
    assert (name, params) == ("RESIZED", {"lb": -8, "extent": 100})
    assert base.decode()[1:] == ("HVECTOR", {"count": 2, "blocklength": 3, "stride": 40})
    again = pickle.loads(pickle.dumps(made))
    assert again != made and again.Get_envelope() == made.Get_envelope()
    assert (again.lb, again.extent, again.size, again.true_extent) == (-8, 100, 48, 64)
    assert pickle.loads(pickle.dumps(MPI.INT)) is MPI.INT


def test_named_types_map_to_numpy_codes_and_back(MPI) -> None:
    assert MPI.Datatype.fromcode("i4") is MPI.INT32_T and MPI.INT32_T.tocode() == "i4"
    assert MPI.Datatype.fromcode("d") is MPI.DOUBLE and MPI.FLOAT16_T.typestr == "f2"
    assert MPI.DOUBLE_INT.extent == np.dtype("d,i", align=True).itemsize and MPI.DOUBLE_INT.size == 12
    with pytest.raises(ValueError):
        MPI.Datatype.fromcode("abc")
    with pytest.raises(MPI.Exception) as caught:
        MPI.INT.Free()
    assert caught.value.Get_error_class() == MPI.ERR_TYPE


def test_numpy_dtypes_convert_both_ways(MPI) -> None:
    from meshcomm.mpi.util.dtlib import from_numpy_dtype, to_numpy_dtype

    record = np.dtype("i1,(2,3)f8,i4", align=True)
    datatype = from_numpy_dtype(record)
    assert datatype.extent == record.itemsize and datatype.size == 1 + 48 + 4
    assert to_numpy_dtype(datatype) == record
    with pytest.raises(ValueError):
        from_numpy_dtype(np.dtype(">i4" if sys.byteorder == "little" else "<i4"))
    with pytest.raises(ValueError):
        to_numpy_dtype(MPI.INT.Create_subarray([4], [2], [1]))


def test_pack_external_writes_big_endian_and_unpacks_back(MPI) -> None:
    values = np.array([1, -2, 300], dtype=np.int32)
    out = bytearray(MPI.INT.Pack_external_size("external32", 3))
    assert MPI.INT.Pack_external("external32", values, out, 0) == 12
    assert bytes(out) == values.astype(">i4").tobytes()
    back = np.zeros(3, dtype=np.int32)
    assert MPI.INT.Unpack_external("external32", out, 0, back) == 12
    assert np.array_equal(back, values)


def test_a_message_through_a_negative_extent_is_refused(MPI) -> None:
    backwards = MPI.INT.Create_resized(0, -4)
    with pytest.raises(ValueError, match="negative"):
        MPI.COMM_SELF.Send([bytearray(8), None, backwards], 0, 0)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_derived_datatypes_move_between_ranks(nranks: int) -> None:
    run_program("datatype_program.py", nranks)
