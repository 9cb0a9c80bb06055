"""mpi4py.util.pool is meshcomm.mpi.util.pool (the same module object)."""

import sys

import meshcomm.mpi.util.pool

sys.modules[__name__] = meshcomm.mpi.util.pool
