"""Tutorial code that behaved differently on meshcomm runs unchanged: the same output as on torch's gloo backend.

tutorial_program.py differs between the two runs only in which library it
imports as `dist`; what each rank saw (results, return values, warnings) must
be equal, which also checks that those places really do what torch does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.ranks import free_port, fresh_job_env, run_command

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

PROGRAM = Path(__file__).with_name("tutorial_program.py")


def _run(library: str, out_dir: Path) -> list[dict]:
    env = fresh_job_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1"})
    out_dir.mkdir()
    done = run_command([sys.executable, str(PROGRAM), library, str(out_dir)], env=env, timeout=240)
    assert done.returncode == 0, f"{library} run failed:\n{done.stdout}\n{done.stderr}"
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(3)]


@pytest.mark.slow
def test_outsiders_device_mesh_before_init_and_dist_device_mesh_match_torch(tmp_path: Path) -> None:
    gloo = _run("torch", tmp_path / "gloo")
    ours = _run("meshcomm", tmp_path / "meshcomm")
    for rank in range(3):
        assert ours[rank] == gloo[rank], rank
    # What makes the comparison worth having: rank 2 was warned by every call, and did nothing.
    assert gloo[2]["broadcast"] == {"returned": None, "result": [2.0] * 4, "warnings": [
        "Running broadcast on global rank 2 which does not belong to the given group."]}
    assert gloo[2]["recv"] == -1 and len(gloo[2]["p2p_warnings"]) == 1
    assert gloo[0]["initialized_before"] is False and gloo[0]["initialized_after_mesh"] is True
