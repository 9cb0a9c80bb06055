"""mpi4py.futures is meshcomm.mpi.futures (the same module object)."""

import sys

import meshcomm.mpi.futures

sys.modules[__name__] = meshcomm.mpi.futures
