"""Joining separate groups of processes: ports, published names, Accept/Connect and Join.

A port is a small store server with a token of its own (Open_port), named
"meshcomm-port:host:port:token": whoever holds the name may connect. An
Accept and a Connect meet there; the accepting root then serves a fresh
store for the two groups, and every member of both builds one runtime over
all of them, the accepting side's ranks first. The intercommunicator between
the sides is an ordinary one of that runtime. Spawn (spawn.py) is an Accept
whose other side it started. docs/mpi.md tells the whole story.
"""

from __future__ import annotations

import json
import os
import select
import stat
import threading
import time
from collections.abc import Callable

from meshcomm.api import objects
from meshcomm.errors import AuthenticationError, CommTimeoutError, PeerLostError
from meshcomm.group.runtime import Runtime
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import lane
from meshcomm.mpi import world
from meshcomm.mpi.comm import Comm, Intracomm
from meshcomm.mpi.intercomm import InterGroup, Intercomm
from meshcomm.rendezvous.store import PrefixStore
from meshcomm.rendezvous.tcp_store import TCPStore
from meshcomm.security import auth

PORT_PREFIX = "meshcomm-port:"
MAX_PORT_NAME = 256  # a name is the prefix, an address, a port number and a 64-digit token
_LOOK_SECONDS = 0.05  # an accepting root looks for a connecting group this often (and at its `watch`)
_ROOT_SHARE = 0.9  # a root gives up this share into the timeout, so the others hear why rather than time out
_lock = threading.Lock()
_ports: dict[str, "_Port"] = {}
_connections: list[Runtime] = []  # runtimes joining two groups, still open: closed at Finalize


class _Port:
    """What Open_port serves: a store where connecting roots leave their requests, numbered in arrival order."""

    def __init__(self, host: str, timeout: float) -> None:
        token = auth.generate_token()
        self.store = TCPStore(host, 0, is_master=True, timeout=timeout, token=token.encode())
        self.name = f"{PORT_PREFIX}{host}:{self.store.port}:{token}"
        self.accepted = 0
        self.accepting = threading.Lock()  # Accepts on one port take its connecting groups one at a time


def open_port(info=None) -> str:
    """A new port name for Accept; it is served until Close_port or the end of this process."""
    rt = world.runtime()
    port = _Port(rt.address, rt.timeout)
    with _lock:
        _ports[port.name] = port
    return port.name


def close_port(port_name: str) -> None:
    with _lock:
        port = _ports.pop(port_name, None) if isinstance(port_name, str) else None
    if port is None:
        raise err.Exception(err.ERR_PORT, f"Close_port: {port_name!r} is not a port this process opened")
    port.store.close()


def _close_ports() -> None:
    with _lock:
        ports = [_ports.pop(name) for name in list(_ports)]
    for port in ports:
        port.store.close()


def _parse(port_name) -> tuple[str, int, bytes]:
    if not isinstance(port_name, str):
        raise TypeError(f"port_name must be a str, got {type(port_name).__name__}")
    host, _, rest = port_name.removeprefix(PORT_PREFIX).rpartition(":")
    host, _, port = host.rpartition(":")
    if not port_name.startswith(PORT_PREFIX) or not host or not port.isdigit() or not rest:
        raise err.Exception(err.ERR_PORT, f"{port_name!r} is not a port name (Open_port makes them: "
                                          f"'{PORT_PREFIX}host:port:token')")
    return host, int(port), rest.encode()


# ----- published names: a job's names live in its store


def _names():
    return PrefixStore("mpi/names", world.runtime().store)


def _service(service_name) -> str:
    if not isinstance(service_name, str) or not service_name:
        raise err.Exception(err.ERR_NAME, f"service_name must be a non-empty str, got {service_name!r}")
    return service_name


def publish_name(service_name: str, port_name: str, info=None) -> None:
    """Publish `port_name` under `service_name` for this job's processes (Lookup_name)."""
    _parse(port_name)
    _names().set(_service(service_name), port_name)


def _published(service_name) -> str | None:
    names = _names()
    if not names.check([_service(service_name)]):
        return None
    try:
        return names.get(service_name, timeout=1.0).decode()
    except CommTimeoutError:  # unpublished between the look and the read
        return None


def lookup_name(service_name: str, info=None) -> str:
    port_name = _published(service_name)
    if port_name is None:
        raise err.Exception(err.ERR_NAME, f"Lookup_name: no port is published as {service_name!r} in this job")
    return port_name


def unpublish_name(service_name: str, port_name: str, info=None) -> None:
    if _published(service_name) != port_name:
        raise err.Exception(err.ERR_SERVICE, f"Unpublish_name: {port_name!r} is not published as {service_name!r}")
    _names().delete_key(service_name)


# ----- Accept and Connect


def accept_at_root(port_name: str, sizes_here: int, timeout: float, watch: Callable[[], None] | None = None) -> dict:
    """The accepting root's part: take the port's next connecting group, serve the joint store, answer it.

    `watch()` runs between looks and raises to give up early (Spawn's check that its children still live)."""
    with _lock:
        port = _ports.get(port_name) if isinstance(port_name, str) else None
    if port is None:
        _parse(port_name)
        raise err.Exception(err.ERR_PORT, f"Accept: port {port_name!r} was not opened by this process (or is closed)")
    deadline = time.monotonic() + _ROOT_SHARE * timeout
    with port.accepting:
        number = port.accepted + 1
        while not port.store.check([f"request/{number}"]):
            if watch is not None:
                watch()
            if time.monotonic() >= deadline:
                raise err.Exception(err.ERR_PORT, f"Accept: no group connected to port {port_name!r} within "
                                                  f"{_ROOT_SHARE * timeout:g} s")
            time.sleep(_LOOK_SECONDS)
        port.accepted = number
    request = json.loads(port.store.get(f"request/{number}"))
    host = world.runtime().address
    token = auth.generate_token()
    serving = TCPStore(host, 0, is_master=True, timeout=timeout, token=token.encode())
    answer = {"address": f"{host}:{serving.port}", "token": token, "size": sizes_here}
    port.store.set(f"answer/{number}", json.dumps(answer))
    return {"address": answer["address"], "token": token, "sizes": (sizes_here, request["size"]), "serving": serving}


def _connect_at_root(port_name: str, size_here: int, timeout: float) -> dict:
    host, port, token = _parse(port_name)
    try:
        client = TCPStore(host, port, timeout=timeout, token=token, wait_for_server=False)
    except (PeerLostError, AuthenticationError, CommTimeoutError, OSError) as exc:
        raise err.Exception(err.ERR_PORT, f"Connect: nothing answers as port {port_name!r} ({exc})") from None
    try:
        number = client.add("requests", 1)
        client.set(f"request/{number}", json.dumps({"size": size_here}))
        try:
            answer = json.loads(client.get(f"answer/{number}", timeout=_ROOT_SHARE * timeout))
        except CommTimeoutError:
            raise err.Exception(err.ERR_PORT, f"Connect: no Accept took this group at port {port_name!r} within "
                                              f"{_ROOT_SHARE * timeout:g} s") from None
        try:
            client.delete_key(f"answer/{number}")  # the joint store's token: no later holder of the name reads it
        except PeerLostError:
            pass  # the port was closed once answered (Spawn's is): nothing is left to read
    finally:
        client.close()
    return {"address": answer["address"], "token": answer["token"], "sizes": (answer["size"], size_here)}


def join_sides(g, root: int, at_root: Callable[[], dict], accepting: bool) -> tuple[Intercomm, dict]:
    """Every member of `g`: the root runs `at_root` (an accept or a connect) and tells the others its plan;
    then all build the runtime of both sides, and return the intercommunicator and the plan."""
    box: list = [None]
    failure, serving = None, None
    if g.rank == root:
        try:
            plan = at_root()
            serving = plan.pop("serving", None)
            box[0] = plan
        except Exception as exc:  # told to the other members below, then raised here
            failure = exc
            box[0] = (exc.Get_error_class() if isinstance(exc, err.Exception)
                      else err.ERR_ARG if isinstance(exc, (TypeError, ValueError)) else err.ERR_OTHER, str(exc))
    objects.broadcast_object_list(box, group_src=root, group=g)
    if failure is not None:
        raise failure
    if isinstance(box[0], tuple):
        raise err.Exception(box[0][0], f"the root (rank {root}) could not join the other group: {box[0][1]}")
    plan = box[0]
    accepting_size, connecting_size = plan["sizes"]
    host, port = plan["address"].rsplit(":", 1)
    token = plan["token"].encode()
    store = serving or TCPStore(host, int(port), timeout=g.timeout, token=token, wait_for_server=False)
    rank = g.rank if accepting else accepting_size + g.rank
    try:
        rt = Runtime(rank, accepting_size + connecting_size, store, g.timeout, host, g.runtime.backend, token,
                     lineage="joined", joins_jobs=f"joined-{port}")
    except BaseException:
        store.close()
        raise
    with _lock:
        _connections.append(rt)
    acceptors = tuple(range(accepting_size))
    connectors = tuple(range(accepting_size, accepting_size + connecting_size))
    local, remote = (acceptors, connectors) if accepting else (connectors, acceptors)
    # Ids as _pair_up numbers an intercomm's: the side holding rank 0 first, then the two mailboxes.
    group = rt.new_group(local, g.timeout, "intercomm3/local", group_id=1 if accepting else 2)
    rt.reserve_group_id(4)
    return Intercomm._of(_JoinedSides(group, remote, 1)), plan


class _JoinedSides(InterGroup):
    """An intercomm over a runtime of its own: freeing it closes that runtime, unless a communicator made from
    it (Merge, Dup) still lives; Finalize closes it then. The store's host serves on until the others left."""

    def shutdown(self) -> None:
        super().shutdown()
        rt = self.runtime
        if all(group.destroyed for group_id, group in rt.groups.items() if group_id != 0):
            _close(rt)


def _close(rt: Runtime) -> None:
    with _lock:
        if rt not in _connections:
            return
        _connections.remove(rt)
    rt.close()


def close_all() -> None:
    """At Finalize: the runtimes still joining this process to other groups."""
    with _lock:
        open_ones = list(_connections)
    for rt in open_ones:
        _close(rt)
    _close_ports()


world.at_finalize(close_all)


def root_of(g, root, call: str) -> int:
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < g.size:
        raise err.Exception(err.ERR_ROOT, f"{call}: root must be a rank in [0, {g.size}), got {root!r}")
    return root


def _accept(self: Intracomm, port_name: str, info=None, root: int = 0) -> Intercomm:
    """Collective: wait for a group's Connect at `port_name` (significant at root) and return the intercomm to it."""
    g = self._g
    root = root_of(g, root, "Accept")
    return lane.lane(g).run(lambda: join_sides(g, root, lambda: accept_at_root(port_name, g.size, g.timeout),
                                               accepting=True)[0])


def _connect(self: Intracomm, port_name: str, info=None, root: int = 0) -> Intercomm:
    """Collective: join the group that Accepts at `port_name` (significant at root); return the intercomm to it."""
    g = self._g
    root = root_of(g, root, "Connect")
    return lane.lane(g).run(lambda: join_sides(g, root, lambda: _connect_at_root(port_name, g.size, g.timeout),
                                               accepting=False)[0])


Intracomm.Accept = _accept
Intracomm.Connect = _connect


# ----- Join: two processes joined by a socket


def _join(cls, fd: int) -> Intercomm:
    """The intercomm between this process and the one at the other end of the connected socket `fd`.

    Each end writes 16 random bytes; the higher opens a port, writes its name and accepts, the other connects.
    The socket is only read and written, so it stays as the caller set it (open, blocking or not)."""
    if isinstance(fd, bool) or not isinstance(fd, int) or fd < 0:
        raise TypeError(f"fd must be a file descriptor (an int >= 0), got {fd!r}")
    try:
        is_socket = stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError as exc:
        raise err.Exception(err.ERR_ARG, f"Join: fd {fd} is not open ({exc})") from None
    if not is_socket:
        raise err.Exception(err.ERR_ARG, f"Join: fd {fd} is not a socket")
    deadline = time.monotonic() + _ROOT_SHARE * world.runtime().timeout
    self_comm = Intracomm._of(world.self_group(), "COMM_SELF")
    try:
        mine = os.urandom(16)
        _write(fd, mine, deadline)
        theirs = _read(fd, 16, deadline)
        if mine > theirs:
            port = open_port()
            try:
                _write(fd, len(port).to_bytes(4, "big") + port.encode(), deadline)
                return _accept(self_comm, port)
            finally:
                close_port(port)
        port = _read(fd, int.from_bytes(_read(fd, 4, deadline), "big"), deadline).decode()
        return _connect(self_comm, port)
    except (OSError, EOFError) as exc:
        raise err.Exception(err.ERR_OTHER, f"Join: the socket of fd {fd} failed: {exc}") from None


def _ready(fd: int, reading: bool, deadline: float) -> None:
    ready = select.select([fd] if reading else [], [] if reading else [fd], [], max(deadline - time.monotonic(), 0))
    if not ready[0] and not ready[1]:
        raise TimeoutError("the other end did not answer within the timeout")


def _write(fd: int, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        _ready(fd, False, deadline)
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue


def _read(fd: int, count: int, deadline: float) -> bytes:
    data = b""
    while len(data) < count:
        _ready(fd, True, deadline)
        try:
            chunk = os.read(fd, count - len(data))
        except BlockingIOError:
            continue
        if not chunk:
            raise EOFError(f"the other end closed the socket after {len(data)} of {count} bytes")
        data += chunk
    return data


Comm.Join = classmethod(_join)
