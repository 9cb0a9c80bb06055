"""DeviceMesh: ranks laid out in an n-dimensional grid with one group per line of each dimension."""

from __future__ import annotations

import numpy as np

from meshcomm.api import state


class DeviceMesh:
    """torch's DeviceMesh on meshcomm groups: mesh["tp"], get_group(dim), get_local_rank(dim), size(dim)."""

    def __init__(self, device_type: str, mesh, mesh_dim_names=None, *, _groups=None) -> None:
        self.device_type = device_type
        self.mesh = np.asarray(mesh, dtype=np.int64)
        if mesh_dim_names is not None:
            mesh_dim_names = tuple(mesh_dim_names)
            if len(mesh_dim_names) != self.mesh.ndim:
                raise ValueError(
                    f"mesh_dim_names must name each of the {self.mesh.ndim} dimensions, got {mesh_dim_names}"
                )
            if len(set(mesh_dim_names)) != len(mesh_dim_names):
                raise ValueError(f"mesh_dim_names must be unique, got {mesh_dim_names}")
        self.mesh_dim_names = mesh_dim_names
        self._groups = list(_groups) if _groups is not None else [self._make_groups(d) for d in range(self.mesh.ndim)]

    def _make_groups(self, dim: int):
        """Create every line's group along `dim` (all ranks, same order) and keep this rank's."""
        from meshcomm.api.groups import new_group

        lines = np.moveaxis(self.mesh, dim, -1).reshape(-1, self.mesh.shape[dim])
        mine = None
        for line in lines:
            group = new_group([int(r) for r in line])
            if group is not state.GroupMember.NON_GROUP_MEMBER:
                mine = group
        return mine

    def __repr__(self) -> str:
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self.mesh.tolist()}{names})"

    @property
    def ndim(self) -> int:
        return self.mesh.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.mesh.shape)

    def _dim(self, mesh_dim) -> int:
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"mesh dimension {mesh_dim!r} not in mesh_dim_names {self.mesh_dim_names}")
            return self.mesh_dim_names.index(mesh_dim)
        if isinstance(mesh_dim, bool) or not isinstance(mesh_dim, int) or not -self.ndim <= mesh_dim < self.ndim:
            raise ValueError(f"mesh_dim must be a dimension name or an int in [0, {self.ndim}), got {mesh_dim!r}")
        return mesh_dim % self.ndim

    def get_group(self, mesh_dim=None):
        if mesh_dim is None:
            if self.ndim != 1:
                raise ValueError(f"get_group() needs mesh_dim on a {self.ndim}-D mesh")
            mesh_dim = 0
        return self._groups[self._dim(mesh_dim)]

    def get_all_groups(self) -> list:
        return list(self._groups)

    def size(self, mesh_dim=None) -> int:
        return int(self.mesh.size) if mesh_dim is None else int(self.mesh.shape[self._dim(mesh_dim)])

    def get_rank(self) -> int:
        return state.runtime().rank

    def get_coordinate(self) -> list[int] | None:
        where = np.argwhere(self.mesh == state.runtime().rank)
        return [int(x) for x in where[0]] if len(where) else None

    def get_local_rank(self, mesh_dim=None) -> int:
        if mesh_dim is None:
            if self.ndim != 1:
                raise ValueError(f"get_local_rank() needs mesh_dim on a {self.ndim}-D mesh")
            mesh_dim = 0
        coordinate = self.get_coordinate()
        if coordinate is None:
            raise ValueError(f"rank {state.runtime().rank} is not in this mesh")
        return coordinate[self._dim(mesh_dim)]

    def __getitem__(self, names) -> "DeviceMesh":
        """The sub-mesh of this rank along the named dimensions (reuses their groups)."""
        names = (names,) if isinstance(names, str) else tuple(names)
        dims = [self._dim(n) for n in names]
        if dims != sorted(set(dims)):
            raise KeyError(f"slice the mesh by distinct dimension names in mesh order {self.mesh_dim_names}, got {names}")
        coordinate = self.get_coordinate()
        if coordinate is None:
            raise ValueError(f"rank {state.runtime().rank} is not in this mesh")
        index = tuple(slice(None) if d in dims else coordinate[d] for d in range(self.ndim))
        sub = self.mesh[index]
        return DeviceMesh(self.device_type, sub, names, _groups=[self._groups[d] for d in dims])


def init_device_mesh(device_type: str, mesh_shape, *, mesh_dim_names=None) -> DeviceMesh:
    """Lay the world's ranks out row-major in `mesh_shape`; every rank must call this.

    As in torch, a process that has not initialized meshcomm yet does so here, from its environment."""
    if not state.is_initialized():
        from meshcomm.api.init import init_process_group

        init_process_group()
    rt = state.runtime()
    shape = tuple(int(s) for s in mesh_shape)
    if any(s <= 0 for s in shape) or int(np.prod(shape)) != rt.world_size:
        raise ValueError(f"mesh_shape {shape} must multiply to the world size {rt.world_size}")
    return DeviceMesh(device_type, np.arange(rt.world_size).reshape(shape), mesh_dim_names)
