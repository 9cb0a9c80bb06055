"""detect() reads rank, size, placement and store address from arguments or each launcher's variables."""

from __future__ import annotations

import pytest

from meshcomm.rendezvous import JobInfo, detect, expand_nodelist
from meshcomm.rendezvous.environment import SLURM_PORT_BASE, SLURM_PORT_SPAN


def setenv(monkeypatch: pytest.MonkeyPatch, **values: object) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))


def test_explicit_arguments_need_no_environment() -> None:
    assert detect(rank=1, world_size=4) == JobInfo(1, 4, None, None, None, None, "arguments")


def test_meshcomm_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(
        monkeypatch,
        MESHCOMM_RANK=3, MESHCOMM_WORLD_SIZE=4, MESHCOMM_LOCAL_RANK=1, MESHCOMM_LOCAL_WORLD_SIZE=2,
        MESHCOMM_MASTER_ADDR="10.0.0.1", MESHCOMM_MASTER_PORT=29500,
    )
    info = detect()
    assert (info.rank, info.world_size, info.local_rank, info.local_world_size) == (3, 4, 1, 2)
    assert (info.master_addr, info.master_port) == ("10.0.0.1", 29500)
    assert info.source.startswith("meshcomm")


def test_torchrun_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(monkeypatch, RANK=5, WORLD_SIZE=8, LOCAL_RANK=1, LOCAL_WORLD_SIZE=4, MASTER_ADDR="head", MASTER_PORT=29400)
    info = detect()
    assert info == JobInfo(5, 8, 1, 4, "head", 29400, "torchrun (store address from MASTER_ADDR/MASTER_PORT)")


def test_mpich_hydra_variables_without_master_addr(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(monkeypatch, PMI_RANK=2, PMI_SIZE=3, MPI_LOCALRANKID=2, MPI_LOCALNRANKS=3, PMI_FD=6)
    info = detect()
    assert info == JobInfo(2, 3, 2, 3, None, None, "mpich")


def test_open_mpi_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(
        monkeypatch,
        OMPI_COMM_WORLD_RANK=7, OMPI_COMM_WORLD_SIZE=16, OMPI_COMM_WORLD_LOCAL_RANK=3, OMPI_COMM_WORLD_LOCAL_SIZE=4,
        MASTER_ADDR="n0", MASTER_PORT=1234,
    )
    assert detect() == JobInfo(7, 16, 3, 4, "n0", 1234, "openmpi (store address from MASTER_ADDR/MASTER_PORT)")


def test_slurm_variables_derive_address_and_port(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(
        monkeypatch,
        SLURM_PROCID=5, SLURM_NTASKS=7, SLURM_LOCALID=1, SLURM_NODEID=2,
        SLURM_STEP_TASKS_PER_NODE="2(x3),1", SLURM_JOB_NODELIST="gpu[007-009],cpu1", SLURM_JOB_ID=123456,
    )
    info = detect()
    assert (info.rank, info.world_size, info.local_rank, info.local_world_size) == (5, 7, 1, 2)
    assert info.master_addr == "gpu007"
    assert info.master_port == SLURM_PORT_BASE + 123456 % SLURM_PORT_SPAN
    assert info.source == "slurm (store address from SLURM_JOB_NODELIST/SLURM_JOB_ID)"


def test_slurm_master_port_overrides_the_derived_one(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(monkeypatch, SLURM_PROCID=0, SLURM_NTASKS=2, SLURM_NODELIST="a1", SLURM_JOB_ID=9, MASTER_PORT=4242)
    info = detect()
    assert (info.master_addr, info.master_port) == ("a1", 4242)


def test_spawn_pattern_mixes_arguments_with_master_env(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(monkeypatch, MASTER_ADDR="127.0.0.1", MASTER_PORT=29501)
    info = detect(rank=1, world_size=2)
    assert (info.rank, info.world_size, info.master_addr, info.master_port) == (1, 2, "127.0.0.1", 29501)
    assert info.source.startswith("arguments")


def test_one_argument_with_the_rest_from_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(monkeypatch, RANK=0, WORLD_SIZE=4)
    info = detect(rank=2)
    assert (info.rank, info.world_size) == (2, 4)
    assert info.local_rank is None  # the launcher described rank 0, not us
    assert info.source == "rank argument + torchrun"


def test_launchers_are_tried_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # Inside a Slurm allocation, torchrun's and meshcomm's own variables win.
    setenv(monkeypatch, SLURM_PROCID=0, SLURM_NTASKS=1, RANK=1, WORLD_SIZE=2)
    assert detect().source == "torchrun"
    setenv(monkeypatch, MESHCOMM_RANK=2, MESHCOMM_WORLD_SIZE=3)
    assert (detect().rank, detect().source) == (2, "meshcomm")


def test_nothing_set_names_every_place_looked() -> None:
    with pytest.raises(ValueError, match="rank") as info:
        detect()
    for name in ("rank=", "MESHCOMM_RANK", "RANK (torchrun)", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        assert name in str(info.value)
    with pytest.raises(ValueError, match="world_size=.*MESHCOMM_WORLD_SIZE.*SLURM_NTASKS"):
        detect(rank=0)


def test_rank_without_size_names_the_missing_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(monkeypatch, PMI_RANK=0)
    with pytest.raises(ValueError, match="PMI_RANK is set .* but PMI_SIZE is not"):
        detect()


def test_bad_values_are_rejected_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    setenv(monkeypatch, RANK="one", WORLD_SIZE=2)
    with pytest.raises(ValueError, match="RANK must be an integer, got 'one'"):
        detect()
    with pytest.raises(ValueError, match=r"rank must be in \[0, 2\), got 2"):
        detect(rank=2, world_size=2)
    with pytest.raises(ValueError, match="world_size must be >= 1, got 0"):
        detect(rank=0, world_size=0)
    with pytest.raises(TypeError, match="rank must be int"):
        detect(rank="0", world_size=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "nodelist, hosts",
    [
        ("node1", ["node1"]),
        ("node[01-04,07],gpu3", ["node01", "node02", "node03", "node04", "node07", "gpu3"]),
        ("a[8-10]", ["a8", "a9", "a10"]),
        ("a[08-10]", ["a08", "a09", "a10"]),
        ("rack[1-2]-n[1,3]", ["rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3"]),
        ("x,y[5]", ["x", "y5"]),
        ("n-[1-2].cluster", ["n-1.cluster", "n-2.cluster"]),
    ],
)
def test_expand_slurm_nodelist(nodelist: str, hosts: list[str]) -> None:
    assert expand_nodelist(nodelist) == hosts


@pytest.mark.parametrize("bad", ["node[1-", "node1]", "node[a-b]", "node[3-1]"])
def test_bad_slurm_nodelist_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="Slurm node list"):
        expand_nodelist(bad)
