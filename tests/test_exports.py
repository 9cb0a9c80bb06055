"""The public names of `meshcomm`: exactly these, each reachable, and `import meshcomm` loads none of them."""

from __future__ import annotations

import subprocess
import sys
import types

import meshcomm

# A change here is a change of the public API: make it on purpose.
EXPECTED = {
    "AbortedError", "AuthenticationError", "Backend", "CollectiveMismatchError", "CommTimeoutError", "DeviceMesh",
    "Group", "GroupMember", "MeshcommError", "P2POp", "PeerLostError", "ProcessGroup", "ReduceOp",
    "RendezvousError", "RevokedError", "Work", "abort", "agree", "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce",
    "all_to_all", "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast", "broadcast_object_list",
    "destroy_process_group", "exscan", "failed_ranks", "gather", "gather_object", "get_backend", "get_global_rank",
    "get_group_rank", "get_process_group_ranks", "get_rank", "get_world_size", "init_device_mesh",
    "init_process_group", "irecv", "is_available", "is_gloo_available", "is_initialized", "is_meshcomm_available",
    "is_mpi_available", "is_nccl_available", "is_revoked", "isend", "new_group", "new_subgroups", "new_subgroups_by_enumeration",
    "recv", "recv_object_list", "reduce", "reduce_scatter", "reduce_scatter_tensor", "revoke", "scan", "scatter",
    "scatter_object_list", "send", "send_object_list", "shrink", "split", "split_group",
}
SUBMODULES = ["MPI", "device_mesh", "errors", "torch_backend", "mpi"]


def test_all_is_exactly_the_public_api() -> None:
    assert set(meshcomm.__all__) == EXPECTED
    assert meshcomm.__all__ == sorted(meshcomm.__all__)


def test_every_public_name_resolves_and_is_listed_by_dir() -> None:
    for name in meshcomm.__all__:
        value = getattr(meshcomm, name)
        assert not isinstance(value, types.ModuleType), name
        assert getattr(value, "__module__", "meshcomm").startswith("meshcomm"), name
    assert set(meshcomm.__all__) <= set(dir(meshcomm))
    assert meshcomm.ProcessGroup is meshcomm.Group


def test_nothing_private_leaks_into_the_namespace() -> None:
    public = {name for name in vars(meshcomm) if not name.startswith("_")}
    submodules = {name for name in public if isinstance(getattr(meshcomm, name), types.ModuleType)}
    assert public - submodules <= EXPECTED


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    try:
        meshcomm.all_reduse  # noqa: B018
    except AttributeError as exc:
        assert "all_reduse" in str(exc)
    else:
        raise AssertionError("meshcomm.all_reduse resolved")


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_meshcomm_loads_no_submodule_and_no_numpy() -> None:
    loaded = _fresh("import sys, meshcomm; print(sorted(m for m in sys.modules if m.startswith(('meshcomm.', 'numpy'))))")
    assert loaded == "['meshcomm._version']"


def test_public_submodules_are_attributes_right_after_import() -> None:
    code = "import meshcomm as dist; print([type(getattr(dist, m)).__name__ for m in %r])" % SUBMODULES
    assert _fresh(code) == str(["module"] * len(SUBMODULES))
    assert _fresh("import meshcomm as dist; print(dist.device_mesh.init_device_mesh is dist.init_device_mesh)") == "True"
