"""Shared fixtures: one cluster of real rank processes per world size, reused across tests; a temp dir of the run's own.

Running the tests:

    python -m pytest                  # everything, the slow tests included
    python -m pytest -m "not slow"    # a quick run: leaves out the tests marked slow

`slow` marks the tests that take more than about 5 s each on a 2-core machine
(whole jobs under launchers, fault scenarios that wait out a timeout, the
mpi4py suite). Nothing is left out by default.

Every test that needs running ranks starts them through tests/ranks.py, which
bounds every wait and reaps every process it started.
"""

from __future__ import annotations

import os
import tempfile

import pytest

from tests.ranks import Cluster, close_shared_clusters, get_cluster


@pytest.fixture(scope="session", autouse=True)
def _temp_dir_of_the_run(tmp_path_factory):
    """TMPDIR for the tests and every process they start: the flight-recorder dumps of the failures the tests
    cause (meshcomm-dumps-<job>) land in pytest's own temp tree, which pytest prunes, not in the machine's."""
    directory = str(tmp_path_factory.mktemp("tmpdir"))
    saved_env, saved_module = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = directory, directory
    yield
    tempfile.tempdir = saved_module
    if saved_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved_env


@pytest.fixture(scope="session", autouse=True)
def _close_clusters():
    yield
    close_shared_clusters()


@pytest.fixture(params=[1, 2, 3, 4])
def cluster(request) -> Cluster:
    """A cluster of 1, 2, 3 and 4 ranks in turn."""
    return get_cluster(request.param)


@pytest.fixture
def cluster8() -> Cluster:
    return get_cluster(8)
