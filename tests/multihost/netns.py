"""Several "hosts" on one machine: network namespaces joined by veth pairs on a bridge.

Each namespace has its own loopback and one interface `eth0` with address
10.X.Y.(10 + i) on a /24 shared with the others through a bridge in the root
namespace; `rate` puts a token bucket (`tc tbf`) on every host's interface, so
traffic between hosts crosses a link of that speed while shared memory inside a
host does not. The namespaces share the kernel, /dev/shm and the file system,
so ranks of different "hosts" tell each other apart only by MESHCOMM_HOST_ID,
as the launcher's --host-id sets it.

Needs root and iproute2; `unavailable()` says why not where they are missing.
Names carry this process's pid and a count of the networks it made, so no two
networks share a name: the kernel removes a deleted namespace's veth pairs in
the background, so a name reused at once could still be taken. `close()`
removes everything it made, each veth pair explicitly.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess

_made = itertools.count()  # networks made by this process


def unavailable() -> str | None:
    """Why namespaces cannot be built here, or None when they can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root (run the tests as root to cover several hosts)"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2's `ip` (apt-get install iproute2)"
    probe = f"mcprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    if made.returncode != 0:
        return f"`ip netns add` is not allowed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None


def rate_unavailable() -> str | None:
    """Why a link cannot be rate-limited here (iproute2's `tc`, often in /usr/sbin), or None."""
    return None if shutil.which("tc") else "a rate-limited link needs iproute2's `tc` on PATH"


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")


class Network:
    """`hosts` namespaces on one bridge; use as a context manager."""

    def __init__(self, hosts: int, rate: str | None = None) -> None:
        if not 1 <= hosts <= 200:
            raise ValueError(f"hosts must be in [1, 200], got {hosts}")
        serial = os.getpid() % 10000 * 100 + next(_made) % 100
        tag = f"{serial:06d}"
        self.names = [f"mc{tag}h{i}" for i in range(hosts)]
        self.bridge = f"mcbr{tag}"
        # A /24 per test process, so that concurrent runs do not route into each other.
        self._subnet = f"10.{200 + serial % 50}.{serial // 50 % 250}"
        self.addresses = [f"{self._subnet}.{10 + i}" for i in range(hosts)]
        self.rate = rate
        self._made: list[str] = []
        self._bridge_made = False

    def __enter__(self) -> Network:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _build(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        self._bridge_made = True
        _ip("link", "set", self.bridge, "up")
        for i, (name, address) in enumerate(zip(self.names, self.addresses)):
            _ip("netns", "add", name)
            self._made.append(name)
            outside = f"{self.bridge}v{i}"
            _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", name)
            _ip("link", "set", outside, "master", self.bridge)
            _ip("link", "set", outside, "up")
            _ip("-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", name, "link", "set", "eth0", "up")
            _ip("-n", name, "link", "set", "lo", "up")
            if self.rate:
                self._limit(name)

    def _limit(self, name: str) -> None:
        # Bursts of 256 KiB let a link reach its rate at 1 Gbit/s and above; 50 ms of queue.
        done = subprocess.run(
            ["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf",
             "rate", self.rate, "burst", "256kb", "latency", "50ms"],
            capture_output=True, text=True, timeout=10,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tc tbf rate {self.rate} on {name} failed: {done.stderr.strip()}")

    def command(self, host: int, argv: list[str]) -> list[str]:
        """argv run inside host `host`'s namespace."""
        return ["ip", "netns", "exec", self.names[host], *argv]

    def close(self) -> None:
        for i, name in enumerate(self._made):
            # Deleting our end takes the pair down now; a namespace outlives `netns del` while kernel
            # sockets still hold it (a connection retransmitting into a cut link), and so would its veth.
            subprocess.run(["ip", "link", "del", f"{self.bridge}v{i}"], capture_output=True, timeout=10)
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
        self._made.clear()
        if self._bridge_made:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=10)
            self._bridge_made = False
