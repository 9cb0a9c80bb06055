"""Stand-in mpi4py package for running mpi4py's test suite on meshcomm: `mpi4py.MPI` is `meshcomm.MPI`.

Only ever put on PYTHONPATH for the test processes by `python -m meshcomm.mpi.suite`.
"""

__version__ = "4.1.2"


class _RC:
    """mpi4py.rc: runtime options the tests read; meshcomm has nothing to configure here."""

    initialize = finalize = True
    threads = True
    thread_level = "serialized"
    recv_mprobe = False
    irecv_bufsz = 32768
    fast_reduce = True
    errors = "exception"

    def __call__(self, **kwargs):
        for name, value in kwargs.items():
            if not hasattr(self, name):
                raise TypeError(f"unexpected argument {name!r}")
            setattr(self, name, value)


rc = _RC()


def get_include():
    raise NotImplementedError("meshcomm's MPI face has no C headers")
