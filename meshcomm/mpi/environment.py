"""Process-wide MPI calls: init and finalize, versions, names, clocks, memory for buffered sends."""

from __future__ import annotations

import socket
import time

from meshcomm.mpi import constants as C
from meshcomm.mpi import world

_attached: list = []


def Init() -> None:
    """Join the job now rather than on first use."""
    world.runtime()


def Init_thread(required: int = C.THREAD_MULTIPLE) -> int:
    world.runtime()
    return Query_thread()


def Finalize() -> None:
    world.finalize()


def Is_initialized() -> bool:
    return world.is_initialized()


def Is_finalized() -> bool:
    return world.is_finalized()


def Query_thread() -> int:
    """Calls from several threads must not overlap on one communicator (waits may)."""
    return C.THREAD_SERIALIZED


def Is_thread_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def Get_processor_name() -> str:
    return socket.gethostname()


def Get_version() -> tuple[int, int]:
    return C.VERSION, C.SUBVERSION


def Get_library_version() -> str:
    from meshcomm._version import __version__

    return f"meshcomm {__version__} (MPI face)"


def get_vendor() -> tuple[str, tuple[int, int, int]]:
    from meshcomm._version import __version__

    return "meshcomm", tuple(int(part) for part in __version__.split(".")[:3])


_START = time.perf_counter()


def Wtime() -> float:
    return time.perf_counter() - _START


def Wtick() -> float:
    return time.get_clock_info("perf_counter").resolution


def Alloc_mem(size: int, info=None) -> memoryview:
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    return memoryview(bytearray(size))


def Free_mem(mem) -> None:
    """Memory from Alloc_mem is garbage collected; nothing to do."""


def Attach_buffer(buf) -> None:
    """Buffered sends go out eagerly and need no buffer; it is kept only to hand back on detach."""
    _attached.append(buf)


def Detach_buffer():
    return _attached.pop() if _attached else None
