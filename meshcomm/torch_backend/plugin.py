"""torch's entry point for meshcomm: registers the "meshcomm" torch.distributed backend.

torch calls `autoload()` at the end of `import torch` (entry point group
"torch.backends", declared in pyproject.toml). Only this module and the
lazy package above it load then: the rest of meshcomm (numpy, the
algorithms, the transports) loads when a "meshcomm" group is created.
"""

from __future__ import annotations

import sys

BACKEND_NAME = "meshcomm"


def register() -> bool:
    """Register the backend with torch.distributed (again is harmless); False when torch has no distributed support."""
    import torch.distributed as dist

    if not dist.is_available():
        return False
    if BACKEND_NAME in dist.Backend.backend_list:
        return True
    # devices must be a list: torch iterates it, and a bare "cpu" would be read letter by letter.
    # CUDA tensors are staged through host memory (meshcomm/api/tensors.py); one backend
    # object serves both, as torch creates a single backend when every device maps to it.
    dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True, devices=["cpu", "cuda"])
    return True


def _create(opts, pg_options=None):
    from meshcomm.torch_backend.creator import create  # meshcomm loads here, not at import torch

    return create(opts, pg_options)


def register_if_torch_loaded() -> None:
    """Register when torch is already imported (for TORCH_DEVICE_BACKEND_AUTOLOAD=0); never import torch for it."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "distributed"):
        register()


def autoload() -> None:
    """Called by torch as it finishes importing; a failure must not make torch itself unimportable."""
    try:
        register()
    except Exception as exc:  # noqa: BLE001 (torch must stay importable)
        import warnings

        warnings.warn(f"meshcomm could not register its torch.distributed backend: {exc!r}", stacklevel=2)
