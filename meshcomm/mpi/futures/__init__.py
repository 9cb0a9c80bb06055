"""mpi4py.futures' MPIPoolExecutor: a concurrent.futures executor whose workers are spawned MPI processes.

See pool.py for how tasks reach the workers, and worker.py for their side.
"""

from meshcomm.mpi.futures.pool import MPIPoolExecutor

__all__ = ["MPIPoolExecutor"]
