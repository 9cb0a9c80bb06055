"""Point-to-point: send/recv/isend/irecv and batch_isend_irecv, torch.distributed style.

A receive with no source takes the first matching message from any rank and
returns who sent it. Messages with the same tag between two ranks arrive in
the order they were sent.
"""

from __future__ import annotations

from meshcomm.api.state import group_peer, resolve_group
from meshcomm.api.tensors import as_buffer
from meshcomm.errors import CommTimeoutError
from meshcomm.trace.flight_recorder import STARTED_STATE, STATE, FlightRecorder
from meshcomm.transport.buffers import byte_view as _bytes
from meshcomm.transport.header import KIND_P2P, Key


class P2PWork:
    """The Work of an isend/irecv: waiting on it drives the transport."""

    def __init__(self, what: str, peer: int | None, tag: int, transport, handle, group, finish=None) -> None:
        self._what, self._peer, self._tag = what, peer, tag  # the description is built only when needed
        self._transport = transport
        self._handle = handle
        self._group = group
        self._finish = finish
        self._finished = False
        self._recorded = group.runtime.recorder.start_p2p(group.group_name, f"{self.description}, {handle.nbytes} B",
                                                          peer)

    @property
    def description(self) -> str:
        whom = "any rank" if self._peer is None else f"rank {self._peer}"
        return f"{self._what} {whom} (tag {self._tag})"

    def wait(self, timeout: float | None = None) -> bool:
        try:
            self._transport.wait([self._handle], timeout=self._group.timeout if timeout is None else timeout)
        except CommTimeoutError as exc:
            error = CommTimeoutError(f"{self.description} in group {self._group.group_name!r}: {exc}")
            FlightRecorder.finish(self._recorded, error)
            raise error from None
        except Exception as exc:
            FlightRecorder.finish(self._recorded, exc)
            raise
        if not self._finished:
            self._finished = True
            FlightRecorder.finish(self._recorded)
            if self._finish is not None:
                self._finish()
        return True

    def is_completed(self) -> bool:
        done = self._transport.test(self._handle)
        if done and self._recorded[STATE] == STARTED_STATE:
            FlightRecorder.finish(self._recorded, self._handle.error)
        return done

    def is_success(self) -> bool:
        return self.is_completed() and self._handle.error is None

    def exception(self) -> BaseException | None:
        return self._handle.error

    def source_rank(self) -> int:
        """Global rank the message came from (for receives from any source)."""
        self.wait()
        return self._handle.source  # the transport counts in global ranks already

    def _source_rank(self) -> int:
        return self.source_rank()

    def __repr__(self) -> str:
        return f"<P2PWork {self.description} {'done' if self._handle.done else 'pending'}>"


def _check_tag(tag) -> int:
    if isinstance(tag, bool) or not isinstance(tag, int):
        raise TypeError(f"tag must be an int, got {type(tag).__name__}")
    if not -(2**63) <= tag < 2**63:
        raise ValueError(f"tag must fit in 64 bits, got {tag}")
    return tag


def isend(tensor, dst=None, group=None, tag=0, group_dst=None) -> P2PWork:
    """Start sending `tensor` to rank `dst`; keep it unchanged until the Work completes."""
    g = resolve_group(group)
    peer = group_peer(g, dst, group_dst, "dst")
    buf = as_buffer(tensor, "tensor")
    tag = _check_tag(tag)
    transport = g.runtime.transport
    handle = transport.isend(g.global_rank(peer), _bytes(buf.flat), Key(KIND_P2P, g.group_id, tag, 0))
    return P2PWork("isend to", g.global_rank(peer), tag, transport, handle, g)


def irecv(tensor, src=None, group=None, tag=0, group_src=None) -> P2PWork:
    """Start receiving into `tensor` from rank `src` (None: from any rank)."""
    g = resolve_group(group)
    peer = None if src is None and group_src is None else group_peer(g, src, group_src, "src")
    buf = as_buffer(tensor, "tensor", writable=True)
    tag = _check_tag(tag)
    transport = g.runtime.transport
    handle = transport.irecv(
        None if peer is None else g.global_rank(peer), _bytes(buf.flat), Key(KIND_P2P, g.group_id, tag, 0)
    )
    source = None if peer is None else g.global_rank(peer)
    return P2PWork("irecv from", source, tag, transport, handle, g, buf.finish if buf.writeback else None)


def send(tensor, dst=None, group=None, tag=0, group_dst=None) -> None:
    """Send `tensor` to rank `dst` and return once it is handed to the transport."""
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None) -> int:
    """Receive into `tensor` from `src` (None: any rank); returns the sender's global rank."""
    work = irecv(tensor, src, group, tag, group_src)
    work.wait()
    return work.source_rank()


class P2POp:
    """One operation of batch_isend_irecv: op is isend or irecv."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None) -> None:
        if op not in (isend, irecv):
            raise ValueError(f"op must be meshcomm.isend or meshcomm.irecv, got {op!r}")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = op, tensor, peer, group, tag, group_peer

    def __repr__(self) -> str:
        return f"P2POp({self.op.__name__}, peer={self.peer}, tag={self.tag})"


def batch_isend_irecv(p2p_op_list) -> list[P2PWork]:
    """Post every operation of the list at once; returns their Works in the same order."""
    if not isinstance(p2p_op_list, (list, tuple)) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise TypeError("p2p_op_list must be a list of P2POp")
    works = []
    for p in p2p_op_list:
        if p.op is isend:
            works.append(isend(p.tensor, p.peer, p.group, p.tag, p.group_peer))
        else:
            works.append(irecv(p.tensor, p.peer, p.group, p.tag, p.group_peer))
    return works
