"""Run by test_environment_handles.py under `meshcomm run -n 2`: ERRORS_ARE_FATAL ends the whole job."""

from meshcomm import MPI

world = MPI.COMM_WORLD
world.Barrier()
if world.Get_rank() == 0:
    world.Set_errhandler(MPI.ERRORS_ARE_FATAL)
    world.Call_errhandler(MPI.ERR_OTHER)
    print("rank 0 went on after a fatal error", flush=True)
else:
    try:
        world.Barrier()  # never met by rank 0: the abort must end this wait
    except Exception as error:
        print(f"rank 1 stopped: {type(error).__name__}", flush=True)
        raise
