"""mpi4py.util.sync is meshcomm.mpi.util.sync (the same module object)."""

import sys

import meshcomm.mpi.util.sync

sys.modules[__name__] = meshcomm.mpi.util.sync
