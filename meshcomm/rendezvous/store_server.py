"""StoreServer: the key-value store served over TCP by one process (a selector loop) to authenticated clients.

The wire format is store_wire.py's. With MESHCOMM_TLS_CERT/KEY set, server and
clients speak TLS (security/tls.py) and run the auth handshake inside it.
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

from meshcomm.errors import AuthenticationError
from meshcomm.rendezvous.store import add_result, compare_set_result
from meshcomm.rendezvous.store_wire import (
    ADD, CAS, CHECK, DELETE, ERROR, F64, GET, HANDSHAKE_TIMEOUT, I64, MAX_FRAME, MAX_PENDING_HANDSHAKES, NUM_KEYS, OK,
    OP_NAMES, SET, TIMEOUT, U32, WAIT, ProtocolError, decode_body, encode_frame, is_loopback,
)
from meshcomm.security import auth, tls


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
                # Started under the lock: close() joins every registered thread, and a thread never started
                # cannot be joined.
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
            (n,) = U32.unpack_from(buf, 0)
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
            self._park(conn, op, [args[0].decode()], F64.unpack(args[1])[0])
        elif op == WAIT:
            if not args:
                raise ProtocolError("wait takes a timeout")
            self._park(conn, op, [a.decode() for a in args[1:]], F64.unpack(args[0])[0])
        elif op == ADD:
            need(2)
            key = args[0].decode()
            try:
                new = add_result(self._data.get(key), key, I64.unpack(args[1])[0])
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
