"""The cost model inside real ranks: parameters from MESHCOMM_TUNING, MESHCOMM_DEBUG lines, hosts, bad names."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from meshcomm.algorithms import ALGORITHMS
from meshcomm.algorithms.problem import Problem
from meshcomm.tuner import DEFAULTS, save
from meshcomm.tuner.table import Measured
from tests.ranks import Cluster, Exit, fresh_job_env, get_cluster, run_meshcomm

PROGRAM = """import numpy as np, meshcomm as dist
dist.init_process_group()
dist.all_reduce(np.ones(1 << 18, np.float32))
dist.all_reduce(np.ones(1 << 18, np.float32))
dist.broadcast(np.ones(2, np.float32), src=0, algorithm="chain")
dist.destroy_process_group()
"""


def run_job(tmp_path: Path, env: dict[str, str]) -> Exit:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    return run_meshcomm("run", "-n", "2", "--timeout", "30", str(script), env=fresh_job_env(env), timeout=90)


def test_debug_info_prints_the_cost_table_once_and_every_calls_choice(tmp_path: Path) -> None:
    tuning = str(tmp_path / "tuning.json")
    save(DEFAULTS, tuning)
    done = run_job(tmp_path, {"MESHCOMM_DEBUG": "INFO", "MESHCOMM_TUNING": tuning})
    assert done.returncode == 0, done.stderr
    for rank in (0, 1):
        mine = [line for line in done.stderr.splitlines() if line.startswith(f"[rank{rank}]: meshcomm rank {rank} ")]
        headers = [line for line in mine if "cost table" in line]
        assert len(headers) == 2 and all(tuning in line for line in headers)  # all_reduce, then broadcast
        assert sum(re.search(r"  ring +\d+", line) is not None for line in mine) == 1
        calls = [line.split("'default_pg': ", 1)[1] for line in mine if " B -> " in line]
        assert len(calls) == 3
        # the built-in rows hold where the ranks read each other's memory, the model elsewhere
        assert re.fullmatch(r"all_reduce 1048576 B -> \w+ \((measured at 256 KiB; )?predicted \d+ µs\)", calls[0])
        assert calls[1] == calls[0]
        assert re.fullmatch(r"broadcast 8 B -> chain \(algorithm=; predicted \d+ µs\)", calls[2])


def test_a_bad_tuning_file_stops_every_rank_naming_the_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.json")
    done = run_job(tmp_path, {"MESHCOMM_TUNING": missing})
    assert done.returncode != 0
    assert f"cannot read tuning file {missing}" in done.stderr


def view() -> tuple:
    from meshcomm.api.state import runtime

    world = runtime().world
    return runtime().transport.link_labels, world.chooser.hosts, world.chooser.parameters == DEFAULTS


def test_ranks_on_faked_hosts_get_other_host_links() -> None:
    cluster = Cluster(4, env={"MESHCOMM_HOST_ID": ["a", "a", "b", "b"]})
    try:
        assert cluster.run(view) == [((0, 0, 2, 2), (0, 0, 2, 2), True)] * 4
    finally:
        cluster.close()


def call_with(algorithm: str) -> str:
    import meshcomm as dist

    try:
        dist.all_reduce(np.ones(4, np.float32), algorithm=algorithm)
    except ValueError as exc:
        return str(exc)
    return "no error"


@pytest.mark.parametrize("name", ["bogus", "chain"])  # chain exists, for broadcast only
def test_unknown_or_inapplicable_algorithm_is_an_error_listing_the_valid_ones(name: str) -> None:
    expected = f"unknown all_reduce algorithm {name!r}; choose one of: {', '.join(ALGORITHMS['all_reduce'])}"
    assert get_cluster(2).run(call_with, name) == [expected, expected]


def measured_choice() -> tuple:
    from meshcomm.api.state import runtime

    choice = runtime().world.chooser.choose(Problem("all_reduce", 2, (1 << 18,)), 4)
    return choice.name, choice.how


def test_every_rank_takes_rank_0s_measured_choice(tmp_path: Path) -> None:
    tuning = str(tmp_path / "tuning.json")
    save(replace(DEFAULTS, choices=(Measured("all_reduce", 2, 1 << 20, "binomial"),)), tuning)
    # Only rank 0 reads the file; rank 1's setting names none, so the table can only reach it through the store.
    cluster = Cluster(2, env={"MESHCOMM_TUNING": [tuning, str(tmp_path / "absent.json")]})
    try:
        assert cluster.run(measured_choice) == [("binomial", "measured at 1 MiB")] * 2
    finally:
        cluster.close()


def test_debug_info_says_a_choice_was_measured(tmp_path: Path) -> None:
    tuning = str(tmp_path / "tuning.json")
    save(replace(DEFAULTS, choices=(Measured("all_reduce", 2, 1 << 20, "binomial"),)), tuning)
    done = run_job(tmp_path, {"MESHCOMM_DEBUG": "INFO", "MESHCOMM_TUNING": tuning})
    assert done.returncode == 0, done.stderr
    for rank in (0, 1):
        calls = [line for line in done.stderr.splitlines() if line.startswith(f"[rank{rank}]: ") and " B -> " in line]
        assert re.search(r"all_reduce 1048576 B -> binomial \(measured at 1 MiB; predicted \d+ µs\)$", calls[0])
