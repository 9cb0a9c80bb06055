"""A job on several "hosts" (network namespaces): TCP between them, shared memory inside each.

Skipped, with the reason, where root or iproute2 is missing. Each test builds
its own namespaces and removes them, and every launcher is reaped (job.py).
"""

from __future__ import annotations

import json
import os

import pytest

from meshcomm.transport import shm
from tests.multihost.job import run_job
from tests.multihost.netns import Network, unavailable

REASON = unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
PROGRAM = os.path.join(os.path.dirname(__file__), "program.py")


def results(runs) -> dict[int, dict]:
    found = {}
    for run in runs:
        assert run.returncode == 0, f"host {run.host}'s launcher ended with {run.returncode}:\n{run.output}"
        for line in run.output.splitlines():
            if "RESULT " in line:
                record = json.loads(line.split("RESULT ", 1)[1])
                found[record["rank"]] = record
    return found


@pytest.mark.parametrize(("hosts", "ranks_per_host"), [(2, 2), (3, 1), (2, 3)])
def test_collectives_across_hosts_use_tcp_between_and_shared_memory_within(hosts: int, ranks_per_host: int) -> None:
    with Network(hosts) as net:
        runs = run_job(net, ranks_per_host, [PROGRAM], timeout=90)
    found = results(runs)
    size = hosts * ranks_per_host
    assert sorted(found) == list(range(size))
    for rank, record in found.items():
        host = rank // ranks_per_host
        assert record["host"] == host
        same_host = [r for r in range(size) if r // ranks_per_host == host and r != rank]
        assert record["shm_peers"] == (same_host if shm.available() else []), f"rank {rank}"
        assert record["checks"] == (19 if rank % ranks_per_host == 0 else 18)


def test_a_rate_limited_link_still_carries_the_job() -> None:
    # 100 Mbit/s between hosts: every large message is paced by the token bucket.
    with Network(2, rate="100mbit") as net:
        found = results(run_job(net, 2, [PROGRAM], timeout=120))
    assert sorted(found) == [0, 1, 2, 3]


def test_namespaces_are_removed_after_use() -> None:
    with Network(2) as net:
        names = list(net.names)
    import subprocess

    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    assert not any(name in listed.split() for name in names)
