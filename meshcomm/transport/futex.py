"""Linux futex wait/wake on a 32-bit word in shared memory, through ctypes.

A futex lets a rank sleep until another process changes a word it shares,
without a file descriptor per peer. The wait only sleeps if the word still
holds the value the caller last saw, so a wake that lands between the
caller's last check and its sleep is never lost.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

from meshcomm import native

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
_FUTEX_WAIT = 0  # not FUTEX_PRIVATE_FLAG: the word is shared between processes
_FUTEX_WAKE = 1
_WAKE_ALL = 0x7FFFFFFF


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(None, use_errno=True) if _SYS_FUTEX is not None else None


def available() -> bool:
    return _libc is not None and platform.system() == "Linux"


def wait(address: int, expected: int, timeout: float) -> None:
    """Sleep while the word at `address` equals `expected`, at most `timeout` seconds.

    Returns on a wake, a change, a signal or the timeout; callers recheck their
    condition either way. (Both paths release the GIL for the call.)
    """
    if native.core is not None:
        native.core.futex_wait(address, expected, max(timeout, 0.0))
        return
    seconds = max(timeout, 0.0)
    spec = _Timespec(int(seconds), int((seconds - int(seconds)) * 1e9))
    if _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(address), _FUTEX_WAIT, ctypes.c_uint32(expected),
                     ctypes.byref(spec), None, 0) == -1:
        code = ctypes.get_errno()
        if code not in (errno.EAGAIN, errno.ETIMEDOUT, errno.EINTR):
            raise OSError(code, f"futex wait failed: {os.strerror(code)}")


def wake(address: int) -> None:
    """Wake every process sleeping on the word at `address`."""
    if native.core is not None:
        native.core.futex_wake(address)
        return
    _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(address), _FUTEX_WAKE, _WAKE_ALL, None, None, 0)
