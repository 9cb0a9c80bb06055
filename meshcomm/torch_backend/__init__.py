"""torch.distributed backend "meshcomm": `torch.distributed.init_process_group("meshcomm")` runs on meshcomm.

The backend is registered as `import torch` finishes, through torch's
"torch.backends" entry point (the top-level module meshcomm_torch_plugin,
which does not import meshcomm), and also whenever meshcomm is imported
after torch (for TORCH_DEVICE_BACKEND_AUTOLOAD=0). The modules here load
when torch creates a "meshcomm" group.
"""

from __future__ import annotations

import sys

from meshcomm_torch_plugin import BACKEND_NAME, register

__all__ = ["BACKEND_NAME", "register"]


def register_if_torch_loaded() -> None:
    """Register when torch is already imported; never import torch just for this."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "distributed"):
        register()
