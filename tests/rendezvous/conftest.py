"""Fixtures for rendezvous tests: a clean launcher environment and the stores under test."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from meshcomm import config

# Every variable a launcher might have set around the test run (e.g. when CI
# itself runs under Slurm); each test starts without them.
LAUNCHER_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "MPI_LOCAL", "TORCHELASTIC_", "HYDRA_")
LAUNCHER_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name in config.VARIABLES or name in LAUNCHER_NAMES or name.startswith(LAUNCHER_PREFIXES):
            monkeypatch.delenv(name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def token() -> bytes:
    return b"test-token"


@pytest.fixture
def master(token: bytes) -> Iterator:
    from meshcomm.rendezvous import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=10, token=token)
    yield store
    store.close()


@pytest.fixture
def token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores built from the environment (connect()) authenticate with this job token."""
    monkeypatch.setenv("MESHCOMM_TOKEN", "env-token")
