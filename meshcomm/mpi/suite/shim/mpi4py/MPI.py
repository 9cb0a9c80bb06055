"""mpi4py.MPI for the test suite: everything is meshcomm.MPI."""

import sys

from meshcomm import MPI as _MPI

sys.modules[__name__] = _MPI
