"""meshcomm.MPI: local behaviour in-process, and a multi-rank program under `meshcomm run`."""

from __future__ import annotations

import array
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.mpi.programs import run_program
from tests.ranks import run_command

REPO = Path(__file__).resolve().parents[2]


def test_importing_meshcomm_does_not_import_the_mpi_face() -> None:
    code = "import sys, meshcomm; assert 'meshcomm.MPI' not in sys.modules and 'meshcomm.mpi' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=60)


def test_the_face_works_without_mpi4py_installed() -> None:
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "from meshcomm import MPI\n"
            "assert MPI.COMM_WORLD.Get_size() == 1 and MPI.COMM_WORLD.allreduce(3) == 3\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=60)


def test_message_specs_view_the_callers_memory() -> None:
    from meshcomm import MPI
    from meshcomm.mpi.messages import read_spec, read_vector

    data = np.arange(10, dtype=np.float64)
    assert read_spec(data, "buf").datatype == MPI.DOUBLE
    piece = read_spec([data, (3, 2), MPI.DOUBLE], "buf", writable=True).array
    piece[...] = -1
    assert list(data[2:5]) == [-1, -1, -1]
    assert read_spec(array.array("i", [1, 2]), "buf").datatype == MPI.INT
    assert read_spec([bytearray(8), "i"], "buf").array.size == 2
    vector = read_vector([data, ([1, 2], [0, 5]), MPI.DOUBLE], "buf", 2)
    assert list(vector.piece(1)) == [5.0, 6.0]
    with pytest.raises(ValueError, match="does not fit"):
        read_spec([data, 11, MPI.DOUBLE], "buf")
    with pytest.raises(TypeError, match="buffer protocol"):
        read_spec(object(), "buf")


def test_reduce_local_applies_every_predefined_op() -> None:
    from meshcomm import MPI

    cases = {MPI.SUM: [5, 5], MPI.PROD: [4, 6], MPI.MAX: [4, 3], MPI.MIN: [1, 2], MPI.LAND: [1, 1],
             MPI.BXOR: [5, 1], MPI.REPLACE: [4, 3], MPI.NO_OP: [1, 2]}
    for op, expected in cases.items():
        inout = np.array([4, 3], dtype=np.int64)
        op.Reduce_local(np.array([1, 2], dtype=np.int64), inout)
        assert list(inout) == expected, op
    with pytest.raises(ValueError, match="as many elements"):
        MPI.SUM.Reduce_local(np.zeros(2), np.zeros(3))


def test_object_ops_match_mpi4py() -> None:
    from meshcomm import MPI

    assert MPI.MAXLOC((3, 1), (3, 0)) == (3, 0) and MPI.MINLOC((1, 5), (2, 0)) == (1, 5)
    assert MPI.REPLACE(1, 2) == 2 and MPI.NO_OP(1, 2) == 1 and MPI.LXOR(1, 0) is True


def test_errors_name_their_class() -> None:
    from meshcomm import MPI

    error = MPI.Exception(MPI.ERR_ROOT, "root must be in [0, 2), got 5")
    assert error.Get_error_class() == MPI.ERR_ROOT and "ERR_ROOT" in str(error) and "got 5" in str(error)


def _launch(launcher: str, nranks: int) -> list[str]:
    program = str(Path(__file__).with_name("mpi_program.py"))
    if launcher == "mpiexec":
        if shutil.which("mpiexec") is None:
            pytest.skip("mpiexec is not installed")
        return ["mpiexec", "-n", str(nranks), sys.executable, program]
    return [sys.executable, "-m", "meshcomm", "run", "-n", str(nranks), "--timeout", "60", program]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("launcher,nranks", [("meshcomm", 1), ("meshcomm", 2), ("meshcomm", 3), ("mpiexec", 3)])
def test_program_runs_under_meshcomm_run_and_mpiexec(launcher: str, nranks: int) -> None:
    done = run_command(_launch(launcher, nranks), cwd=REPO, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    # Found in the whole text, not per line: mpiexec does not prefix lines, and two ranks' writes can
    # land within one line ("OK rank 1 of 3OK rank 2 of 3").
    assert sorted(re.findall(r"OK (rank \d+ of \d+)", done.stdout)) == [
        f"rank {r} of {nranks}" for r in range(nranks)
    ]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_started_and_persistent_collectives_keep_order_and_let_ranks_go_on(nranks: int) -> None:
    run_program("nonblocking_program.py", nranks)


def test_the_public_names_of_the_face_all_exist() -> None:
    from meshcomm import MPI

    assert all(hasattr(MPI, name) for name in MPI.__all__)
    wanted = """COMM_WORLD COMM_SELF COMM_NULL IN_PLACE Request Status Exception Get_processor_name Get_version
        Wtime Query_thread SUM PROD MAX MIN LAND LOR LXOR BAND BOR BXOR MAXLOC MINLOC REPLACE NO_OP OP_NULL
        INT DOUBLE FLOAT BYTE CHAR LONG DOUBLE_INT ERR_ROOT ERR_RANK ERR_TAG ERR_COUNT ANY_SOURCE ANY_TAG
        PROC_NULL UNDEFINED""".split()
    assert set(wanted) <= set(MPI.__all__)
    methods = """Get_rank Get_size rank size Dup Clone Split Free Barrier barrier bcast scatter gather allgather
        alltoall reduce allreduce scan exscan Bcast Scatter Scatterv Gather Gatherv Allgather Allgatherv Alltoall
        Alltoallv Reduce Allreduce Reduce_scatter Reduce_scatter_block Scan Exscan send ssend bsend recv isend
        issend ibsend irecv sendrecv probe iprobe Send Ssend Bsend Recv Isend Issend Ibsend Irecv Sendrecv
        Probe Iprobe""".split()
    assert [m for m in methods if not hasattr(MPI.Intracomm, m)] == []
    families = "Wait Test wait test Waitany Waitall Waitsome Testany Testall Testsome waitany waitall testall".split()
    assert [m for m in families if not hasattr(MPI.Request, m)] == []
