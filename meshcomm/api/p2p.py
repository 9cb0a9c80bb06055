"""Point-to-point: send/recv/isend/irecv and batch_isend_irecv, torch.distributed style.

A receive with no source takes the first matching message from any rank and
returns who sent it. Messages with the same tag between two ranks arrive in
the order they were sent. A blocking send or receive of a numpy array or CPU
torch tensor to (from) one rank that ran once takes its group's lane the next time
(group/lanes.py): the same bytes, in one compiled step.
"""

from __future__ import annotations

import numpy as np

from meshcomm.api.state import group_peer, lanes_of, resolve_group
from meshcomm.api.tensors import as_buffer, tensor_array
from meshcomm.group.work import MessageWork
from meshcomm.transport.buffers import byte_view as _bytes


def _check_tag(tag) -> int:
    if isinstance(tag, bool) or not isinstance(tag, int):
        raise TypeError(f"tag must be an int, got {type(tag).__name__}")
    if not -(2**63) <= tag < 2**63:
        raise ValueError(f"tag must fit in 64 bits, got {tag}")
    return tag


def isend(tensor, dst=None, group=None, tag=0, group_dst=None) -> MessageWork | None:
    """Start sending `tensor` to rank `dst`; keep it unchanged until the Work completes."""
    g = resolve_group(group, op="isend")
    if g is None:
        return None
    peer = group_peer(g, dst, group_dst, "dst")
    buf = as_buffer(tensor, "tensor")
    return g.isend(peer, _bytes(buf.flat), _check_tag(tag))


def irecv(tensor, src=None, group=None, tag=0, group_src=None) -> MessageWork | None:
    """Start receiving into `tensor` from rank `src` (None: from any rank); the Work's source_rank() is the
    sender's global rank."""
    g = resolve_group(group, op="irecv")
    if g is None:
        return None
    peer = None if src is None and group_src is None else group_peer(g, src, group_src, "src")
    buf = as_buffer(tensor, "tensor", writable=True)
    return g.irecv(peer, _bytes(buf.flat), _check_tag(tag), buf.finish if buf.writeback else None)


def send(tensor, dst=None, group=None, tag=0, group_dst=None) -> None:
    """Send `tensor` to rank `dst` and return once it is handed to the transport."""
    key = None
    if (type(dst) is int and type(tag) is int and group_dst is None
            and (array := tensor if type(tensor) is np.ndarray else tensor_array(tensor)) is not None):
        key = ("send", dst, tag, array.dtype, array.shape)
        lane = lanes_of(group).get(key)
        if lane is not None and lane.run(array) is not None:
            return
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()
        if key is not None:
            _open_lane(group, key, True, dst, tag, array.nbytes)


def recv(tensor, src=None, group=None, tag=0, group_src=None) -> int:
    """Receive into `tensor` from `src` (None: any rank); returns the sender's global rank (-1 outside `group`,
    as in torch)."""
    key = None
    if (type(src) is int and type(tag) is int and group_src is None
            and (array := tensor if type(tensor) is np.ndarray else tensor_array(tensor)) is not None):
        key = ("recv", src, tag, array.dtype, array.shape)
        lane = lanes_of(group).get(key)
        if lane is not None and (source := lane.run(array)) is not None:
            return source
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    work.wait()
    if key is not None:
        _open_lane(group, key, False, src, tag, array.nbytes)
    return work.source_rank()


def _open_lane(group, key: tuple, sending: bool, rank: int, tag: int, nbytes: int) -> None:
    """After a blocking send or receive of an array to (from) one rank: the group's lane for its repeats, which
    check nothing the key does not fix (group/lanes.py)."""
    g = resolve_group(group)
    g.open_message_lane(key, sending, group_peer(g, rank, None, "dst" if sending else "src"), tag, nbytes)


class P2POp:
    """One operation of batch_isend_irecv: op is isend or irecv."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None) -> None:
        if op not in (isend, irecv):
            raise ValueError(f"op must be meshcomm.isend or meshcomm.irecv, got {op!r}")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = op, tensor, peer, group, tag, group_peer

    def __repr__(self) -> str:
        return f"P2POp({self.op.__name__}, peer={self.peer}, tag={self.tag})"


def batch_isend_irecv(p2p_op_list) -> list[MessageWork]:
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
