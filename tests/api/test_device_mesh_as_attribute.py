"""`import meshcomm as dist; dist.device_mesh.init_device_mesh(...)` under `meshcomm run`, with no init first, as torch allows."""

from __future__ import annotations

from pathlib import Path

from tests.ranks import run_meshcomm

PROGRAM = Path(__file__).with_name("device_mesh_program.py")


def test_device_mesh_is_an_attribute_and_initializes_the_default_group() -> None:
    done = run_meshcomm("run", "-n", "4", str(PROGRAM), timeout=120)
    assert done.returncode == 0, done.output
    results = sorted(line.split("RESULT ", 1)[1] for line in done.stdout.splitlines() if "RESULT " in line)
    # Row r holds ranks 2r and 2r + 1: their sum is 4r + 1.
    assert results == ["0 [0, 0] 1", "1 [0, 1] 1", "2 [1, 0] 5", "3 [1, 1] 5"]
