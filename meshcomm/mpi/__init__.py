"""meshcomm's MPI face: `from meshcomm import MPI` speaks mpi4py's API on meshcomm's groups.

Lowercase methods move pickled Python objects, Capitalized ones move buffers.
COMM_WORLD exists at import and joins the job on first use.
"""

from __future__ import annotations

from meshcomm.mpi import collectives as _collectives  # noqa: F401 (adds the collectives to Intracomm)
from meshcomm.mpi import constants as _constants
from meshcomm.mpi import world as _world
from meshcomm.mpi.comm import Comm, Intracomm, Pickle, pickle_codec as pickle
from meshcomm.mpi.constants import *  # noqa: F403
from meshcomm.mpi.datatypes import DATATYPE_NULL, PREDEFINED as _DATATYPES, Datatype
from meshcomm.mpi.environment import (
    Alloc_mem, Attach_buffer, Detach_buffer, Finalize, Free_mem, Get_library_version, Get_processor_name,
    Get_version, Init, Init_thread, Is_finalized, Is_initialized, Is_thread_main, Query_thread, Wtick, Wtime,
    get_vendor,
)
from meshcomm.mpi.exceptions import ERROR_NAMES as _ERROR_NAMES, Exception, Get_error_class, Get_error_string
from meshcomm.mpi.messages import BOTTOM, IN_PLACE
from meshcomm.mpi.ops import (
    BAND, BOR, BXOR, LAND, LOR, LXOR, MAX, MAXLOC, MIN, MINLOC, NO_OP, OP_NULL, PROD, REPLACE, SUM, Op,
)
from meshcomm.mpi.request import REQUEST_NULL, Prequest, Request
from meshcomm.mpi.status import Status

globals().update(_DATATYPES)
globals().update({name: code for code, name in _ERROR_NAMES.items()})

COMM_NULL = Intracomm()
COMM_WORLD = Intracomm._lazy(lambda: _world.runtime().world, "COMM_WORLD")
COMM_SELF = Intracomm._lazy(_world.self_group, "COMM_SELF")

__all__ = sorted(
    [
        "Alloc_mem", "Attach_buffer", "BOTTOM", "COMM_NULL", "COMM_SELF", "COMM_WORLD", "Comm", "DATATYPE_NULL",
        "Datatype", "Detach_buffer", "Exception", "Finalize", "Free_mem", "Get_error_class", "Get_error_string",
        "Get_library_version", "Get_processor_name", "Get_version", "IN_PLACE", "Init", "Init_thread",
        "Intracomm", "Is_finalized", "Is_initialized", "Is_thread_main", "Op", "Pickle", "Prequest", "Query_thread",
        "REQUEST_NULL", "Request", "Status", "Wtick", "Wtime", "get_vendor", "pickle",
        "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "MAX", "MAXLOC", "MIN", "MINLOC", "NO_OP", "OP_NULL",
        "PROD", "REPLACE", "SUM",
    ]
    + [name for name in vars(_constants) if name.isupper()]
    + list(_DATATYPES)
    + list(_ERROR_NAMES.values())
)
