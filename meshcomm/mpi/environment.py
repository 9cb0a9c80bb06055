"""Process-wide MPI calls: init and finalize, versions, names, clocks, memory for buffered sends."""

from __future__ import annotations

import socket
import time

from meshcomm.mpi import constants as C
from meshcomm.mpi import world



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


def Get_abi_version() -> tuple[int, int]:
    """(-1, -1): meshcomm.MPI is Python, not an MPI library with the standard C ABI (MPI 5.0)."""
    return -1, -1


def Get_abi_info():
    """The sizes of the address, count and offset integers, as MPI 5.0's ABI info names them."""
    from meshcomm.mpi.datatypes import PREDEFINED
    from meshcomm.mpi.info import Info

    return Info.Create({f"mpi_{name.lower()}_size": str(PREDEFINED[name].Get_size())
                        for name in ("AINT", "COUNT", "OFFSET")})


def Get_abi_fortran_info():
    """INFO_NULL: there is no Fortran side to describe."""
    from meshcomm.mpi.info import INFO_NULL

    return INFO_NULL


def get_vendor() -> tuple[str, tuple[int, int, int]]:
    from meshcomm._version import __version__

    return "meshcomm", tuple(int(part) for part in __version__.split(".")[:3])


_START = time.perf_counter()


def Wtime() -> float:
    return time.perf_counter() - _START


def Wtick() -> float:
    return time.get_clock_info("perf_counter").resolution


def Alloc_mem(size: int, info=None):
    """Fresh memory as an MPI.buffer (ValueError for a negative size)."""
    from meshcomm.mpi.buffer import buffer

    return buffer.allocate(size)


def Free_mem(mem) -> None:
    """Release a buffer from Alloc_mem; its bytes go when nothing else holds them."""
    from meshcomm.mpi.buffer import buffer

    if not isinstance(mem, buffer):
        raise TypeError(f"Free_mem takes the MPI.buffer Alloc_mem gave, got {type(mem).__name__}")
    mem.release()


class _BufferAutomatic:
    """BUFFER_AUTOMATIC: attached in place of memory, it asks MPI to buffer as it likes."""

    def __repr__(self) -> str:
        return "MPI.BUFFER_AUTOMATIC"

    def __reduce__(self) -> str:
        return "BUFFER_AUTOMATIC"


BUFFER_AUTOMATIC = _BufferAutomatic()


class AttachedBuffers:
    """Buffers given to Attach_buffer (the process's, or a session's).

    Buffered sends go out eagerly and need no buffer, so each is kept only
    to hand back on detach, and a flush has nothing to wait for.
    """

    def __init__(self) -> None:
        self._stack: list = []

    def attach(self, buf) -> None:
        from meshcomm.mpi.buffer import buffer

        if buf is None:
            raise TypeError("Attach_buffer needs a writable buffer or MPI.BUFFER_AUTOMATIC, got None")
        attached = buf if isinstance(buf, (buffer, _BufferAutomatic)) else buffer(buf)
        if attached is not BUFFER_AUTOMATIC and attached.readonly:
            raise BufferError(f"Attach_buffer needs writable memory; this {type(buf).__name__} is read-only")
        self._stack.append(attached)

    def detach(self):
        """The buffer attached last (None when none is)."""
        return self._stack.pop() if self._stack else None

    def flush(self) -> None:
        """Nothing waits in the buffer: buffered sends have already left."""

    def iflush(self):
        from meshcomm.mpi.request import Request

        return Request.completed()


_process_buffers = AttachedBuffers()
Attach_buffer = _process_buffers.attach
Detach_buffer = _process_buffers.detach
Flush_buffer = _process_buffers.flush
Iflush_buffer = _process_buffers.iflush


def Pcontrol(level: int) -> None:
    """Profiling control: meshcomm has no profiling layer to switch (its tracing is MESHCOMM_TRACE), so a no-op."""
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"level must be an int, got {type(level).__name__}")


def Get_hw_resource_info():
    """Hardware hints (MPI 4.1): meshcomm gathers none, so an empty Info to Free when done."""
    from meshcomm.mpi.info import Info

    return Info.Create()
