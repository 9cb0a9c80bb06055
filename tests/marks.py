"""Marks shared by the tests: the ones that need the compiled path."""

from __future__ import annotations

import pytest

from meshcomm import native

needs_compiled = pytest.mark.skipif(native.core is None, reason="the compiled path is not active (not built, or "
                                    "MESHCOMM_NATIVE=0)")
