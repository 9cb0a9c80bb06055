"""Running mpi4py's own test suite against meshcomm.MPI (or against real mpi4py, for comparison)."""
