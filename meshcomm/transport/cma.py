"""Reading and writing another process's memory directly (Linux cross-memory attach).

`process_vm_readv` copies bytes from a peer's address space into ours in one
system call (`process_vm_writev` the other way): a large message between ranks
of one host then costs one copy (the receiver reading the sender's buffer)
instead of two (into a shared ring, then out of it). The kernel allows it
between processes of the same user unless ptrace is restricted (Yama's
ptrace_scope ≥ 1 forbids it between siblings), which is why every pair of
ranks probes it before use.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

import numpy as np

from meshcomm import native


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def _load(name: str):
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_ssize_t
    function.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong,
                         ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.c_ulong]
    return function


_readv = _load("process_vm_readv")
_writev = _load("process_vm_writev")


def available() -> bool:
    return _readv is not None and _writev is not None


def expected_between_siblings(ptrace_scope_path: str = "/proc/sys/kernel/yama/ptrace_scope") -> bool:
    """Whether ranks started side by side on this host should reach each other's memory: the calls exist and
    Yama, if present, leaves ptrace unrestricted. A prediction for tools that run no job (the simulator, the
    model's report); a job's ranks probe each other instead."""
    if not available():
        return False
    try:
        with open(ptrace_scope_path, encoding="ascii") as f:
            return f.read().strip() == "0"
    except OSError:
        return True  # no Yama: same-user processes may


def address_of(view: memoryview) -> int:
    """The address of a contiguous buffer's first byte (read-only buffers too)."""
    if not view.nbytes:
        return 0
    if not view.readonly:
        # Every post and read by reference asks, and ctypes answers for a writable buffer faster than numpy
        # (benchmarks/results/design-figures-2026-11-25.md).
        return ctypes.addressof(ctypes.c_char.from_buffer(view))
    return np.frombuffer(view, dtype=np.uint8).ctypes.data


def read(pid: int, address: int, target: memoryview) -> None:
    """Copy `target.nbytes` bytes at `address` in process `pid` into `target`; OSError if the kernel refuses."""
    if native.core is not None:
        native.core.vm_read(pid, address, target)
        return
    _move(_readv, "process_vm_readv from", pid, address, target)


def write(pid: int, address: int, source: memoryview) -> None:
    """Copy `source` to `address` in process `pid`; OSError if the kernel refuses."""
    if native.core is not None:
        native.core.vm_write(pid, address, source)
        return
    _move(_writev, "process_vm_writev to", pid, address, source)


def _move(call, what: str, pid: int, address: int, local_bytes: memoryview) -> None:
    total = local_bytes.nbytes
    if total == 0:
        return
    base = address_of(local_bytes)
    done = 0
    while done < total:
        local = _Iovec(base + done, total - done)
        remote = _Iovec(address + done, total - done)
        got = call(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got < 0:
            code = ctypes.get_errno()
            if code == errno.EINTR:
                continue
            raise OSError(code, f"{what} process {pid}: {os.strerror(code)}")
        if got == 0:
            raise OSError(errno.EFAULT, f"{what} process {pid} moved nothing at {address + done:#x}")
        done += got


def probe(pid: int, address: int, expected: bytes) -> bool:
    """Whether reading `len(expected)` bytes at `address` in `pid` gives `expected`, and writing them back
    (the same bytes, so nothing changes) works too."""
    if not available():
        return False
    got = bytearray(len(expected))
    try:
        read(pid, address, memoryview(got))
        if bytes(got) != expected:
            return False
        write(pid, address, memoryview(got))
    except OSError:
        return False
    return True
