"""The torch_backend tests need torch (CI installs torch==2.13.0); without it they are skipped with that reason."""

import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
