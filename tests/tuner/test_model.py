"""Tuning files: saved and loaded unchanged; a missing or bad one is an error naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meshcomm.tuner import DEFAULTS, load, save
from meshcomm.tuner.measure import PINGPONG_BYTES, call_overhead, fit_link


def test_save_then_load_gives_the_same_parameters(tmp_path: Path) -> None:
    path = str(tmp_path / "sub" / "tuning.json")
    save(DEFAULTS, path)
    loaded = load(path)
    assert loaded == DEFAULTS and loaded.source == path


def test_missing_file_is_named_with_the_command_that_makes_it(tmp_path: Path) -> None:
    path = str(tmp_path / "absent.json")
    with pytest.raises(ValueError, match=f"cannot read tuning file {path}: .*meshcomm tune -o {path}"):
        load(path)


@pytest.mark.parametrize("text, message", [
    ("{not json", "is not JSON"),
    ('{"alpha": 1}', "is not a meshcomm tuning file"),
    (None, "same_host must be an object with alpha and beta"),
    ("negative", "gamma must be a number >= 0, got -1"),
])
def test_bad_file_names_the_file_and_the_field(tmp_path: Path, text: str | None, message: str) -> None:
    raw = json.loads(DEFAULTS.to_json())
    if text is None:
        del raw["same_host"]
        text = json.dumps(raw)
    elif text == "negative":
        raw["gamma"] = -1
        text = json.dumps(raw)
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"tuning file {path}.*{message}"):
        load(str(path))


def test_ping_pong_fit_recovers_alpha_and_beta() -> None:
    alpha, beta = 30e-6, 0.25e-9
    link = fit_link({n: alpha + n * beta for n in PINGPONG_BYTES})
    assert link.alpha == pytest.approx(alpha, rel=1e-3) and link.beta == pytest.approx(beta, rel=1e-3)


def test_ping_pong_fit_needs_small_and_large_sizes() -> None:
    with pytest.raises(ValueError, match="lack the sizes"):
        fit_link({8: 1e-5})


def test_per_call_cost_is_never_negative() -> None:
    assert call_overhead(50e-6, 30e-6) == pytest.approx(20e-6)
    assert call_overhead(30e-6, 50e-6) == 0.0
