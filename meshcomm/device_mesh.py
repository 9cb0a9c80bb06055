"""meshcomm.device_mesh: where torch code looks for init_device_mesh and DeviceMesh."""

from meshcomm.api.device_mesh import DeviceMesh, init_device_mesh

__all__ = ["DeviceMesh", "init_device_mesh"]
