"""Which peers share this host, and the shared-memory channels to them.

Host identity is the hostname plus the kernel's boot id (two containers with
the same hostname on different machines differ), overridable with
MESHCOMM_HOST_ID so tests can fake several hosts on one machine.
"""

from __future__ import annotations

import os
import socket

from meshcomm import config
from meshcomm.transport import cma, shm

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_MAX_RING = 4 << 20
_MIN_RING = 64 << 10
_RING_BUDGET = 64 << 20  # inbox bytes per rank (tmpfs pages are only used once touched)


def host_id() -> str:
    override = config.get("MESHCOMM_HOST_ID")
    if override:
        return override
    try:
        with open(_BOOT_ID) as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def shm_wanted() -> bool:
    choice = config.get("MESHCOMM_TRANSPORT").lower()
    if choice not in ("auto", "tcp"):
        raise ValueError(f"MESHCOMM_TRANSPORT must be 'auto' or 'tcp', got {choice!r}")
    return choice == "auto" and shm.available()


def expected_on_this_host() -> tuple[bool, bool]:
    """(board, single copy): whether ranks started side by side on this host would talk through shared memory
    (so a group of them gets a board) and reach each other's memory (so its board takes posts by reference).
    A prediction for tools that run no job (the simulator, the model's report); a job's ranks probe each
    other instead, and a probe may still refuse what this expects (seccomp, a sandbox)."""
    board = shm_wanted()
    return board, board and single_copy_bytes() > 0 and cma.expected_between_siblings()


def ring_bytes(nlocal: int) -> int:
    chosen = config.get_int("MESHCOMM_SHM_RING_BYTES")
    if chosen is not None:
        if chosen < 4096:
            raise ValueError(f"MESHCOMM_SHM_RING_BYTES must be >= 4096, got {chosen}")
        return chosen
    per_peer = _RING_BUDGET // max(nlocal - 1, 1)
    return max(_MIN_RING, min(_MAX_RING, per_peer)) // 4096 * 4096


def single_copy_bytes() -> int:
    """Messages at least this large to a same-host peer are read from the sender's memory; 0 = never."""
    return _byte_count("MESHCOMM_SINGLE_COPY_BYTES")


def stream_bytes() -> int:
    """Sends below this size go through the ring, not by reference, between ranks with a core each."""
    return _byte_count("MESHCOMM_STREAM_BYTES")


def _byte_count(name: str) -> int:
    chosen = config.get_int(name)
    if chosen is None or chosen < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {config.get(name)!r}")
    return chosen


def _link_labels(hosts: list[bytes]) -> tuple[int, ...]:
    """Per rank, a label shared exactly by the ranks it reaches through shared memory.

    Built from every rank's host key, so all ranks compute the same labels (the
    cost model's choice depends on them and must agree). A host with one rank
    on TCP keeps all its ranks on TCP, as LocalPeers does.
    """
    members: dict[bytes, list[int]] = {}
    for rank, key in enumerate(hosts):
        members.setdefault(key.split(b"|", 1)[1], []).append(rank)
    labels = list(range(len(hosts)))
    for ranks in members.values():
        if all(hosts[r].startswith(b"shm|") for r in ranks):
            for r in ranks:
                labels[r] = ranks[0]
    return tuple(labels)


class LocalPeers:
    """Finds the ranks of this host through the store and maps their inboxes.

    Every rank calls it (it reads every rank's host key). `channels` maps each
    local peer's global rank to its ShmChannel; empty when shared memory is off
    or this rank is alone on its host. `host_of` gives every rank's host index.
    """

    def __init__(self, rank: int, world_size: int, store, timeout: float) -> None:
        wanted = shm_wanted()
        self.single_copy_bytes = single_copy_bytes()
        self.stream_bytes = stream_bytes()
        mine = f"{'shm' if wanted else 'tcp'}|{host_id()}".encode()
        store.set(f"host/{rank}", mine)
        hosts = {r: mine if r == rank else store.get(f"host/{r}", timeout=timeout) for r in range(world_size)}
        # A rank that cannot use shared memory keeps its whole host on TCP: both
        # ends of a channel must agree on it.
        self.ranks = sorted(r for r, h in hosts.items() if h.split(b"|", 1)[1] == mine.split(b"|", 1)[1])
        # Host index of every rank (numbered in order of first appearance), for node-aware algorithms.
        index: dict[bytes, int] = {}
        self.host_of = tuple(index.setdefault(hosts[r].split(b"|", 1)[1], len(index)) for r in range(world_size))
        self.enabled = len(self.ranks) > 1 and all(hosts[r].startswith(b"shm|") for r in self.ranks)
        self.link_labels = _link_labels([hosts[r] for r in range(world_size)])
        self.channels: dict[int, shm.ShmChannel] = {}
        self.job = config.get("MESHCOMM_JOB_ID") or f"p{os.getpid()}"  # names this job's shared files
        self.segment: shm.Segment | None = None
        self._peer_segments: list[shm.Segment] = []
        # Whether every rank of this host can read and write every other's memory (cma.probe): the same
        # answer on each of them, so they agree on which calls a group's board may take by reference
        # (board/run.py).
        self.all_reach_each_other = False
        if self.enabled:
            self._map(rank, store, timeout)

    def _map(self, rank: int, store, timeout: float) -> None:
        slot = self.ranks.index(rank)
        size = ring_bytes(len(self.ranks))
        name = f"{shm.segment_name(self.job, rank)}-{os.urandom(4).hex()}"
        self.segment = shm.Segment(name, len(self.ranks), size, create=True)
        self.segment.publish_identity()
        try:
            store.set(f"shm/name/{rank}", name)
            for peer in self.ranks:
                if peer == rank:
                    continue
                peer_name = store.get(f"shm/name/{peer}", timeout=timeout).decode()
                theirs = shm.Segment(peer_name, len(self.ranks), size, create=False)
                self._peer_segments.append(theirs)
                self.channels[peer] = shm.ShmChannel(self.segment, theirs, slot, self.ranks.index(peer))
            store.set(f"shm/attached/{rank}", b"1")
            store.wait([f"shm/attached/{peer}" for peer in self.ranks], timeout=timeout)
            # Each rank says in its own inbox whose memory it can read; a sender
            # looks there before passing a large message by reference. A sender
            # that looks before the probe is done just copies through the ring.
            reaches_all = True
            for peer, theirs in zip((p for p in self.ranks if p != rank), self._peer_segments):
                ok = self.single_copy_bytes > 0 and theirs.probe_owner()
                self.segment.record_read(self.ranks.index(peer), ok)
                reaches_all = reaches_all and ok
            store.set(f"shm/reaches_all/{rank}", b"1" if reaches_all else b"0")
            self.all_reach_each_other = reaches_all and all(
                store.get(f"shm/reaches_all/{peer}", timeout=timeout) == b"1" for peer in self.ranks if peer != rank)
        finally:
            # Once every peer has it mapped (or start-up failed), the name can go:
            # the memory lives until the last process unmaps it, crash or not.
            self.segment.unlink()

    def sleep(self, timeout: float, ready) -> None:
        self.segment.sleep(timeout, ready)

    def wake_self(self) -> None:
        if self.segment is not None:
            self.segment.ring_doorbell()

    def close(self) -> None:
        self.channels.clear()
        for segment in self._peer_segments:
            segment.close()
        self._peer_segments.clear()
        if self.segment is not None:
            self.segment.close()
            self.segment = None
