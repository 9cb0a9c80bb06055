"""Joining the job on first use, and leaving it at exit: MPI_Init and MPI_Finalize, implicitly.

COMM_WORLD exists at import; the runtime starts when a communicator is
first used. A process started without any launcher (plain `python prog.py`)
is a job of one, as an MPI singleton is.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

from meshcomm.api import state
from meshcomm.errors import AbortedError, PeerLostError
from meshcomm.group.group import Group
from meshcomm.group.runtime import Runtime
from meshcomm.rendezvous.environment import LAUNCHERS

SELF_GROUP_ID = 0xFFFFFFFF  # COMM_SELF's messages only ever go to this process
_lock = threading.Lock()
_self_group: Group | None = None
_finalized = False
_finalizers: list = []  # what other modules close at Finalize, before the last barrier (dynamic.py's joins)


def launched() -> bool:
    """True when some launcher (meshcomm run, mpiexec, torchrun, Slurm) set this process's rank."""
    return any(os.environ.get(launcher.rank, "").strip() for launcher in LAUNCHERS)


def runtime() -> Runtime:
    """The process's runtime, starting it (and registering the exit barrier) on first call."""
    with _lock:
        if not state.is_initialized():
            if _finalized:
                from meshcomm.mpi import exceptions as err

                raise err.Exception(err.ERR_OTHER, "MPI was finalized; communicators can no longer be used")
            from meshcomm.api.init import init_process_group

            if launched():
                init_process_group()
            else:
                directory = tempfile.mkdtemp(prefix="meshcomm-singleton-")
                atexit.register(shutil.rmtree, directory, True)
                init_process_group(init_method=f"file://{directory}/store", rank=0, world_size=1)
            atexit.register(finalize)
        return state.runtime()


def self_group() -> Group:
    global _self_group
    rt = runtime()
    with _lock:
        if _self_group is None or _self_group.runtime is not rt:
            _self_group = Group(rt, (rt.rank,), SELF_GROUP_ID, "COMM_SELF", rt.timeout)
        return _self_group


def at_finalize(close) -> None:
    _finalizers.append(close)


def is_initialized() -> bool:
    return state.is_initialized()


def is_finalized() -> bool:
    return _finalized


def finalize() -> None:
    """Wait for every rank (so messages still in flight are delivered), then close the runtime; after a lost
    rank, survivors close without the wait."""
    global _finalized
    with _lock:
        if _finalized or not state.is_initialized():
            _finalized = True
            return
        _finalized = True
        from meshcomm.api.collectives import barrier
        from meshcomm.api.init import destroy_process_group

        try:
            for close in _finalizers:
                close()
            barrier()
        except (PeerLostError, AbortedError):
            pass  # a rank was lost (ULFM's survivors finalize too): nothing more can be delivered to it
        finally:
            destroy_process_group()
