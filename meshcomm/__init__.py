"""meshcomm: collective communication for Python processes.

`import meshcomm as dist` works like `torch.distributed` on numpy arrays and
torch CPU tensors; `from meshcomm import MPI` speaks mpi4py's API.

Importing the package loads nothing else: each public name, and each public
submodule (`meshcomm.device_mesh`, `meshcomm.MPI`, ...), is imported the first
time it is looked up (PEP 562), so `import meshcomm` stays cheap for torch's
entry point and for command-line tools.
"""

import importlib as _importlib
import sys as _sys

from meshcomm._version import __version__  # noqa: F401 (public)

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["all_gather", "all_gather_into_tensor", "all_reduce", "all_to_all", "all_to_all_single", "barrier",
         "broadcast", "exscan", "gather", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scan", "scatter"],
        "meshcomm.api.collectives"),
    **dict.fromkeys(["DeviceMesh", "init_device_mesh"], "meshcomm.api.device_mesh"),
    **dict.fromkeys(
        ["get_global_rank", "get_group_rank", "get_process_group_ranks", "new_group", "new_subgroups",
         "new_subgroups_by_enumeration", "split", "split_group"],
        "meshcomm.api.groups"),
    **dict.fromkeys(
        ["Backend", "abort", "destroy_process_group", "get_backend", "get_rank", "get_world_size",
         "init_process_group", "is_available", "is_gloo_available", "is_initialized", "is_meshcomm_available",
         "is_mpi_available", "is_nccl_available"],
        "meshcomm.api.init"),
    **dict.fromkeys(
        ["all_gather_object", "broadcast_object_list", "gather_object", "recv_object_list", "scatter_object_list",
         "send_object_list"],
        "meshcomm.api.objects"),
    **dict.fromkeys(["ReduceOp", "_make_nccl_premul_sum"], "meshcomm.api.ops"),
    **dict.fromkeys(["P2POp", "batch_isend_irecv", "irecv", "isend", "recv", "send"], "meshcomm.api.p2p"),
    **dict.fromkeys(["agree", "failed_ranks", "is_revoked", "revoke", "shrink"], "meshcomm.api.survival"),
    "GroupMember": "meshcomm.api.state",
    **dict.fromkeys(
        ["AbortedError", "AuthenticationError", "CollectiveMismatchError", "CommTimeoutError", "MeshcommError",
         "PeerLostError", "RendezvousError", "RevokedError"],
        "meshcomm.errors"),
    "Group": "meshcomm.group.group",
    "Work": "meshcomm.group.work",
}
_ALIASES = {"ProcessGroup": "Group"}  # torch.distributed's name for a group

# Submodules reachable as attributes, as `torch.distributed.device_mesh` is.
_SUBMODULES = frozenset({"MPI", "device_mesh", "errors", "config", "torch_backend", "mpi", "ray", "api",
                         "algorithms", "board", "cli", "executor", "explain", "group", "launcher", "rendezvous",
                         "security", "sim", "trace", "transport", "tuner", "bench"})

__all__ = sorted(n for n in [*_EXPORTS, *_ALIASES] if not n.startswith("_"))


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(module), name)
    elif name in _ALIASES:
        value = __getattr__(_ALIASES[name])
    elif name in _SUBMODULES:
        value = _importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # found once; later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBMODULES})


# torch.distributed.init_process_group("meshcomm") works once torch is imported;
# torch is optional and never imported just for this.
if "torch" in _sys.modules:
    from meshcomm.torch_backend.plugin import register_if_torch_loaded as _register_torch_backend

    _register_torch_backend()
