"""Run one meshcomm job across the namespaces of a Network: one `meshcomm run` per host.

Each host's launcher gets --nnodes/--node-rank/--master-addr/--master-port
and its own --host-id, the way a user starts a job on several machines; host
0's launcher serves the store on its own address. All share one job token.
Every launcher is waited for with one deadline (tests.ranks.run_commands);
past it every launcher gets SIGTERM, on which it stops its ranks, and SIGKILL
if it does not exit.
"""

from __future__ import annotations

import secrets
import sys
from dataclasses import dataclass

from tests.multihost.netns import Network
from tests.ranks import fresh_job_env, run_commands

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
    environ = fresh_job_env({"MESHCOMM_TOKEN": secrets.token_hex(16), **(env or {})})
    commands = [launcher(net, host, ranks_per_host, argv, timeout) for host in range(len(net.names))]
    exits = run_commands(commands, env=environ, timeout=timeout + 30, merge_stderr=True)
    return [HostRun(host, None if done.timed_out else done.returncode, done.stdout)
            for host, done in enumerate(exits)]
