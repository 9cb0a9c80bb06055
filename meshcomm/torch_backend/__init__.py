"""torch.distributed backend "meshcomm": `torch.distributed.init_process_group("meshcomm")` runs on meshcomm.

The backend is registered as `import torch` finishes, through torch's
"torch.backends" entry point (plugin.py, which imports neither torch nor the
rest of meshcomm), and also whenever meshcomm is imported after torch (for
TORCH_DEVICE_BACKEND_AUTOLOAD=0). The other modules here load when torch
creates a "meshcomm" group.
"""

from meshcomm.torch_backend.plugin import BACKEND_NAME, register

__all__ = ["BACKEND_NAME", "register"]
