"""Run by test_futures.py as a job of one: a script that makes a pool without `if __name__ == "__main__":`.

Its workers import it to unpickle its functions, and would make pools of their own; they refuse, and every task
reports why instead of the job hanging.
"""

from meshcomm.mpi.futures import MPIPoolExecutor


def one():
    return 1


with MPIPoolExecutor(1) as pool:
    error = pool.submit(one).exception(timeout=60)
assert isinstance(error, RuntimeError) and "if __name__ == '__main__':" in str(error), error
print("OK rank 0 of 1", flush=True)
