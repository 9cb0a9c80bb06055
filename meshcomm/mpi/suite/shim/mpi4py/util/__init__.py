"""Stand-in mpi4py.util: each module is meshcomm's own (meshcomm/mpi/util), under mpi4py's name."""
