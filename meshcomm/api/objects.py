"""Object collectives: picklable Python objects moved through the buffer collectives.

Objects are pickled with protocol 5 and their large buffers (numpy arrays)
travel out of band inside the same frame, so they are not copied into the
pickle stream. Pickles are only ever read from peers that proved they hold
the job token.
"""

from __future__ import annotations

import pickle
import struct

import numpy as np

from meshcomm.api import collectives as coll
from meshcomm.api import p2p
from meshcomm.api.state import group_peer, resolve_group

_COUNT = struct.Struct("!Q")


def dumps(obj) -> np.ndarray:
    """One uint8 frame: buffer count, lengths, pickle stream, then out-of-band buffers."""
    buffers: list[pickle.PickleBuffer] = []
    stream = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    head = _COUNT.pack(len(raws)) + b"".join(_COUNT.pack(r.nbytes) for r in [memoryview(stream), *raws])
    frame = np.empty(len(head) + len(stream) + sum(r.nbytes for r in raws), dtype=np.uint8)
    offset = 0
    for part in (head, stream, *raws):
        view = np.frombuffer(part, dtype=np.uint8)
        frame[offset : offset + view.size] = view
        offset += view.size
    return frame


def loads(frame: np.ndarray):
    data = memoryview(frame)
    (nbufs,) = _COUNT.unpack_from(data, 0)
    lengths = [_COUNT.unpack_from(data, 8 + 8 * i)[0] for i in range(nbufs + 1)]
    offset = 8 + 8 * (nbufs + 1)
    parts = []
    for length in lengths:
        parts.append(data[offset : offset + length])
        offset += length
    return pickle.loads(parts[0], buffers=parts[1:])


def _lengths(g, frame_size: int, timeout=None) -> list[int]:
    mine = np.array([frame_size], dtype=np.int64)
    every = np.empty(g.size, dtype=np.int64)
    coll.all_gather_into_tensor(every, mine, group=g, timeout=timeout)
    return [int(x) for x in every]


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None) -> None:
    """Replace object_list's entries on every rank by those of rank `src`."""
    g = resolve_group(group, op="broadcast_object_list")
    if g is None:
        return None
    root = group_peer(g, src, group_src, "src")
    if not isinstance(object_list, list):
        raise TypeError(f"object_list must be a list, got {type(object_list).__name__}")
    frame = dumps(object_list) if g.rank == root else np.empty(0, dtype=np.uint8)
    size = np.array([frame.size], dtype=np.int64)
    coll.broadcast(size, group_src=root, group=g)
    if g.rank != root:
        frame = np.empty(int(size[0]), dtype=np.uint8)
    coll.broadcast(frame, group_src=root, group=g)
    if g.rank != root:
        received = loads(frame)
        if len(received) != len(object_list):
            raise ValueError(
                f"object_list has {len(object_list)} entries here but {len(received)} on the source rank"
            )
        object_list[:] = received


def all_gather_object(object_list, obj, group=None) -> None:
    """object_list[r] becomes rank r's `obj`, on every rank."""
    g = resolve_group(group, op="all_gather_object")
    if g is None:
        return None
    coll._check_list(object_list, "object_list", g.size)
    frame = dumps(obj)
    lengths = _lengths(g, frame.size)
    gathered = [np.empty(n, dtype=np.uint8) for n in lengths]
    coll.all_gather(gathered, frame, group=g)
    for r, piece in enumerate(gathered):
        object_list[r] = loads(piece)


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None) -> None:
    """object_gather_list[r] on rank `dst` becomes rank r's `obj`."""
    g = resolve_group(group, op="gather_object")
    if g is None:
        return None
    root = group_peer(g, 0 if dst is None and group_dst is None else dst, group_dst, "dst")
    if g.rank == root:
        coll._check_list(object_gather_list, "object_gather_list", g.size)
    elif object_gather_list:
        raise ValueError(f"object_gather_list must be given on the destination rank only (dst={g.ranks[root]})")
    frame = dumps(obj)
    lengths = _lengths(g, frame.size)
    widest = max(lengths)
    padded = np.zeros(widest, dtype=np.uint8)
    padded[: frame.size] = frame
    gathered = [np.empty(widest, dtype=np.uint8) for _ in range(g.size)] if g.rank == root else None
    coll.gather(padded, gathered, group_dst=root, group=g)
    if g.rank == root:
        for r, piece in enumerate(gathered):
            object_gather_list[r] = loads(piece[: lengths[r]])


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None) -> None:
    """scatter_object_output_list[0] on rank r becomes scatter_object_input_list[r] of rank `src`."""
    g = resolve_group(group, op="scatter_object_list")
    if g is None:
        return None
    root = group_peer(g, 0 if src is None and group_src is None else src, group_src, "src")
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("scatter_object_output_list must be a list with at least one element")
    if g.rank == root:
        frames = [dumps(o) for o in coll._check_list(scatter_object_input_list, "scatter_object_input_list", g.size)]
        sizes = np.array([f.size for f in frames], dtype=np.int64)
    else:
        sizes = np.empty(g.size, dtype=np.int64)
    coll.broadcast(sizes, group_src=root, group=g)
    widest = int(sizes.max()) if sizes.size else 0
    padded = None
    if g.rank == root:
        padded = [np.zeros(widest, dtype=np.uint8) for _ in frames]
        for pad, frame in zip(padded, frames):
            pad[: frame.size] = frame
    out = np.empty(widest, dtype=np.uint8)
    coll.scatter(out, padded, group_src=root, group=g)
    scatter_object_output_list[0] = loads(out[: int(sizes[g.rank])])


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None) -> None:
    """Send a list of objects to rank `dst` (pair with recv_object_list)."""
    if not isinstance(object_list, list):
        raise TypeError(f"object_list must be a list, got {type(object_list).__name__}")
    if resolve_group(group, op="send_object_list") is None:
        return None
    frame = dumps(object_list)
    p2p.send(np.array([frame.size], dtype=np.int64), dst, group, tag=0, group_dst=group_dst)
    p2p.send(frame, dst, group, tag=0, group_dst=group_dst)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None) -> int:
    """Fill object_list from what rank `src` (None: any) sent; returns the sender's global rank (-1 outside
    `group`, as in torch)."""
    if not isinstance(object_list, list):
        raise TypeError(f"object_list must be a list, got {type(object_list).__name__}")
    if resolve_group(group, op="recv_object_list") is None:
        return -1
    size = np.empty(1, dtype=np.int64)
    sender = p2p.recv(size, src, group, tag=0, group_src=group_src)
    frame = np.empty(int(size[0]), dtype=np.uint8)
    p2p.recv(frame, sender, group, tag=0)
    received = loads(frame)
    object_list[: len(received)] = received
    return sender
