"""TCPStore: a Store served over TCP by one process (selector loop) to authenticated clients.

Wire format, after the auth handshake: every message is a frame
`u32 length | body`. A request body is `u8 opcode` followed by arguments,
each `u32 length | bytes`; a response body is `u8 status` followed by
arguments the same way. Blocking requests (GET, WAIT) carry their timeout;
the server parks them and answers when the keys appear or the timeout passes,
so one waiting client never holds up another.

With MESHCOMM_TLS_CERT/KEY set, server and clients speak TLS (tls.py) and run
the auth handshake inside it.
"""

from __future__ import annotations

import heapq
import ipaddress
import itertools
import selectors
import socket
import ssl
import struct
import threading
import time
import warnings
from collections.abc import Sequence

from meshcomm.errors import AuthenticationError, CommTimeoutError, PeerLostError, RendezvousError
from meshcomm.security import auth, tls
from meshcomm.rendezvous.store import (
    Store,
    add_result,
    as_key,
    as_keys,
    as_timeout,
    as_value,
    compare_set_result,
    get_timeout_error,
    wait_timeout_error,
)

# A frame larger than this is garbage or an attack, never a real request.
MAX_FRAME = 64 << 20
# How long an accepted connection may take to prove it holds the token.
HANDSHAKE_TIMEOUT = 10.0
# Handshakes in flight at once; beyond this new connections are refused so a
# flood of silent sockets cannot exhaust threads.
MAX_PENDING_HANDSHAKES = 256
# Extra time a client waits past a blocking request's deadline for the
# server's own timeout answer before it gives the connection up.
REPLY_GRACE = 10.0

SET, GET, ADD, CAS, WAIT, CHECK, DELETE, NUM_KEYS = range(1, 9)
OK, TIMEOUT, ERROR = range(3)
OP_NAMES = {SET: "set", GET: "get", ADD: "add", CAS: "compare_set", WAIT: "wait", CHECK: "check", DELETE: "delete_key", NUM_KEYS: "num_keys"}

_U32 = struct.Struct("!I")
_F64 = struct.Struct("!d")
_I64 = struct.Struct("!q")


class ProtocolError(Exception):
    """A frame that does not parse; the connection that sent it is dropped."""


def encode_frame(code: int, args: Sequence[bytes]) -> bytes:
    body = bytearray([code])
    for arg in args:
        body += _U32.pack(len(arg))
        body += arg
    return _U32.pack(len(body)) + bytes(body)


def decode_body(body: bytes | bytearray) -> tuple[int, list[bytes]]:
    if not body:
        raise ProtocolError("empty frame")
    code, args, pos = body[0], [], 1
    while pos < len(body):
        if pos + 4 > len(body):
            raise ProtocolError("truncated argument length")
        (n,) = _U32.unpack_from(body, pos)
        pos += 4
        if pos + n > len(body):
            raise ProtocolError("argument runs past the frame")
        args.append(bytes(body[pos : pos + n]))
        pos += n
    return code, args


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


def _listen(host: str, port: int) -> socket.socket:
    if host in ("", "0.0.0.0", "::"):
        if host != "0.0.0.0" and socket.has_dualstack_ipv6():
            return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=1024)
        return socket.create_server(("", port), backlog=1024)
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host.split("%")[0]).version == 6 else socket.AF_INET
    except ValueError:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family, backlog=1024)


class _Parked:
    """A GET or WAIT the server answers later."""

    def __init__(self, op: int, keys: list[str], deadline: float, seq: int) -> None:
        self.op, self.keys, self.deadline, self.seq = op, keys, deadline, seq


class _Conn:
    def __init__(self, sock: socket.socket | tls.TlsStream) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.writing = False
        self.parked: _Parked | None = None
        self.closed = False


class StoreServer:
    """The store's server: one selector thread owns all state, so no locks are needed on it.

    Handshakes run on short-lived threads with a deadline, so a client that
    connects and says nothing (or says it slowly) never stalls the loop.
    """

    def __init__(self, host: str, port: int = 0, token: bytes | None = None) -> None:
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int in [0, 65535], got {port!r}")
        self.token = auth.job_token() if token is None else token
        self._tls = tls.from_environment()
        self._listener = _listen(host, port)
        self._listener.setblocking(False)
        bound = self._listener.getsockname()
        self.host, self.port = bound[0], bound[1]
        if not self.token and not is_loopback(self.host):
            # Always raised from this line, so the default filter shows it once per process.
            warnings.warn(
                f"the meshcomm store listens on {self.host}:{self.port} without a token: anyone who can "
                "reach this port can join the job or write into its store; set MESHCOMM_TOKEN "
                "(e.g. from `meshcomm run`) on every rank",
                RuntimeWarning,
            )
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._lock = threading.Lock()
        self._ready: list[socket.socket | tls.TlsStream] = []
        self._handshaking: dict[socket.socket, threading.Thread] = {}
        self._closing = False
        self._thread: threading.Thread | None = None
        self._serving = threading.Lock()
        self._data: dict[str, bytes] = {}
        self._waiters: dict[str, set[_Conn]] = {}
        self._timers: list[tuple[float, int, _Conn]] = []
        self._seq = itertools.count()
        self._conns: set[_Conn] = set()
        # Connections whose buffered requests can proceed again (released or flushed).
        self._resume: list[_Conn] = []
        self._torn_down = False

    def start(self) -> None:
        """Serve on a daemon thread (how a rank hosts the store beside its own work)."""
        if self._thread is not None:
            raise RuntimeError("the store server is already started")
        self._thread = threading.Thread(target=self.serve_forever, name=f"meshcomm-store-{self.port}", daemon=True)
        self._thread.start()

    def serve_forever(self) -> None:
        """Serve until close() is called from another thread."""
        with self._serving:
            try:
                while not self._closing:
                    self._step()
            finally:
                self._teardown()

    def close(self) -> None:
        """Stop serving, drop every connection and wait for the server's threads."""
        with self._lock:
            if self._closing:
                pending = []
            else:
                self._closing = True
                pending = list(self._handshaking.items())
        for sock, _ in pending:
            # Unblocks the handshake thread at once instead of after its timeout.
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._wake()
        for _, thread in pending:
            thread.join(HANDSHAKE_TIMEOUT + 1)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(HANDSHAKE_TIMEOUT + 1)
        elif self._thread is None and self._serving.acquire(blocking=False):
            # Never served: nobody else will release the sockets.
            try:
                self._teardown()
            finally:
                self._serving.release()

    def client_count(self) -> int:
        """Authenticated connections being served now."""
        return len(self._conns)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # the pipe is full (a wake-up is already pending) or closed

    def _teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        for conn in list(self._conns):
            self._drop(conn)
        for sock in (self._listener, self._wake_r, self._wake_w):
            try:
                self._sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()
        with self._lock:
            ready, self._ready = self._ready, []
        for sock in ready:
            sock.close()
        self._sel.close()

    def _step(self) -> None:
        timeout = None
        if self._timers:
            timeout = max(self._timers[0][0] - time.monotonic(), 0.0)
        for key, mask in self._sel.select(timeout):
            if key.data == "listen":
                self._accept()
            elif key.data == "wake":
                self._adopt_ready()
            else:
                conn = key.data
                if mask & selectors.EVENT_READ and not conn.closed:
                    self._read(conn)
                if mask & selectors.EVENT_WRITE and not conn.closed:
                    self._flush(conn)
        self._expire_timers()
        while self._resume:
            self._process(self._resume.pop())

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. the peer reset before accept; nothing to serve
            with self._lock:
                if self._closing or len(self._handshaking) >= MAX_PENDING_HANDSHAKES:
                    sock.close()
                    continue
                thread = threading.Thread(target=self._handshake, args=(sock,), name="meshcomm-store-auth", daemon=True)
                self._handshaking[sock] = thread
            thread.start()

    def _handshake(self, sock: socket.socket) -> None:
        ok = False
        try:
            sock.setblocking(True)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._wrap(sock)
                sock.settimeout(HANDSHAKE_TIMEOUT)
                sock.do_handshake()
            auth.handshake(sock, self.token, b"store", True, HANDSHAKE_TIMEOUT)
            sock.setblocking(False)
            ok = True
        except (AuthenticationError, OSError):
            pass
        with self._lock:
            del self._handshaking[sock]
            if ok and not self._closing:
                self._ready.append(sock if self._tls is None else tls.TlsStream(sock))
            else:
                ok = False
        if ok:
            self._wake()
        else:
            sock.close()

    def _wrap(self, sock: socket.socket) -> ssl.SSLSocket:
        """The TLS socket replacing `sock` (which wrapping detaches), before its handshake.

        It takes `sock`'s place among the handshakes in flight, so that
        close() can still cut the handshake short.
        """
        with self._lock:
            if self._closing:
                raise OSError("the store is closing")
            wrapped = self._tls.wrap(sock, server_side=True)
            self._handshaking[wrapped] = self._handshaking.pop(sock)
        return wrapped

    def _adopt_ready(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        with self._lock:
            ready, self._ready = self._ready, []
        for sock in ready:
            conn = _Conn(sock)
            self._conns.add(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _drop(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        conn.parked = None
        self._conns.discard(conn)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.inbuf += data
        self._process(conn)

    def _process(self, conn: _Conn) -> None:
        buf = conn.inbuf
        # One request at a time per connection, and none while its replies are
        # unsent: a client that stops reading only stalls itself.
        while not conn.closed and conn.parked is None and not conn.outbuf and len(buf) >= 4:
            (n,) = _U32.unpack_from(buf, 0)
            if n == 0 or n > MAX_FRAME:
                self._drop(conn)
                return
            if len(buf) < 4 + n:
                break
            body = bytes(buf[4 : 4 + n])
            del buf[: 4 + n]
            try:
                self._handle(conn, *decode_body(body))
            except (ProtocolError, UnicodeDecodeError, struct.error):
                self._drop(conn)
                return
        if len(buf) > MAX_FRAME + 4:
            # Only a client that pipelines behind a parked request gets here.
            self._drop(conn)

    def _reply(self, conn: _Conn, status: int, args: Sequence[bytes] = ()) -> None:
        if conn.closed:
            return
        conn.outbuf += encode_frame(status, args)
        self._flush(conn)

    def _flush(self, conn: _Conn) -> None:
        try:
            while conn.outbuf:
                sent = conn.sock.send(conn.outbuf)
                del conn.outbuf[:sent]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._drop(conn)
            return
        writing = bool(conn.outbuf)
        if writing != conn.writing:
            conn.writing = writing
            self._sel.modify(conn.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if writing else 0), conn)
            if not writing and conn.inbuf:
                self._resume.append(conn)

    def _handle(self, conn: _Conn, op: int, args: list[bytes]) -> None:
        def need(count: int) -> None:
            if len(args) != count:
                raise ProtocolError(f"{OP_NAMES.get(op, op)} takes {count} arguments, got {len(args)}")

        if op == SET:
            need(2)
            key = args[0].decode()
            self._data[key] = args[1]
            self._reply(conn, OK)
            self._key_changed(key)
        elif op == GET:
            need(2)
            self._park(conn, op, [args[0].decode()], _F64.unpack(args[1])[0])
        elif op == WAIT:
            if not args:
                raise ProtocolError("wait takes a timeout")
            self._park(conn, op, [a.decode() for a in args[1:]], _F64.unpack(args[0])[0])
        elif op == ADD:
            need(2)
            key = args[0].decode()
            try:
                new = add_result(self._data.get(key), key, _I64.unpack(args[1])[0])
            except ValueError as exc:
                self._reply(conn, ERROR, [str(exc).encode()])
                return
            self._data[key] = new
            self._reply(conn, OK, [new])
            self._key_changed(key)
        elif op == CAS:
            need(3)
            key = args[0].decode()
            desired = compare_set_result(self._data.get(key), args[1], args[2])
            if desired is not None:
                self._data[key] = desired
            self._reply(conn, OK, [self._data.get(key, args[1] if desired is None else desired)])
            if desired is not None:
                self._key_changed(key)
        elif op == CHECK:
            present = all(a.decode() in self._data for a in args)
            self._reply(conn, OK, [b"1" if present else b"0"])
        elif op == DELETE:
            need(1)
            existed = self._data.pop(args[0].decode(), None) is not None
            self._reply(conn, OK, [b"1" if existed else b"0"])
        elif op == NUM_KEYS:
            need(0)
            self._reply(conn, OK, [str(len(self._data)).encode()])
        else:
            raise ProtocolError(f"unknown opcode {op}")

    def _park(self, conn: _Conn, op: int, keys: list[str], timeout: float) -> None:
        if not timeout >= 0:  # also rejects NaN
            raise ProtocolError(f"bad timeout {timeout}")
        seq = next(self._seq)
        conn.parked = _Parked(op, keys, time.monotonic() + min(timeout, 1e9), seq)
        if not self._try_release(conn):
            heapq.heappush(self._timers, (conn.parked.deadline, seq, conn))

    def _try_release(self, conn: _Conn) -> bool:
        parked = conn.parked
        if parked is None or conn.closed:
            return True
        missing = [k for k in parked.keys if k not in self._data]
        if missing:
            # Waiting on one missing key is enough: it is re-checked when that key appears.
            self._waiters.setdefault(missing[0], set()).add(conn)
            return False
        conn.parked = None
        self._reply(conn, OK, [self._data[parked.keys[0]]] if parked.op == GET else [])
        if conn.inbuf:
            self._resume.append(conn)
        return True

    def _key_changed(self, key: str) -> None:
        for conn in self._waiters.pop(key, ()):
            self._try_release(conn)

    def _expire_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, seq, conn = heapq.heappop(self._timers)
            parked = conn.parked
            if parked is None or parked.seq != seq or conn.closed:
                continue
            conn.parked = None
            missing = [k.encode() for k in parked.keys if k not in self._data]
            self._reply(conn, TIMEOUT, missing)
            if conn.inbuf:
                self._resume.append(conn)


def run_store_server(host: str, port: int, token: bytes | None = None) -> None:
    """Serve a standalone store until interrupted (`meshcomm store`; ranks then use MESHCOMM_STORE=external)."""
    server = StoreServer(host, port, token)
    try:
        server.serve_forever()
    finally:
        server.close()


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
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RendezvousError(f"could not reach the store at {where} within {self.timeout:g} s: {last}")
            try:
                sock = socket.create_connection((self.host, self.port), timeout=min(remaining, 5.0))
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
                (n,) = _U32.unpack(self._recv_exact(sock, 4))
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
        status, reply = self._request(GET, [as_key(key).encode(), _F64.pack(wait)], wait)
        if status == TIMEOUT:
            raise get_timeout_error(key, wait)
        return reply[0]

    def add(self, key: str, amount: int) -> int:
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise TypeError(f"add amount must be int, got {type(amount).__name__}")
        return int(self._ok(ADD, [as_key(key).encode(), _I64.pack(amount)])[0])

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        args = [as_key(key).encode(), as_value(expected, "expected"), as_value(desired, "desired")]
        return self._ok(CAS, args)[0]

    def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        names = as_keys(keys)
        wait = as_timeout(timeout, self.timeout)
        status, reply = self._request(WAIT, [_F64.pack(wait)] + [k.encode() for k in names], wait)
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
        with self._lock:
            self._closed = True
            self._reset()
        if self._server is not None:
            self._server.close()
            self._server = None
