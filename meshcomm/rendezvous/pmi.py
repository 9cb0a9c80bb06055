"""A minimal PMI-1 "simple" client over PMI_FD, so ranks under MPICH's mpiexec (Hydra) can share the store address.

The protocol is one text line per message, `cmd=NAME key=value ...\\n`,
on the socket Hydra's proxy hands each rank as PMI_FD. We only need init,
our key-value space's name, put, a barrier and get: rank 0 puts its store's
host:port, everyone crosses the barrier, the others get it.
"""

from __future__ import annotations

import atexit
import os
import select
import sys
import time

from meshcomm.errors import CommTimeoutError, RendezvousError

STORE_KEY = "meshcomm_store"


def available() -> bool:
    """Whether this process was started by a PMI-1 launcher that left us its socket."""
    return os.environ.get("PMI_FD", "").strip().isdigit()


class PMIClient:
    """Talks PMI-1 on the inherited descriptor; every reply is awaited with a deadline."""

    def __init__(self, timeout: float, fd: int | None = None) -> None:
        if fd is None:
            raw = os.environ.get("PMI_FD", "")
            if not raw.strip().isdigit():
                raise ValueError(f"PMI_FD must name an inherited descriptor, got {raw!r}")
            fd = int(raw)
        # A duplicate, so closing this client never closes the launcher's descriptor
        # (which MPI_Init may use later in the same process). Its flags stay untouched
        # (O_NONBLOCK would be shared with MPI's copy and break its blocking reads):
        # we poll before each read and write instead.
        self._fd = os.dup(fd)
        self._buffer = b""
        self.timeout = timeout
        reply = self._call("init", {"pmi_version": "1", "pmi_subversion": "1"}, "response_to_init")
        if reply.get("rc", "0") != "0":
            raise RendezvousError(f"PMI init refused (rc={reply.get('rc')}): {reply}")
        self.kvsname = self._call("get_my_kvsname", {}, "my_kvsname")["kvsname"]

    def _send(self, cmd: str, fields: dict[str, str]) -> None:
        line = " ".join([f"cmd={cmd}"] + [f"{k}={v}" for k, v in fields.items()]) + "\n"
        data, deadline = line.encode(), time.monotonic() + self.timeout
        while data:
            self._ready(select.POLLOUT, deadline, cmd)
            data = data[os.write(self._fd, data) :]

    def _ready(self, event: int, deadline: float, cmd: str) -> None:
        poller = select.poll()
        poller.register(self._fd, event)
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not poller.poll(remaining * 1000):
            raise CommTimeoutError(f"the PMI server did not answer {cmd} within {self.timeout:g} s")

    def _readline(self, cmd: str) -> str:
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buffer:
            self._ready(select.POLLIN, deadline, cmd)
            chunk = os.read(self._fd, 4096)
            if not chunk:
                raise RendezvousError(f"the PMI server closed its socket during {cmd}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def _call(self, cmd: str, fields: dict[str, str], expect: str) -> dict[str, str]:
        self._send(cmd, fields)
        reply = parse_line(self._readline(cmd))
        if reply.get("cmd") != expect:
            raise RendezvousError(f"PMI {cmd}: expected cmd={expect}, got {reply}")
        return reply

    def put(self, key: str, value: str) -> None:
        if " " in value or "=" in key or " " in key:
            raise ValueError(f"PMI keys and values cannot hold spaces (or '=' in keys): {key!r}={value!r}")
        reply = self._call("put", {"kvsname": self.kvsname, "key": key, "value": value}, "put_result")
        if reply.get("rc", "0") != "0":
            raise RendezvousError(f"PMI put {key} failed: {reply.get('msg', reply)}")

    def barrier(self) -> None:
        """Also commits earlier puts: Hydra makes them visible to every rank at the barrier."""
        self._call("barrier_in", {}, "barrier_out")

    def get(self, key: str) -> str:
        reply = self._call("get", {"kvsname": self.kvsname, "key": key}, "get_result")
        if reply.get("rc", "0") != "0":
            raise RendezvousError(f"PMI get {key} failed: {reply.get('msg', reply)}")
        return reply["value"]

    def close(self, finalize: bool = True) -> None:
        try:
            if finalize:
                self._call("finalize", {}, "finalize_ack")
        finally:
            os.close(self._fd)

    def finalize_at_exit(self) -> None:
        """Hydra treats a rank that ran PMI init and exits without finalize as crashed
        (and kills the job), but finalize ends PMI for the whole process, so a later
        MPI_Init would fail: finalize only when the interpreter exits."""
        atexit.register(self._exit)

    def _exit(self) -> None:
        mpi = sys.modules.get("mpi4py.MPI")
        try:
            # Real MPI did its own PMI init in this process, so its MPI_Finalize finalizes.
            finalize = mpi is None or not mpi.Is_initialized()
        except Exception:
            finalize = False
        try:
            self.close(finalize)
        except (OSError, RendezvousError, CommTimeoutError):
            pass  # the launcher is gone already; nothing left to tell it


def parse_line(line: str) -> dict[str, str]:
    """'cmd=get_result rc=0 value=x' -> {'cmd': 'get_result', 'rc': '0', 'value': 'x'}."""
    fields = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


def exchange_store_address(rank: int, address: str | None, timeout: float, fd: int | None = None) -> str:
    """Rank 0 publishes its store's host:port; every rank returns it (all ranks must call this)."""
    if rank == 0 and address is None:
        raise ValueError("rank 0 must pass the address of the store it hosts")
    client = PMIClient(timeout, fd)
    client.finalize_at_exit()
    if rank == 0 and address is not None:
        client.put(STORE_KEY, address)
    client.barrier()
    return address if rank == 0 and address is not None else client.get(STORE_KEY)
