"""MPI.File: opening errors name what was wrong before any data moves; a file shared by 1-4 ranks."""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.programs import run_program


def _error_class(call, *args) -> int:
    from meshcomm import MPI

    with pytest.raises(MPI.Exception) as caught:
        call(*args)
    return caught.value.Get_error_class()


def test_opening_errors_are_mpis_error_classes(tmp_path) -> None:
    from meshcomm import MPI

    missing, existing = tmp_path / "missing", tmp_path / "existing"
    existing.write_bytes(b"abc")
    assert _error_class(MPI.File.Open, MPI.COMM_SELF, missing, MPI.MODE_RDONLY) == MPI.ERR_NO_SUCH_FILE
    assert _error_class(MPI.File.Open, MPI.COMM_SELF, existing,
                        MPI.MODE_RDWR | MPI.MODE_CREATE | MPI.MODE_EXCL) == MPI.ERR_FILE_EXISTS
    assert _error_class(MPI.File.Open, MPI.COMM_SELF, existing, MPI.MODE_RDONLY | MPI.MODE_RDWR) == MPI.ERR_AMODE
    assert _error_class(MPI.File.Open, MPI.COMM_SELF, existing, MPI.MODE_RDONLY | MPI.MODE_CREATE) == MPI.ERR_AMODE
    assert _error_class(MPI.File.Delete, missing) == MPI.ERR_NO_SUCH_FILE


def test_access_the_mode_forbids_is_refused_and_the_file_is_untouched(tmp_path) -> None:
    from meshcomm import MPI

    path = tmp_path / "data"
    path.write_bytes(bytes(range(8)))
    fh = MPI.File.Open(MPI.COMM_SELF, path, MPI.MODE_RDONLY)
    assert _error_class(fh.Write_at, 0, np.zeros(2, dtype=np.int32)) == MPI.ERR_READ_ONLY
    assert _error_class(fh.Set_view, 0, MPI.INT, MPI.SHORT.Create_contiguous(3)) == MPI.ERR_TYPE  # 6 bytes: not whole ints
    got = np.zeros(3, dtype=np.int32)
    status = MPI.Status()
    fh.Read_at(0, got, status)  # 8 bytes are there: two ints, the third untouched
    assert status.Get_count(MPI.BYTE) == 8 and got.tolist()[2] == 0
    assert got[:2].tobytes() == bytes(range(8))
    fh.Close()
    assert path.read_bytes() == bytes(range(8)) and fh == MPI.FILE_NULL


def test_a_datarep_with_conversions_is_refused_and_one_registered_twice_is_a_duplicate(tmp_path) -> None:
    from meshcomm import MPI

    MPI.Register_datarep("meshcomm-test-natively", None, None, lambda datatype: datatype.extent)
    assert _error_class(MPI.Register_datarep, "meshcomm-test-natively", None, None, None) == MPI.ERR_DUP_DATAREP
    MPI.Register_datarep("meshcomm-test-converting", lambda *a: None, lambda *a: None, None)
    fh = MPI.File.Open(MPI.COMM_SELF, tmp_path / "f", MPI.MODE_RDWR | MPI.MODE_CREATE)
    fh.Set_view(0, MPI.BYTE, MPI.BYTE, "meshcomm-test-natively")
    assert fh.Get_view()[3] == "meshcomm-test-natively"
    assert _error_class(fh.Set_view, 0, MPI.BYTE, MPI.BYTE, "meshcomm-test-converting") == \
        MPI.ERR_UNSUPPORTED_DATAREP
    assert _error_class(fh.Set_view, 0, MPI.BYTE, MPI.BYTE, "external32") == MPI.ERR_UNSUPPORTED_DATAREP
    fh.Close()


@pytest.mark.timeout(200)
@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_ranks_share_one_file_through_shared_ordered_strided_and_atomic_access(nranks: int) -> None:
    run_program("file_program.py", nranks, timeout=150)
