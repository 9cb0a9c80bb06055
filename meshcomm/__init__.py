"""meshcomm: collective communication for Python processes.

`import meshcomm as dist` works like `torch.distributed` on numpy arrays and
torch CPU tensors.
"""

from meshcomm.api.collectives import (
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    exscan,
    gather,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scan,
    scatter,
)
from meshcomm.api.device_mesh import DeviceMesh, init_device_mesh
from meshcomm.api.groups import (
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    new_group,
    new_subgroups,
    new_subgroups_by_enumeration,
    split,
    split_group,
)
from meshcomm.api.init import (
    Backend,
    abort,
    destroy_process_group,
    get_backend,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_gloo_available,
    is_initialized,
    is_meshcomm_available,
    is_mpi_available,
    is_nccl_available,
)
from meshcomm.api.objects import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from meshcomm.api.ops import ReduceOp, _make_nccl_premul_sum  # noqa: F401 (torch.distributed has it too)
from meshcomm.api.p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from meshcomm.api.state import GroupMember
from meshcomm.errors import (
    AbortedError,
    AuthenticationError,
    CollectiveMismatchError,
    CommTimeoutError,
    MeshcommError,
    PeerLostError,
    RendezvousError,
)
from meshcomm.group.group import Group
from meshcomm.group.work import Work

from meshcomm.torch_backend import register_if_torch_loaded as _register_torch_backend

ProcessGroup = Group
__version__ = "0.1.0"

# torch.distributed.init_process_group("meshcomm") works once torch is
# imported; torch is optional and never imported just for this.
_register_torch_backend()

__all__ = [
    "AbortedError", "AuthenticationError", "Backend", "CollectiveMismatchError", "CommTimeoutError",
    "DeviceMesh", "Group", "GroupMember", "MeshcommError", "P2POp", "PeerLostError", "ProcessGroup",
    "ReduceOp", "RendezvousError", "Work",
    "abort", "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
    "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast", "broadcast_object_list",
    "destroy_process_group", "exscan", "gather", "gather_object", "get_backend", "get_global_rank",
    "get_group_rank", "get_process_group_ranks", "get_rank", "get_world_size", "init_device_mesh",
    "init_process_group", "irecv", "is_available", "is_gloo_available", "is_initialized",
    "is_meshcomm_available", "is_mpi_available", "is_nccl_available", "isend", "new_group",
    "new_subgroups", "new_subgroups_by_enumeration", "recv", "recv_object_list", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "scan", "scatter", "scatter_object_list", "send",
    "send_object_list", "split", "split_group",
]
