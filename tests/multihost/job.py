"""Run one meshcomm job across the namespaces of a Network: one `meshcomm run` per host.

Each host's launcher gets --nnodes/--node-rank/--master-addr/--master-port
and its own --host-id, the way a user starts a job on several machines; host
0's launcher serves the store on its own address. All share one job token.
Every launcher is waited for with a deadline; past it every launcher gets
SIGTERM, on which it stops its ranks, and SIGKILL if it does not exit.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from dataclasses import dataclass

from tests.multihost.netns import Network

STORE_PORT = 29500  # every namespace has its own ports, so a fixed one cannot clash


@dataclass
class HostRun:
    host: int
    returncode: int | None  # None: killed at the deadline
    output: str


def launcher(net: Network, host: int, ranks_per_host: int, argv: list[str], timeout: float) -> list[str]:
    """The `meshcomm run` command line of host `host`, run inside its namespace."""
    command = [sys.executable, "-m", "meshcomm", "run", "-n", str(ranks_per_host),
               "--nnodes", str(len(net.names)), "--node-rank", str(host),
               "--master-addr", net.addresses[0], "--master-port", str(STORE_PORT),
               "--host-id", f"host{host}", "--timeout", str(int(timeout)), *argv]
    return net.command(host, command)


def run_job(net: Network, ranks_per_host: int, argv: list[str], timeout: float = 90.0,
            env: dict[str, str] | None = None) -> list[HostRun]:
    """Start argv (a Python script and its arguments) on every host; wait for all launchers."""
    token = secrets.token_hex(16)
    environ = {**os.environ, "MESHCOMM_TOKEN": token, **(env or {})}
    launchers = [subprocess.Popen(launcher(net, host, ranks_per_host, argv, timeout), env=environ,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for host in range(len(net.names))]
    runs = []
    for host, process in enumerate(launchers):
        try:
            output, _ = process.communicate(timeout=timeout + 30)
            runs.append(HostRun(host, process.returncode, output))
        except subprocess.TimeoutExpired:
            stop(launchers)
            output, _ = process.communicate(timeout=30)
            runs.append(HostRun(host, None, output))
    return runs


def stop(launchers: list[subprocess.Popen]) -> None:
    for process in launchers:
        if process.poll() is None:
            process.terminate()
    for process in launchers:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
