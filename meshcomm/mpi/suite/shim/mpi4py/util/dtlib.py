"""mpi4py.util.dtlib is meshcomm.mpi.util.dtlib (the same module object, so the tests' patches reach it)."""

import sys

import meshcomm.mpi.util.dtlib

sys.modules[__name__] = meshcomm.mpi.util.dtlib
