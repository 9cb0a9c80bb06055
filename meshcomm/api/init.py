"""Starting and stopping: init_process_group and the small helpers torch programs call."""

from __future__ import annotations

import urllib.parse

from meshcomm import config
from meshcomm.api import state
from meshcomm.group.call import seconds
from meshcomm.group.runtime import Runtime
from meshcomm.rendezvous import environment
from meshcomm.rendezvous import init_method as rendezvous

# meshcomm picks its own transports (shared memory on a host, TCP between
# hosts); these names are accepted so torch programs run unchanged.
BACKENDS = ("meshcomm", "gloo", "nccl", "mpi", "cpu:gloo", "cuda:nccl", "cpu:gloo,cuda:nccl", "undefined")


class Backend(str):
    """torch.distributed.Backend look-alike: the backend name as a string."""

    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"
    MESHCOMM = "meshcomm"
    UNDEFINED = "undefined"

    def __new__(cls, name: str) -> "Backend":
        return super().__new__(cls, _check_backend(name))


def _check_backend(backend) -> str:
    if backend is None:
        return "meshcomm"
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string or None, got {type(backend).__name__}")
    name = backend.lower()
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)} or None, got {backend!r}")
    return name


def _seconds(timeout) -> float:
    return config.get_float("MESHCOMM_TIMEOUT") if timeout is None else seconds(timeout)


def init_process_group(
    backend=None,
    init_method=None,
    timeout=None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Join the job: find rank and size, meet the others at the store, connect.

    Accepts what torch.distributed users write: env:// (the default), tcp://host:port,
    file:///path, or a store with rank and world_size; rank/size otherwise come from
    meshcomm run, torchrun, mpiexec (MPICH, Open MPI) or Slurm.
    """
    if state.is_initialized():
        raise RuntimeError("init_process_group was called twice; call destroy_process_group() first")
    name = _check_backend(backend)
    seconds = _seconds(timeout)
    if init_method is not None and store is not None:
        raise ValueError("give init_method or store, not both")
    if store is not None:
        if rank < 0 or world_size < 1:
            raise ValueError(f"with store=, rank and world_size are required, got rank={rank}, world_size={world_size}")
        the_store, the_rank, the_size = store, rank, world_size
        master = None
    else:
        the_store, the_rank, the_size = rendezvous.connect(init_method, rank, world_size, seconds)
        master = _master_host(init_method, rank, world_size)
    if not 0 <= the_rank < the_size:
        raise ValueError(f"rank must be in [0, {the_size}), got {the_rank}")
    rendezvous.join(the_store, the_rank, the_size, seconds)
    state.set_runtime(Runtime(the_rank, the_size, the_store, seconds, master, name))


def _master_host(method: str | None, rank: int, world_size: int) -> str | None:
    """The store's host, from which this rank works out the address peers can reach it at."""
    if method is None or method.startswith("env://"):
        return environment.detect(rank, world_size).master_addr
    if method.startswith("tcp://"):
        return urllib.parse.urlparse(method).hostname
    return None


def destroy_process_group(group=None) -> None:
    """Leave the job (group=None) or retire one sub-group (nothing for a rank outside it, as in torch)."""
    if group is state.GroupMember.NON_GROUP_MEMBER:
        return
    if group is not None:
        g = state.resolve_group(group, member=False)
        g.shutdown()
        return
    runtime = state.runtime()
    state.set_runtime(None)
    runtime.close()


def abort(reason: str = "") -> None:
    """Unblock every pending operation of this rank with AbortedError, and make the other ranks'
    pending and later operations fail the same way (they learn it through the store within
    about a second). The process group stays unusable until destroy_process_group()."""
    if not isinstance(reason, str):
        raise TypeError(f"reason must be a str, got {type(reason).__name__}")
    state.runtime().abort(reason)


def is_initialized() -> bool:
    return state.is_initialized()


def get_rank(group=None) -> int:
    """This process's rank in `group` (the world when None); -1 outside the group."""
    if group is state.GroupMember.NON_GROUP_MEMBER:
        return -1
    return state.resolve_group(group, member=False).rank


def get_world_size(group=None) -> int:
    if group is state.GroupMember.NON_GROUP_MEMBER:
        return -1
    return state.resolve_group(group, member=False).size


def get_backend(group=None) -> str:
    state.resolve_group(group, member=False)
    return state.runtime().backend


def is_available() -> bool:
    return True


def is_meshcomm_available() -> bool:
    return True


def is_gloo_available() -> bool:
    """False: meshcomm is not gloo, though it accepts backend="gloo" and runs it itself."""
    return False


def is_nccl_available() -> bool:
    return False


def is_mpi_available() -> bool:
    return False

