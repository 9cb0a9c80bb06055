"""Stand-in mpi4py package for running mpi4py's test suite on meshcomm: `mpi4py.MPI` is `meshcomm.MPI`.

Only ever put on PYTHONPATH for the test processes by `python -m meshcomm.mpi.suite`.
It has mpi4py's package-level face: `rc` (also importable as `mpi4py.rc`),
`get_config`, `get_include` and `profile`. meshcomm builds no C extension
against an MPI library, so there is no configuration to report, no C
header to include, and a profiler library loaded by `profile` sees no MPI
calls (meshcomm's own tracing is `MESHCOMM_TRACE`).
"""

import ctypes
import ctypes.util
import os
import sys
import warnings

__version__ = "4.1.2"


class Rc:
    """Runtime options read when MPI starts; meshcomm starts the same way whatever they say."""

    _defaults = {
        "initialize": True, "threads": True, "thread_level": "multiple", "finalize": None,
        "fast_reduce": True, "recv_mprobe": True, "irecv_bufsz": 32768, "errors": "exception",
    }

    def __init__(self, **kwargs):
        for name, value in self._defaults.items():
            object.__setattr__(self, name, value)
        self(**kwargs)

    def __setattr__(self, name, value):
        if name not in self._defaults:
            raise TypeError(f"mpi4py.rc has no option {name!r}")
        object.__setattr__(self, name, value)

    def __call__(self, **kwargs):
        for name, value in kwargs.items():
            setattr(self, name, value)

    def __repr__(self):
        return f"<{__name__}.rc>"


rc = Rc()
sys.modules[f"{__name__}.rc"] = rc


def get_config():
    """The MPI build configuration: meshcomm compiled nothing against an MPI library, so none."""
    return {}


def get_include():
    """mpi4py's C headers: meshcomm.MPI is pure Python and has none to offer."""
    raise NotImplementedError("meshcomm's MPI face has no C headers (it has no C API to include)")


def _library_candidates(name, path):
    if os.sep in name:
        yield name
        return
    directories = [path] if isinstance(path, (str, bytes, os.PathLike)) else list(path or [])
    for directory in directories:
        directory = os.fsdecode(directory)
        for filename in (name, f"lib{name}.so", f"{name}.so"):
            yield os.path.join(directory, filename)
    found = ctypes.util.find_library(name)
    if found:
        yield found


def profile(name, *, path=None, logfile=None):
    """Load the profiling library `name` (searched in `path`, then the system's places) into this process.

    ValueError when no such library exists; a UserWarning when it exists
    but does not load. meshcomm makes no PMPI calls, so the library sees none.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    for candidate in _library_candidates(name, path):
        if os.path.isfile(candidate) or (os.sep not in candidate and candidate):
            try:
                ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                warnings.warn(f"profiler {name!r} was found but did not load: {exc}", UserWarning, stacklevel=2)
            return
    raise ValueError(f"profiler {name!r} was not found")
