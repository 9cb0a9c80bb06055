"""MeshcommGroup: Ray's collective-group interface, each call one meshcomm call; and the driver's helpers."""

from __future__ import annotations

import datetime
import time
from typing import Any, Sequence

import ray
import ray.experimental.internal_kv as internal_kv
from ray.util import collective
from ray.util.collective import types
from ray.util.collective.backend_registry import _global_registry, register_collective_backend
from ray.util.collective.collective_group.base_collective_group import BaseGroup

from meshcomm.api import collectives as coll
from meshcomm.api import p2p
from meshcomm.api.ops import ReduceOp
from meshcomm.errors import PeerLostError, RendezvousError
from meshcomm.group.runtime import Runtime
from meshcomm.rendezvous.init_method import join
from meshcomm.rendezvous.tcp_store import TCPStore
from meshcomm.security.auth import generate_token

BACKEND = "MESHCOMM"
DEFAULT_TIMEOUT = 300.0
_KV = "meshcomm-ray/"  # Ray key-value keys: _KV + group name + "/store" (and "/claimed" for create_group's groups)
_POLL = 0.01
_OPS = {types.ReduceOp.SUM: ReduceOp.SUM, types.ReduceOp.PRODUCT: ReduceOp.PRODUCT,
        types.ReduceOp.MIN: ReduceOp.MIN, types.ReduceOp.MAX: ReduceOp.MAX}
# What create_group hands an actor for the group Ray is about to create in it: (token, timeout).
_handed: dict[str, tuple[bytes, float]] = {}


def register() -> None:
    """Make the "MESHCOMM" backend known to `ray.util.collective` in this process (again is harmless)."""
    if not _global_registry.is_registered(BACKEND):
        register_collective_backend(BACKEND, MeshcommGroup)


def create_group(actors: Sequence[Any], group_name: str = "default", *, world_size: int | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
    """From the driver: make `actors` (rank = position in the list) a meshcomm collective group named `group_name`.

    Every actor registers the backend, receives a fresh job token made here,
    and joins the group before this returns, so its next
    `ray.util.collective` call with this `group_name` runs on meshcomm.
    """
    if not isinstance(actors, (list, tuple)) or not actors:
        raise ValueError(f"actors must be a non-empty list of Ray actor handles, got {actors!r}")
    if not all(isinstance(a, ray.actor.ActorHandle) for a in actors):
        bad = next(type(a).__name__ for a in actors if not isinstance(a, ray.actor.ActorHandle))
        raise TypeError(f"actors must be Ray actor handles, got a {bad}")
    if not isinstance(group_name, str) or not group_name:
        raise ValueError(f"group_name must be a non-empty str, got {group_name!r}")
    if world_size is not None and world_size != len(actors):
        raise ValueError(f"world_size {world_size} does not match the {len(actors)} actors given for group "
                         f"{group_name!r}")
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    register()
    if internal_kv._internal_kv_put(_KV + group_name + "/claimed", b"1", overwrite=False):
        raise ValueError(f"a collective group named {group_name!r} already exists in this Ray cluster: "
                         "destroy it first (meshcomm.ray.destroy_group) or choose another name")
    internal_kv._internal_kv_del(_KV + group_name + "/store")
    token = generate_token().encode()
    joins = [actor.__ray_call__.remote(_join, group_name, len(actors), rank, token, timeout)
             for rank, actor in enumerate(actors)]
    try:
        ray.get(joins, timeout=timeout + 30)
    except BaseException:
        internal_kv._internal_kv_del(_KV + group_name + "/claimed")
        raise


def destroy_group(actors: Sequence[Any], group_name: str = "default") -> None:
    """From the driver: leave the group in every actor and free its name."""
    try:
        ray.get([actor.__ray_call__.remote(_leave, group_name) for actor in actors], timeout=60)
    finally:
        internal_kv._internal_kv_del(_KV + group_name + "/claimed")


def _join(_actor, group_name: str, world_size: int, rank: int, token: bytes, timeout: float) -> None:
    register()
    _handed[group_name] = (token, timeout)
    try:
        collective.init_collective_group(world_size, rank, backend=BACKEND, group_name=group_name)
    finally:
        _handed.pop(group_name, None)


def _leave(_actor, group_name: str) -> None:
    if collective.is_group_initialized(group_name):
        collective.destroy_collective_group(group_name)


class MeshcommGroup(BaseGroup):
    """One Ray collective group on one meshcomm runtime (its own connections and store)."""

    def __init__(self, world_size: int, rank: int, group_name: str) -> None:
        super().__init__(world_size, rank, group_name)
        token, timeout = _handed.get(group_name, (None, DEFAULT_TIMEOUT))
        self._timeout = timeout
        self._runtime, self._actors = _connect(world_size, rank, group_name, token, timeout)
        self._group = self._runtime.world
        self._group.group_name = group_name

    @classmethod
    def backend(cls) -> str:
        return BACKEND

    @classmethod
    def check_backend_availability(cls) -> bool:
        return True

    def destroy_group(self) -> None:
        if not self._group.destroyed:
            self._runtime.close()
            if self.rank == 0:
                internal_kv._internal_kv_del(_KV + self.group_name + "/store")

    # ----- the calls (each gets a list of one tensor: one device per process)

    def allreduce(self, tensors, allreduce_options=types.AllReduceOptions()) -> None:
        tensor, op = _one(tensors), _op(allreduce_options)
        self._call(lambda: coll.all_reduce(tensor, op, self._group, timeout=_seconds(allreduce_options)))

    def barrier(self, barrier_options=types.BarrierOptions()) -> None:
        self._call(lambda: coll.barrier(self._group, timeout=_seconds(barrier_options)))

    def reduce(self, tensors, reduce_options=types.ReduceOptions()) -> None:
        tensor, op, root = _one(tensors), _op(reduce_options), reduce_options.root_rank
        self._call(lambda: coll.reduce(tensor, None, op, self._group, group_dst=root,
                                       timeout=_seconds(reduce_options)))

    def allgather(self, tensor_lists, tensors, allgather_options=types.AllGatherOptions()) -> None:
        outputs, tensor = _one(tensor_lists), _one(tensors)
        self._call(lambda: coll.all_gather(list(outputs), tensor, self._group, timeout=_seconds(allgather_options)))

    def broadcast(self, tensors, broadcast_options=types.BroadcastOptions()) -> None:
        tensor, root = _one(tensors), broadcast_options.root_rank
        self._call(lambda: coll.broadcast(tensor, None, self._group, group_src=root,
                                          timeout=_seconds(broadcast_options)))

    def reducescatter(self, tensors, tensor_lists, reducescatter_options=types.ReduceScatterOptions()) -> None:
        output, inputs, op = _one(tensors), _one(tensor_lists), _op(reducescatter_options)
        self._call(lambda: coll.reduce_scatter(output, list(inputs), op, self._group,
                                               timeout=_seconds(reducescatter_options)))

    def send(self, tensors, send_options: types.SendOptions) -> None:
        tensor, peer = _one(tensors), send_options.dst_rank
        self._call(lambda: p2p.isend(tensor, None, self._group, group_dst=peer).wait(_seconds(send_options)))

    def recv(self, tensors, recv_options: types.RecvOptions) -> None:
        tensor, peer = _one(tensors), recv_options.src_rank
        self._call(lambda: p2p.irecv(tensor, None, self._group, group_src=peer).wait(_seconds(recv_options)))

    def _call(self, run) -> None:
        """Run one call; a lost peer is named by its actor too (what a Ray user knows it by)."""
        try:
            run()
        except PeerLostError as exc:
            if exc.peer is None or not 0 <= exc.peer < len(self._actors):
                raise
            raise PeerLostError(f"{exc} [rank {exc.peer} of group {self.group_name!r} is "
                                f"{self._actors[exc.peer]}]", exc.peer) from None


def _connect(world_size: int, rank: int, group_name: str, token: bytes | None,
             timeout: float) -> tuple[Runtime, list[str]]:
    """The group's runtime, and each rank's actor. Rank 0 serves the group's store on an ephemeral port and
    publishes where in Ray's key-value store."""
    host = ray.util.get_node_ip_address()
    key = _KV + group_name + "/store"
    if rank == 0:
        store = TCPStore(host, 0, is_master=True, timeout=timeout, token=token, world_size=world_size)
        internal_kv._internal_kv_put(key, f"{host}:{store.port}")
        master = host
    else:
        deadline = time.monotonic() + timeout
        while (address := internal_kv._internal_kv_get(key)) is None:
            if time.monotonic() > deadline:
                raise RendezvousError(f"rank {rank} of Ray collective group {group_name!r}: rank 0 did not "
                                      f"publish the group's store within {timeout:g} s")
            time.sleep(_POLL)
        master, port = address.decode().rsplit(":", 1)
        store = TCPStore(master, int(port), timeout=timeout, token=token, world_size=world_size)
    try:
        join(store, rank, world_size, timeout)
        store.set(f"ray/actor/{rank}", _this_actor())
        actors = [store.get(f"ray/actor/{r}", timeout=timeout).decode() for r in range(world_size)]
        runtime = Runtime(rank, world_size, store, timeout, master, "meshcomm", token)
    except BaseException:
        store.close()
        raise
    return runtime, actors


def _this_actor() -> str:
    context = ray.get_runtime_context()
    name = context.get_actor_name()
    return f"actor {context.get_actor_id()}" + (f" ({name!r})" if name else "")


def _one(tensors):
    if not isinstance(tensors, (list, tuple)) or len(tensors) != 1:
        raise ValueError(f"expected a list of one tensor (one device per process), got {tensors!r}")
    return tensors[0]


def _op(options) -> Any:
    op = getattr(options, "reduceOp", types.ReduceOp.SUM)
    try:
        return _OPS[op]
    except KeyError:
        raise ValueError(f"reduceOp must be a ray.util.collective.types.ReduceOp, got {op!r}") from None


def _seconds(options) -> float | None:
    """The options' timeout in seconds; Ray marks "not set" with a negative timedelta."""
    timeout = getattr(options, "timeout_ms", None)
    if isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0:
        return timeout.total_seconds()
    return None
