"""`from meshcomm import MPI`: the mpi4py-style face (see meshcomm/mpi/); imported only when asked for."""

from meshcomm.mpi import *  # noqa: F403
from meshcomm.mpi import __all__  # noqa: F401
from meshcomm.mpi import _typealign, _typecode  # noqa: F401 (private, as in mpi4py; mpi4py.util.dtlib reads them)
