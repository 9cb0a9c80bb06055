"""Learn rank, world size, local rank and the store's address from arguments or the launcher's environment."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from meshcomm import config


@dataclass(frozen=True)
class JobInfo:
    """Where this process sits in the job; master_addr/port are None when no launcher said."""

    rank: int
    world_size: int
    local_rank: int | None
    local_world_size: int | None
    master_addr: str | None
    master_port: int | None
    source: str


@dataclass(frozen=True)
class _Launcher:
    name: str
    rank: str
    size: str
    local_rank: str
    local_size: str


# Checked in this order; the first whose rank variable is set supplies rank and size.
# meshcomm's own variables come first so `meshcomm run` wins inside an allocation.
LAUNCHERS = (
    _Launcher("meshcomm", "MESHCOMM_RANK", "MESHCOMM_WORLD_SIZE", "MESHCOMM_LOCAL_RANK", "MESHCOMM_LOCAL_WORLD_SIZE"),
    _Launcher("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    _Launcher("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    _Launcher("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    _Launcher("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", ""),
)

# Port range for Slurm-derived store ports: below Linux's ephemeral range
# (32768+), so a derived port does not collide with some outgoing connection.
SLURM_PORT_BASE, SLURM_PORT_SPAN = 20000, 10000


def _env(name: str) -> str:
    if name.startswith("MESHCOMM_"):
        return config.get(name)
    return os.environ.get(name, "")


def _env_int(name: str) -> int | None:
    raw = _env(name).strip()
    if raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand a Slurm host list: "node[01-03,07],gpu3" -> node01 node02 node03 node07 gpu3."""
    hosts: list[str] = []
    for item in _split_top_level(nodelist):
        hosts.extend(_expand_item(item))
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in Slurm node list {text!r}")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"unbalanced '[' in Slurm node list {text!r}")
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _expand_item(item: str) -> list[str]:
    match = re.search(r"\[([^\[\]]*)\]", item)
    if match is None:
        return [item]
    head, tail = item[: match.start()], item[match.end() :]
    hosts = []
    for part in match.group(1).split(","):
        bounds = part.strip().split("-")
        if len(bounds) == 1 and bounds[0].isdigit():
            numbers = [bounds[0]]
        elif len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit() and int(bounds[0]) <= int(bounds[1]):
            # Zero padding follows the lower bound, as Slurm writes it: [08-10] -> 08 09 10.
            width = len(bounds[0])
            numbers = [str(n).zfill(width) for n in range(int(bounds[0]), int(bounds[1]) + 1)]
        else:
            raise ValueError(f"bad range {part!r} in Slurm node list item {item!r}")
        for number in numbers:
            # The tail may hold further brackets: "rack[1-2]-node[1-2]".
            hosts.extend(_expand_item(head + number + tail))
    return hosts


def _slurm_local_world_size() -> int | None:
    """Tasks on this node, from SLURM_STEP_TASKS_PER_NODE like "2(x3),1" and SLURM_NODEID."""
    spec = _env("SLURM_STEP_TASKS_PER_NODE") or _env("SLURM_TASKS_PER_NODE")
    node = _env_int("SLURM_NODEID")
    if not spec or node is None:
        return None
    counts: list[int] = []
    for part in spec.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if match is None:
            raise ValueError(f"SLURM_STEP_TASKS_PER_NODE has an unreadable part {part!r} in {spec!r}")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts[node] if node < len(counts) else None


def _master_address() -> tuple[str | None, int | None, str | None]:
    """(addr, port, where from); either may be None when no source has it."""
    addr, port, where = None, None, []
    for addr_var, port_var in (("MESHCOMM_MASTER_ADDR", "MESHCOMM_MASTER_PORT"), ("MASTER_ADDR", "MASTER_PORT")):
        if addr is None and _env(addr_var):
            addr = _env(addr_var).strip()
            where.append(addr_var)
        if port is None and _env_int(port_var) is not None:
            port = _env_int(port_var)
            where.append(port_var)
    nodelist = _env("SLURM_JOB_NODELIST") or _env("SLURM_NODELIST")
    if addr is None and nodelist and _env("SLURM_PROCID"):
        addr = expand_nodelist(nodelist)[0]
        where.append("SLURM_JOB_NODELIST" if _env("SLURM_JOB_NODELIST") else "SLURM_NODELIST")
    job_id = _env_int("SLURM_JOB_ID")
    if port is None and job_id is not None and _env("SLURM_PROCID"):
        port = SLURM_PORT_BASE + job_id % SLURM_PORT_SPAN
        where.append("SLURM_JOB_ID")
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"the store port must be in [1, 65535], got {port} (from {'/'.join(where)})")
    return addr, port, "/".join(where) or None


def _missing(what: str, argument: str, attribute: str) -> ValueError:
    looked = ", ".join(f"{getattr(src, attribute)} ({src.name})" for src in LAUNCHERS if getattr(src, attribute))
    return ValueError(f"cannot tell this process's {what}: pass {argument}= or set one of {looked}")


def detect(rank: int = -1, world_size: int = -1) -> JobInfo:
    """Rank and size from the arguments (when >= 0), else from the first launcher that set them.

    Arguments and environment mix: torch.multiprocessing.spawn passes
    rank/world_size while MASTER_ADDR/MASTER_PORT come from the environment.
    """
    for name, value in (("rank", rank), ("world_size", world_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be int, got {type(value).__name__}")
    launcher = next((src for src in LAUNCHERS if _env(src.rank).strip()), None)
    given = [name for name, value in (("rank", rank), ("world_size", world_size)) if value >= 0]
    if rank < 0:
        if launcher is None:
            raise _missing("rank", "rank", "rank")
        found = _env_int(launcher.rank)
        assert found is not None  # the launcher was chosen because this variable is set
        rank = found
    if world_size < 0:
        if launcher is None:
            raise _missing("world size", "world_size", "size")
        size = _env_int(launcher.size)
        if size is None:
            raise ValueError(f"{launcher.rank} is set ({launcher.name}) but {launcher.size} is not")
        world_size = size
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")

    local_rank = local_size = None
    if launcher is not None and _env_int(launcher.rank) == rank:
        # Local placement only means something when the launcher's rank is ours.
        local_rank = _env_int(launcher.local_rank)
        local_size = _env_int(launcher.local_size) if launcher.local_size else _slurm_local_world_size()
    addr, port, addr_source = _master_address()
    if len(given) == 2 or launcher is None:
        source = "arguments"
    elif given:
        source = f"{given[0]} argument + {launcher.name}"
    else:
        source = launcher.name
    if addr_source:
        source += f" (store address from {addr_source})"
    return JobInfo(rank, world_size, local_rank, local_size, addr, port, source)
