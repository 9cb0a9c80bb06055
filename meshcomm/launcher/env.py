"""The layout of a job on one host and the environment each of its ranks receives."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from meshcomm import config
from meshcomm.security.auth import generate_token


@dataclass(frozen=True)
class JobLayout:
    """Where this host's ranks sit in the job; checked once, at construction."""

    nproc: int
    master_port: int
    token: str
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    timeout: float | None = None
    host_id: str | None = None
    # Names this launch's shared-memory segments, so the launcher can remove
    # any a killed rank left behind.
    job_id: str = field(default_factory=lambda: secrets.token_hex(6))

    def __post_init__(self) -> None:
        if self.nproc < 1:
            raise ValueError(f"nproc must be >= 1, got {self.nproc}")
        if self.nnodes < 1:
            raise ValueError(f"nnodes must be >= 1, got {self.nnodes}")
        if not 0 <= self.node_rank < self.nnodes:
            raise ValueError(f"node_rank must be in [0, {self.nnodes}), got {self.node_rank}")
        if not 1 <= self.master_port <= 65535:
            raise ValueError(f"master_port must be in [1, 65535], got {self.master_port}")
        if not self.master_addr:
            raise ValueError("master_addr must not be empty")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes

    def global_rank(self, local_rank: int) -> int:
        return self.node_rank * self.nproc + local_rank


def resolve_token(nnodes: int, env_extra: Mapping[str, str] | None = None) -> str:
    """The job token: given (env_extra, then MESHCOMM_TOKEN), or fresh for a one-host job.

    Several hosts cannot invent it: each launcher would make a different one
    and no rank could authenticate to another host's ranks.
    """
    token = (env_extra or {}).get("MESHCOMM_TOKEN") or config.get("MESHCOMM_TOKEN")
    if token:
        return token
    if nnodes > 1:
        raise ValueError(
            f"a job on {nnodes} nodes needs one shared token: export the same MESHCOMM_TOKEN "
            "on every node before `meshcomm run`, e.g. "
            "export MESHCOMM_TOKEN=$(python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return generate_token()


def rank_variables(layout: JobLayout, local_rank: int) -> dict[str, str]:
    """The variables that make one process rank `local_rank` of this host.

    torchrun's names come along so programs written for torchrun (or for
    torch.distributed's env:// rendezvous) run unchanged.
    """
    if not 0 <= local_rank < layout.nproc:
        raise ValueError(f"local_rank must be in [0, {layout.nproc}), got {local_rank}")
    rank = str(layout.global_rank(local_rank))
    variables = {
        "RANK": rank,
        "LOCAL_RANK": str(local_rank),
        "WORLD_SIZE": str(layout.world_size),
        "LOCAL_WORLD_SIZE": str(layout.nproc),
        "GROUP_RANK": str(layout.node_rank),
        "NODE_RANK": str(layout.node_rank),
        "MASTER_ADDR": layout.master_addr,
        "MASTER_PORT": str(layout.master_port),
        "MESHCOMM_RANK": rank,
        "MESHCOMM_LOCAL_RANK": str(local_rank),
        "MESHCOMM_WORLD_SIZE": str(layout.world_size),
        "MESHCOMM_LOCAL_WORLD_SIZE": str(layout.nproc),
        "MESHCOMM_MASTER_ADDR": layout.master_addr,
        "MESHCOMM_MASTER_PORT": str(layout.master_port),
        "MESHCOMM_TOKEN": layout.token,
        "MESHCOMM_JOB_ID": layout.job_id,
        # Ranks' output goes through pipes; unbuffered keeps lines in order with stderr.
        "PYTHONUNBUFFERED": "1",
    }
    if layout.timeout is not None:
        variables["MESHCOMM_TIMEOUT"] = f"{layout.timeout:g}"
    if layout.host_id is not None:
        variables["MESHCOMM_HOST_ID"] = layout.host_id
    return variables


def child_environ(
    base: Mapping[str, str],
    layout: JobLayout,
    local_rank: int,
    env_extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """`base`, then `env_extra`, then the rank's variables, which win so no rank is mislabelled."""
    environ = dict(base)
    environ.update(env_extra or {})
    environ.update(rank_variables(layout, local_rank))
    return environ
