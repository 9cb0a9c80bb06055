"""Which per-call path runs: the compiled extension (meshcomm/native/_core.c) or pure Python.

`pip install .` builds the extension when a C compiler is there; without one,
or with MESHCOMM_NATIVE=0, every call takes the pure-Python path, with the
same results (docs/native.md).
"""

from __future__ import annotations

import importlib

from meshcomm import config

try:
    _built = importlib.import_module("meshcomm.native._core")
    _WHY_NOT = ""
except ModuleNotFoundError:  # no compiler at install time, or a source tree never built
    _built = None
    _WHY_NOT = ("the compiled extension meshcomm.native._core is not built (`pip install .` builds it where a C "
                "compiler is; `pip install -e .` in a source tree)")
except ImportError as exc:  # built, but for another interpreter, or broken
    _built = None
    _WHY_NOT = f"the compiled extension meshcomm.native._core does not load: {exc}"

core = _built if _built is not None and config.get("MESHCOMM_NATIVE") != "0" else None


def describe() -> str:
    """One line: which path is active, and why."""
    if core is not None:
        return f"compiled ({core.__file__})"
    if _built is not None:
        return "pure Python (MESHCOMM_NATIVE=0)"
    return f"pure Python: {_WHY_NOT}"
