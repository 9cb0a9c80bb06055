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
from meshcomm.mpi.datatypes import typealign as _typealign, typecode as _typecode  # noqa: F401 (private, as in mpi4py)
from meshcomm.mpi import derived as _derived  # noqa: F401 (adds the Create_* constructors to Datatype)
from meshcomm.mpi import alltoallw as _alltoallw  # noqa: F401 (adds Alltoallw to Intracomm)
from meshcomm.mpi.packing import Aint_add, Aint_diff, Get_address
from meshcomm.mpi.environment import (
    BUFFER_AUTOMATIC, Alloc_mem, Attach_buffer, Detach_buffer, Finalize, Flush_buffer, Free_mem, Get_library_version, Iflush_buffer, Get_processor_name,
    Get_version, Init, Init_thread, Is_finalized, Is_initialized, Is_thread_main, Query_thread, Wtick, Wtime,
    get_vendor,
)
from meshcomm.mpi.exceptions import ERROR_NAMES as _ERROR_NAMES, Exception, Get_error_class, Get_error_string
from meshcomm.mpi.messages import BOTTOM, IN_PLACE
from meshcomm.mpi.ops import (
    BAND, BOR, BXOR, LAND, LOR, LXOR, MAX, MAXLOC, MIN, MINLOC, NO_OP, OP_NULL, PROD, REPLACE, SUM, Op,
)
from meshcomm.mpi.request import REQUEST_NULL, Prequest, Request
from meshcomm.mpi.grequest import Grequest
from meshcomm.mpi.matched import MESSAGE_NO_PROC, MESSAGE_NULL, Message
from meshcomm.mpi import partitioned as _partitioned  # noqa: F401 (adds Psend_init, Precv_init, Pready, ...)
from meshcomm.mpi.status import F_ERROR, F_SOURCE, F_STATUS_SIZE, F_TAG, Status
from meshcomm.mpi.intercomm import Intercomm
from meshcomm.mpi import intercomm_collectives as _intercomm_collectives  # noqa: F401 (adds Intercomm's collectives)
from meshcomm.mpi.groups import GROUP_EMPTY, GROUP_NULL, Group
from meshcomm.mpi import neighbors as _neighbors  # noqa: F401 (adds the neighbourhood collectives to Topocomm)
from meshcomm.mpi import comm_handles as _comm_handles  # noqa: F401 (adds toint, fromint, ... to Comm)
from meshcomm.mpi.topology import (
    CART, DIST_GRAPH, GRAPH, UNWEIGHTED, WEIGHTS_EMPTY, Cartcomm, Distgraphcomm, Graphcomm, Topocomm,
    compute_dims as Compute_dims,
)
from meshcomm.mpi.buffer import buffer
from meshcomm.mpi.split_type import (
    COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED, COMM_TYPE_RESOURCE_GUIDED, COMM_TYPE_SHARED,
)
from meshcomm.mpi import window as _window
from meshcomm.mpi.window import *  # noqa: F403 (MPI.Win, WIN_NULL and the one-sided constants)
from meshcomm.mpi import ulfm as _ulfm  # noqa: F401 (adds Revoke, Agree, Shrink, ... to Comm)
from meshcomm.mpi import lifecycle as _lifecycle  # noqa: F401 (attributes, error handlers, info on Comm, Datatype, Win)
from meshcomm.mpi.attributes import APPNUM, HOST, IO, LASTUSEDCODE, TAG_UB, UNIVERSE_SIZE, WTIME_IS_GLOBAL
from meshcomm.mpi.errhandler import ERRHANDLER_NULL, ERRORS_ABORT, ERRORS_ARE_FATAL, ERRORS_RETURN, Errhandler
from meshcomm.mpi.exceptions import (
    Add_error_class, Add_error_code, Add_error_string, Remove_error_class, Remove_error_code, Remove_error_string,
)
from meshcomm.mpi.info import INFO_ENV, INFO_NULL, MAX_INFO_KEY, MAX_INFO_VAL, Info
from meshcomm.mpi.environment import Get_abi_fortran_info, Get_abi_info, Get_abi_version, Get_hw_resource_info, Pcontrol
from meshcomm.mpi import io as _io
from meshcomm.mpi.io import *  # noqa: F403 (File, FILE_NULL, the access modes and whence values, Register_datarep)
from meshcomm.mpi.session import SESSION_NULL, Session
from meshcomm.mpi.dynamic import (
    MAX_PORT_NAME, close_port as Close_port, lookup_name as Lookup_name, open_port as Open_port,
    publish_name as Publish_name, unpublish_name as Unpublish_name,
)
from meshcomm.mpi import spawn as _spawn

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
        "Intercomm", "Intracomm", "Is_finalized", "Is_initialized", "Is_thread_main", "Op", "Pickle", "Prequest", "Query_thread",
        "REQUEST_NULL", "Request", "Grequest", "MESSAGE_NO_PROC", "MESSAGE_NULL", "Message", "Status", "Wtick", "Wtime", "get_vendor", "pickle",
        "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "MAX", "MAXLOC", "MIN", "MINLOC", "NO_OP", "OP_NULL",
        "PROD", "REPLACE", "SUM",
        "CART", "Cartcomm", "Compute_dims", "DIST_GRAPH", "Distgraphcomm", "GRAPH", "GROUP_EMPTY", "GROUP_NULL",
        "Graphcomm", "Group", "Topocomm", "UNWEIGHTED", "WEIGHTS_EMPTY",
        "Aint_add", "Aint_diff", "Get_address",
    ]
    + [name for name in vars(_constants) if name.isupper()]
    + list(_DATATYPES)
    + ["buffer", "COMM_TYPE_HW_GUIDED", "COMM_TYPE_HW_UNGUIDED", "COMM_TYPE_RESOURCE_GUIDED", "COMM_TYPE_SHARED"]
    + list(_window.__all__)
    + list(_ERROR_NAMES.values())
)
# The environment's handles and errors (attributes.py, errhandler.py, exceptions.py, info.py).
__all__ = sorted(set(__all__) | {
    "APPNUM", "HOST", "IO", "LASTUSEDCODE", "TAG_UB", "UNIVERSE_SIZE", "WTIME_IS_GLOBAL",
    "ERRHANDLER_NULL", "ERRORS_ABORT", "ERRORS_ARE_FATAL", "ERRORS_RETURN", "Errhandler",
    "Add_error_class", "Add_error_code", "Add_error_string", "Remove_error_class", "Remove_error_code",
    "Remove_error_string", "INFO_ENV", "INFO_NULL", "MAX_INFO_KEY", "MAX_INFO_VAL", "Info",
    "Get_hw_resource_info", "Pcontrol", "Get_abi_version", "Get_abi_info", "Get_abi_fortran_info", "Flush_buffer", "Iflush_buffer", "BUFFER_AUTOMATIC", "F_ERROR", "F_SOURCE", "F_STATUS_SIZE", "F_TAG", "SESSION_NULL", "Session",
    "MAX_PORT_NAME", "Close_port", "Lookup_name", "Open_port", "Publish_name", "Unpublish_name",
} | set(_io.__all__))

_spawn.connect_to_parent()  # a spawned process joins its parent's Spawn, as MPI_Init does
