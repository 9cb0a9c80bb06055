"""Tuning files: saved and loaded unchanged; a missing or bad one is an error naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meshcomm.tuner import DEFAULTS, load, save
from meshcomm.tuner.measure import PINGPONG_BYTES, call_overhead, crowded_ranks, fit_link, solve_linear


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
    ("no crowded_alpha", "crowded_alpha must be a number >= 0, got None"),
])
def test_bad_file_names_the_file_and_the_field(tmp_path: Path, text: str | None, message: str) -> None:
    raw = json.loads(DEFAULTS.to_json())
    if text is None:
        del raw["same_host"]
        text = json.dumps(raw)
    elif text == "no crowded_alpha":
        del raw["crowded_alpha"]
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


def test_a_parameter_is_solved_from_a_prediction_linear_in_it() -> None:
    assert solve_linear(measured=25.0, at_zero=5.0, at_one=15.0) == 2.0
    assert solve_linear(measured=1.0, at_zero=5.0, at_one=15.0) == 0.0
    with pytest.raises(ValueError, match="does not grow"):
        solve_linear(measured=1.0, at_zero=5.0, at_one=5.0)


def test_crowded_job_has_twice_the_cores_up_to_sixteen_ranks() -> None:
    assert crowded_ranks(2) == 4 and crowded_ranks(8) == 16 and crowded_ranks(9) is None
