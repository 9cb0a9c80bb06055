"""Machines to simulate: ranks per host, cores per host and the cost model's parameters.

`here` is this machine as `meshcomm tune` measured it (MESHCOMM_TUNING, else
the built-in parameters), and a group on one host runs `direct` and
`two_shot` on its shared-memory board, by reference, as a job here would
(transport/local.py's expected_on_this_host). The GPU presets stand for
clusters with one rank per GPU, where the message costs are those of the
interconnects (NCCL's, not Python's); their figures are round numbers from
the vendors' published link speeds and typical measured latencies, stated
here so a result can be reproduced and argued with:

- `summit`: IBM AC922 nodes with 6 V100s. Inside a node NVLink 2 (two links
  of 25 GB/s between GPU pairs: 50 GB/s, α 1.5 µs per hop); between nodes
  dual-rail EDR InfiniBand, 25 GB/s per node shared by its 6 GPUs
  (≈ 4.2 GB/s each when all send at once, as in a ring), α 4 µs.
- `dgx-a100`: 8 A100s per node; NVLink 3 through NVSwitch (300 GB/s per GPU
  per direction, α 1 µs); 8 HDR InfiniBand rails, one 25 GB/s NIC per GPU,
  α 3 µs.

On GPUs reductions and copies run at memory speed (γ and copy ≈ 1/1 TB/s)
and a call's fixed cost is a kernel launch (≈ 5 µs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from meshcomm.transport.local import expected_on_this_host
from meshcomm.tuner import model
from meshcomm.tuner.model import Link, Parameters


@dataclass(frozen=True)
class Topology:
    name: str
    parameters: Parameters
    ranks_per_host: int | None  # None: every rank on one host
    cores: int  # cores (or GPUs) per host that run ranks at once
    # A group on one host runs `direct` and `two_shot` calls on its shared-memory board (board/price.py), as
    # meshcomm's processes do; single_copy: posts larger than a slot go by reference, as where its ranks
    # can reach each other's memory. The GPU presets model interconnects, not the board: neither.
    board: bool = False
    single_copy: bool = False

    def hosts(self, nranks: int) -> tuple[int, ...]:
        """Host index of each rank: consecutive ranks fill a host."""
        per = self.ranks_per_host or nranks
        return tuple(r // per for r in range(nranks))


def _gpu(alpha_in: float, gbps_in: float, alpha_out: float, gbps_out: float, source: str) -> Parameters:
    return Parameters(
        same_host=Link(alpha=alpha_in, beta=1 / (gbps_in * 1e9)),
        other_host=Link(alpha=alpha_out, beta=1 / (gbps_out * 1e9)),
        gamma=1e-12, copy=1e-12, call=5e-6, crowded_alpha=alpha_in, source=source,
    )


def here(ranks_per_host: int | None = None) -> Topology:
    board, single_copy = expected_on_this_host()
    # The cores this process may run on, as a job's ranks count them (group/runtime.py).
    return Topology("here", model.configured(), ranks_per_host, len(os.sched_getaffinity(0)), board=board,
                    single_copy=single_copy)


PRESETS = {
    "summit": Topology("summit", _gpu(1.5e-6, 50, 4e-6, 25 / 6, "summit preset"), 6, 6),
    "dgx-a100": Topology("dgx-a100", _gpu(1e-6, 300, 3e-6, 25, "dgx-a100 preset"), 8, 8),
}


class UnknownTopology(ValueError):
    """A topology name that is neither `here` nor a preset (a setting `here` reads may raise ValueError too)."""


def topology(name: str, ranks_per_host: int | None = None) -> Topology:
    """A preset by name (`here`, `summit`, `dgx-a100`), with ranks_per_host overriding the preset's."""
    if name == "here":
        return here(ranks_per_host)
    if name not in PRESETS:
        raise UnknownTopology(f"unknown topology {name!r}; choose one of: here, {', '.join(PRESETS)}")
    preset = PRESETS[name]
    if ranks_per_host is None:
        return preset
    return Topology(preset.name, preset.parameters, ranks_per_host, max(preset.cores, ranks_per_host))
