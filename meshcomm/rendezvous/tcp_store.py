"""TCPStore: a Store client over TCP (store_wire.py's frames); with is_master=True it also hosts the server.

With MESHCOMM_TLS_CERT/KEY set, it speaks TLS (security/tls.py) and runs the
auth handshake inside it.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Sequence

from meshcomm.errors import AuthenticationError, CommTimeoutError, PeerLostError, RendezvousError
from meshcomm.rendezvous.store import (
    Store,
    as_key,
    as_keys,
    as_timeout,
    as_value,
    get_timeout_error,
    wait_timeout_error,
)
from meshcomm.rendezvous.store_server import StoreServer
from meshcomm.rendezvous.store_wire import (
    ADD, CAS, CHECK, DELETE, ERROR, F64, GET, HANDSHAKE_TIMEOUT, I64, MAX_FRAME, NUM_KEYS, OP_NAMES, REPLY_GRACE, SET,
    TIMEOUT, U32, WAIT, ProtocolError, decode_body, encode_frame,
)
from meshcomm.security import auth, tls


def _connect_host(host: str) -> str:
    # A wildcard is where to listen, not where to connect.
    return {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)


def _master_bind_host(host: str) -> str:
    """Where rank 0 listens when told to host the store at `host`.

    An address literal or localhost is bound as given. A host name is served
    on every interface, as torch does: names often resolve to 127.0.1.1 on
    their own host but to the real address elsewhere.
    """
    if host == "localhost":
        return "127.0.0.1"
    try:
        ipaddress.ip_address(host.split("%")[0])
        return host
    except ValueError:
        return ""


class TCPStore(Store):
    """A store client; with is_master=True this process also hosts the server (on a daemon thread).

    Every connection is authenticated with `token` (default: the job token
    from MESHCOMM_TOKEN). `world_size` is recorded for callers, as in torch;
    rendezvous.join() is what waits for the ranks.
    """

    def __init__(
        self,
        host: str,
        port: int,
        is_master: bool = False,
        timeout: float = 300.0,
        token: bytes | None = None,
        world_size: int | None = None,
        wait_for_server: bool = True,
    ) -> None:
        if not isinstance(host, str):
            raise TypeError(f"host must be str, got {type(host).__name__}")
        if not isinstance(port, int) or not (0 if is_master else 1) <= port <= 65535:
            raise ValueError(f"port must be an int in [{0 if is_master else 1}, 65535], got {port!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if world_size is not None and world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        self.host = _connect_host(host)
        self.timeout = float(timeout)
        self.world_size = world_size
        self._token = auth.job_token() if token is None else token
        self._tls = tls.from_environment()
        self._lock = threading.Lock()
        self._sock: socket.socket | ssl.SSLSocket | None = None
        self._closed = False
        self._server: StoreServer | None = None
        # Once it has served us (or when told not to wait for it), a refused connection means the store is gone.
        self._was_connected = not wait_for_server
        if is_master:
            self._server = StoreServer(_master_bind_host(host), port, self._token)
            self._server.start()
            port = self._server.port
        self.port = port
        try:
            self._sock = self._connect()
        except BaseException:
            if self._server is not None:
                self._server.close()
            raise

    def _connect(self) -> socket.socket | ssl.SSLSocket:
        """Connect and authenticate, retrying until the deadline: the server may start after us."""
        where = f"{self.host}:{self.port}"
        deadline = time.monotonic() + self.timeout
        delay = 0.01
        last: BaseException | None = None
        while True:
            if self._closed:  # closed from another thread while this one was retrying
                raise RuntimeError("the store is closed")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RendezvousError(f"could not reach the store at {where} within {self.timeout:g} s: {last}")
            try:
                sock = socket.create_connection((self.host, self.port), timeout=min(remaining, 5.0))
            except ConnectionRefusedError as exc:
                if self._was_connected:
                    # It served us and now nobody listens: it is gone (its host exited), not starting.
                    raise PeerLostError(f"the store at {where} is gone: {exc}") from None
                last = exc
                time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
                delay = min(delay * 2, 1.0)
                continue
            except OSError as exc:
                last = exc
                time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
                delay = min(delay * 2, 1.0)
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                # Wait for the server's greeting first: a connection closed before it
                # (server starting, closing or busy) is worth retrying, while one closed
                # after it means our token was refused. Under TLS the server closes a
                # connection it is too busy for before the TLS handshake completes.
                sock.settimeout(min(remaining, HANDSHAKE_TIMEOUT))
                if self._tls is not None:
                    sock = self._tls.handshake(sock, server_side=False, timeout=min(remaining, HANDSHAKE_TIMEOUT))
                elif not sock.recv(1, socket.MSG_PEEK):
                    raise ConnectionResetError("the store closed the connection before greeting")
                auth.handshake(sock, self._token, b"store", False, min(remaining, HANDSHAKE_TIMEOUT))
            except AuthenticationError as exc:
                sock.close()
                # A server that answered but refused us will refuse again; retrying only hides it.
                shared = "MESHCOMM_TOKEN and TLS certificate authority" if self._tls else "MESHCOMM_TOKEN"
                raise AuthenticationError(
                    f"the store at {where} refused the connection: {exc}; do all ranks and the store "
                    f"share the same {shared}?"
                ) from None
            except OSError as exc:
                sock.close()
                last = exc
                time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
                delay = min(delay * 2, 1.0)
                continue
            self._was_connected = True
            return sock

    def _request(self, op: int, args: Sequence[bytes], wait: float | None = None) -> tuple[int, list[bytes]]:
        with self._lock:
            if self._closed:
                raise RuntimeError("the store is closed")
            if self._sock is None:
                self._sock = self._connect()
            sock = self._sock
            reply_timeout = self.timeout if wait is None else wait + REPLY_GRACE
            try:
                sock.settimeout(reply_timeout)
                sock.sendall(encode_frame(op, args))
                (n,) = U32.unpack(self._recv_exact(sock, 4))
                if n == 0 or n > MAX_FRAME:
                    raise ProtocolError(f"reply frame of {n} bytes")
                return decode_body(self._recv_exact(sock, n))
            except socket.timeout:
                self._reset()
                raise CommTimeoutError(
                    f"the store at {self.host}:{self.port} did not answer {OP_NAMES[op]} within {reply_timeout:g} s"
                ) from None
            except (OSError, ProtocolError) as exc:
                self._reset()
                raise PeerLostError(
                    f"lost the connection to the store at {self.host}:{self.port} during {OP_NAMES[op]}: {exc}"
                ) from None

    def _reset(self) -> None:
        # The reply stream is out of step now; the next request reconnects.
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @staticmethod
    def _recv_exact(sock: socket.socket, nbytes: int) -> bytes:
        data = bytearray()
        while len(data) < nbytes:
            chunk = sock.recv(min(nbytes - len(data), 1 << 20))
            if not chunk:
                raise ConnectionError("the store closed the connection")
            data += chunk
        return bytes(data)

    def _ok(self, op: int, args: Sequence[bytes]) -> list[bytes]:
        status, reply = self._request(op, args)
        if status == ERROR:
            raise ValueError(reply[0].decode(errors="replace") if reply else f"store {OP_NAMES[op]} failed")
        return reply

    def set(self, key: str, value: bytes | str) -> None:
        self._ok(SET, [as_key(key).encode(), as_value(value)])

    def get(self, key: str, timeout: float | None = None) -> bytes:
        wait = as_timeout(timeout, self.timeout)
        status, reply = self._request(GET, [as_key(key).encode(), F64.pack(wait)], wait)
        if status == TIMEOUT:
            raise get_timeout_error(key, wait)
        return reply[0]

    def add(self, key: str, amount: int) -> int:
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise TypeError(f"add amount must be int, got {type(amount).__name__}")
        return int(self._ok(ADD, [as_key(key).encode(), I64.pack(amount)])[0])

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        args = [as_key(key).encode(), as_value(expected, "expected"), as_value(desired, "desired")]
        return self._ok(CAS, args)[0]

    def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        names = as_keys(keys)
        wait = as_timeout(timeout, self.timeout)
        status, reply = self._request(WAIT, [F64.pack(wait)] + [k.encode() for k in names], wait)
        if status == TIMEOUT:
            raise wait_timeout_error([m.decode() for m in reply], wait)

    def check(self, keys: Sequence[str]) -> bool:
        return self._ok(CHECK, [k.encode() for k in as_keys(keys)])[0] == b"1"

    def delete_key(self, key: str) -> bool:
        return self._ok(DELETE, [as_key(key).encode()])[0] == b"1"

    def num_keys(self) -> int:
        return int(self._ok(NUM_KEYS, [])[0])

    def linger(self, seconds: float) -> None:
        """If this process serves the store, keep serving until the other clients have left or
        `seconds` passed: after a failure, they may still need it to learn what went wrong."""
        deadline = time.monotonic() + seconds
        while self._server is not None and self._server.client_count() > 1 and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self._closed = True  # before the lock: a thread retrying a lost store under it gives up at its next try
        with self._lock:
            self._reset()
        if self._server is not None:
            self._server.close()
            self._server = None
