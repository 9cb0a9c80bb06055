"""mpi4py.util.pkl5 is meshcomm.mpi.util.pkl5 (the same module object, so the tests' patches reach it)."""

import sys

import meshcomm.mpi.util.pkl5

sys.modules[__name__] = meshcomm.mpi.util.pkl5
