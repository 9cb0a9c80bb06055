"""examples/ray_parameter_averaging.py runs as README says and ends with the one-process result."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.ranks import run_command

pytest.importorskip("ray", reason="ray is not installed (pip install 'meshcomm[ray]')")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ray_parameter_averaging.py"


@pytest.mark.slow
def test_four_actors_average_to_the_one_process_result() -> None:
    done = run_command([sys.executable, str(EXAMPLE)], timeout=240)
    assert done.returncode == 0, done.output
    assert "every actor holds the same weights: True" in done.stdout
    assert "equal to the same steps in one process (within 1e-12): True" in done.stdout
