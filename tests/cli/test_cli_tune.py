"""`meshcomm tune`: measures on real ranks and writes a file MESHCOMM_TUNING can load."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshcomm.cli.main import main
from meshcomm.tuner import load


def test_tune_writes_a_loadable_file_and_says_how_to_use_it(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "tuning.json")
    assert main(["tune", "-n", "2", "-o", path, "--budget", "0.01"]) == 0
    parameters = load(path)
    assert parameters.same_host.alpha > 0 and parameters.other_host.alpha > 0 and parameters.gamma > 0
    out = capsys.readouterr().out
    assert f"export MESHCOMM_TUNING={path}" in out
    assert "same_host" in out and "other_host" in out


def test_tune_needs_two_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "-n", "1"]) == 2
    assert "-n must be at least 2" in capsys.readouterr().err
