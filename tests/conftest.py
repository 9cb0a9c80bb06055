"""Shared fixtures: one cluster of real rank processes per world size, reused across tests."""

from __future__ import annotations

import pytest

from tests.cluster import Cluster

_clusters: dict[int, Cluster] = {}


def get_cluster(size: int) -> Cluster:
    cluster = _clusters.get(size)
    if cluster is not None and cluster.broken:
        cluster.close()
        cluster = None
    if cluster is None:
        cluster = _clusters[size] = Cluster(size)
    return cluster


@pytest.fixture(scope="session", autouse=True)
def _close_clusters():
    yield
    for cluster in _clusters.values():
        cluster.close()
    _clusters.clear()


@pytest.fixture(params=[1, 2, 3, 4])
def cluster(request) -> Cluster:
    """A cluster of 1, 2, 3 and 4 ranks in turn."""
    return get_cluster(request.param)


@pytest.fixture
def cluster8() -> Cluster:
    return get_cluster(8)
