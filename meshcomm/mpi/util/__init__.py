"""mpi4py.util's modules on meshcomm's MPI face."""
