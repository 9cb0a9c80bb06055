"""meshcomm.MPI's environment: Info, error classes and handlers, attributes, ops as handles, the shim's rc."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.mpi.programs import run_program
from tests.ranks import run_command

REPO = Path(__file__).resolve().parents[2]


def test_info_is_a_mapping_and_info_null_refuses_writes() -> None:
    from meshcomm import MPI

    info = MPI.Info.Create([("a", "1"), ("b", "2")])
    assert info.Get_nkeys() == 2 and info.Get_nthkey(1) == "b" and info["a"] == "1" and info.Get("c") is None
    info.update(c="3")
    assert info.popitem() == ("c", "3") and info.items() == [("a", "1"), ("b", "2")]
    copy = pickle.loads(pickle.dumps(info))
    assert copy.items() == info.items() and copy != info
    with pytest.raises(MPI.Exception) as caught:
        info.Delete("missing")
    assert caught.value.Get_error_class() == MPI.ERR_INFO_NOKEY
    info.Free()
    copy.Free()
    assert info == MPI.INFO_NULL and not info
    with pytest.raises(KeyError):
        MPI.INFO_NULL["a"] = "1"
    with pytest.raises(MPI.Exception) as caught:
        MPI.INFO_NULL.Get("a")
    assert caught.value.Get_error_class() == MPI.ERR_INFO
    assert pickle.loads(pickle.dumps(MPI.INFO_ENV)) is MPI.INFO_ENV


def test_added_error_codes_keep_their_class_and_string_until_removed_in_order() -> None:
    from meshcomm import MPI

    errorclass = MPI.Add_error_class()
    code = MPI.Add_error_code(errorclass)
    assert code == errorclass + 1 and MPI.Get_error_class(code) == errorclass
    MPI.Add_error_string(code, "disk on fire")
    assert MPI.Get_error_string(code) == "disk on fire" and MPI.Exception(code).Get_error_class() == errorclass
    with pytest.raises(MPI.Exception):
        MPI.Remove_error_class(errorclass)  # it still has a code
    with pytest.raises(MPI.Exception):
        MPI.Remove_error_code(code)  # it still has a string
    MPI.Remove_error_string(code)
    MPI.Remove_error_code(code)
    MPI.Remove_error_class(errorclass)
    with pytest.raises(MPI.Exception) as caught:
        MPI.Get_error_class(errorclass)
    assert caught.value.Get_error_class() == MPI.ERR_ARG
    with pytest.raises(MPI.Exception):
        MPI.Add_error_string(MPI.ERR_OTHER, "predefined strings do not change")


def test_exceptions_compare_as_their_codes() -> None:
    from meshcomm import MPI

    error = MPI.Exception(MPI.ERR_TAG)
    assert error == MPI.ERR_TAG and MPI.ERR_COMM > error and error > MPI.SUCCESS and not MPI.Exception(MPI.SUCCESS)
    assert repr(error) == f"MPI.Exception({MPI.ERR_TAG})" and str(error) == MPI.Get_error_string(MPI.ERR_TAG)
    assert MPI.Exception(-5) == MPI.ERR_UNKNOWN


def test_datatype_attributes_are_copied_and_deleted_through_their_callbacks(capsys) -> None:
    from meshcomm import MPI

    deleted = []
    keyval = MPI.Datatype.Create_keyval(copy_fn=True, delete_fn=lambda t, k, v: deleted.append(v))
    dup = MPI.INT.Dup()
    dup.Set_attr(keyval, "first")
    dup.Set_attr(keyval, "second")  # replacing runs the delete callback on the old value
    assert deleted == ["first"]
    twin = dup.Dup()
    assert twin.Get_attr(keyval) == "second"
    twin.Free()
    assert deleted == ["first", "second"]
    dup.Free()
    assert MPI.Datatype.Free_keyval(keyval) == MPI.KEYVAL_INVALID
    with pytest.raises(MPI.Exception) as caught:
        MPI.INT.Get_attr(keyval)
    assert caught.value.Get_error_class() == MPI.ERR_KEYVAL

    def failing(obj, k, v):
        raise ValueError("no")

    keyval = MPI.Datatype.Create_keyval(delete_fn=failing)
    dup = MPI.INT.Dup()
    dup.Set_attr(keyval, 1)
    with pytest.raises(MPI.Exception) as caught:
        dup.Delete_attr(keyval)
    assert caught.value.Get_error_class() == MPI.ERR_OTHER and "ValueError" in capsys.readouterr().err
    assert dup.Get_attr(keyval) is None
    dup.Free()
    MPI.Datatype.Free_keyval(keyval)


def test_error_handlers_are_called_with_the_object_and_code() -> None:
    from meshcomm import MPI

    comm = MPI.COMM_SELF.Dup()
    seen = []
    handler = MPI.Comm.Create_errhandler(lambda obj, code: seen.append((obj == comm, code)))
    assert comm.Get_errhandler() == MPI.ERRORS_RETURN
    comm.Set_errhandler(handler)
    comm.Call_errhandler(MPI.ERR_COUNT)
    assert seen == [(True, MPI.ERR_COUNT)]
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    comm.Call_errhandler(MPI.ERR_COUNT)  # returns: the error is the caller's to raise
    with pytest.raises(MPI.Exception) as caught:
        comm.Set_errhandler(MPI.ERRHANDLER_NULL)
    assert caught.value.Get_error_class() == MPI.ERR_ERRHANDLER
    handler.Free()
    comm.Free()
    with pytest.raises(MPI.Exception) as caught:
        MPI.COMM_NULL.Get_errhandler()
    assert caught.value.Get_error_class() == MPI.ERR_COMM


def test_ops_are_handles_and_user_ops_reduce_with_their_datatype() -> None:
    from meshcomm import MPI

    told = _DATATYPES_TOLD
    told.clear()
    op = MPI.Op.Create(_add, commute=True)
    assert MPI.Op.fromhandle(op.handle) == op and MPI.Op(op) == op and op != MPI.SUM and not op.is_predefined
    inout = np.array([1, 2, 3], dtype=np.int32)
    op.Reduce_local(np.array([10, 20, 30], dtype=np.int32), inout)
    assert inout.tolist() == [11, 22, 33] and told == [MPI.INT]
    clone = pickle.loads(pickle.dumps(op))
    assert clone != op and clone.Is_commutative()
    clone.Free()
    op.Free()
    assert op == MPI.OP_NULL and pickle.loads(pickle.dumps(MPI.MAXLOC)) is MPI.MAXLOC
    x, y = ([1], 0), ([1], 1)
    assert MPI.MINLOC(y, x) is x and MPI.MAXLOC(x, y) is x
    with pytest.raises(ValueError):
        MPI.OP_NULL(1, 2)


def test_a_session_offers_world_and_self_process_sets() -> None:
    from meshcomm import MPI

    session = MPI.Session.Init()
    names = [session.Get_nth_pset(n) for n in range(session.Get_num_psets())]
    assert names == ["mpi://WORLD", "mpi://SELF"]
    assert session.Get_pset_info("mpi://SELF").Get("mpi_size") == "1"
    assert session.Create_group("mpi://WORLD").Get_size() == MPI.COMM_WORLD.Get_size()
    with pytest.raises(MPI.Exception) as caught:
        session.Create_group("mpi://NOWHERE")
    assert caught.value.Get_error_class() == MPI.ERR_ARG
    session.Finalize()
    assert session == MPI.SESSION_NULL
    with pytest.raises(MPI.Exception) as caught:
        session.Get_num_psets()
    assert caught.value.Get_error_class() == MPI.ERR_SESSION


_DATATYPES_TOLD: list = []


def _add(invec, inoutvec, datatype) -> None:
    """A user op (at module level, so it pickles) that notes the datatype it was told."""
    _DATATYPES_TOLD.append(datatype)
    inoutvec[:] = np.asarray(invec) + np.asarray(inoutvec)


def test_the_shims_rc_checks_its_option_names() -> None:
    code = ("import mpi4py, mpi4py.rc\n"
            "assert mpi4py.rc is sys.modules['mpi4py.rc'] and mpi4py.get_config() == {}\n"
            "mpi4py.rc.thread_level = 'single'\n"
            "try:\n    mpi4py.rc(bogus=1)\nexcept TypeError:\n    print('refused')\n")
    shim = REPO / "meshcomm" / "mpi" / "suite" / "shim"
    done = run_command([sys.executable, "-c", "import sys\n" + code], cwd=REPO, timeout=60,
                       env={"PYTHONPATH": f"{shim}:{REPO}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout.strip() == "refused", done.stdout + done.stderr


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [1, 2, 3])
def test_attributes_error_handlers_and_info_follow_dup_on_every_rank(nranks: int) -> None:
    run_program("environment_program.py", nranks)


@pytest.mark.timeout(300)
def test_errors_are_fatal_ends_every_rank_of_the_job() -> None:
    program = str(Path(__file__).with_name("fatal_program.py"))
    done = run_command([sys.executable, "-m", "meshcomm", "run", "-n", "2", "--timeout", "60", program],
                       cwd=REPO, timeout=240)
    assert done.returncode != 0 and not done.timed_out, done.stdout + done.stderr
    assert "went on" not in done.stdout and "aborting" in done.stderr, done.stdout + done.stderr

