"""meshcomm sim: the ring's closed form agrees with rank-by-rank replay, and the command's output and errors."""

from __future__ import annotations

import dataclasses
import json

import pytest

from meshcomm.cli.main import main
from meshcomm.sim import simulate
from meshcomm.sim.engine import problem_for, ring_closed_form
from meshcomm.sim.topology import PRESETS, topology
from meshcomm.algorithms import ALGORITHMS
from meshcomm.tuner.predict import predict

TOPOLOGIES = [topology("summit"), topology("dgx-a100"), topology("here"), topology("here", 2)]


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=lambda t: f"{t.name}-{t.ranks_per_host}")
@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
def test_ring_closed_form_matches_replay_when_every_chunk_has_data(topo, collective: str) -> None:
    for n in (12, 50, 96):
        for nbytes in (4096, 1 << 20):
            problem = problem_for(collective, n, nbytes, 4, topo)
            replayed = simulate(collective, "ring", n, nbytes, topo, exact=True).seconds
            assert ring_closed_form(problem, 4, topo) == pytest.approx(replayed, rel=0.05)


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=lambda t: f"{t.name}-{t.ranks_per_host}")
def test_tiny_all_reduce_closed_form_follows_its_chunks_around_the_ring(topo) -> None:
    for n in (12, 48, 96, 240):
        replayed = simulate("all_reduce", "ring", n, 8, topo, exact=True).seconds
        assert ring_closed_form(problem_for("all_reduce", n, 8, 4, topo), 4, topo) == pytest.approx(replayed, rel=0.06)


def test_closed_form_is_used_only_above_the_replay_limit() -> None:
    summit = PRESETS["summit"]
    assert simulate("all_reduce", "ring", 96, 8, summit).method == "replay"
    assert simulate("all_reduce", "ring", 2048, 8, summit).method == "ring closed form"
    assert simulate("all_reduce", "double_binary_tree", 2048, 8, summit).method == "replay"


def test_tree_beats_ring_by_more_as_ranks_grow_on_small_messages() -> None:
    summit = PRESETS["summit"]
    ratios = [simulate("all_reduce", "ring", n, 8, summit).seconds
              / simulate("all_reduce", "double_binary_tree", n, 8, summit).seconds for n in (6, 48, 384, 3072)]
    assert ratios == sorted(ratios) and ratios[0] > 1 and ratios[-1] > 50


def test_node_aware_algorithms_see_the_topologys_hosts() -> None:
    summit = PRESETS["summit"]
    assert problem_for("all_reduce", 12, 1024, 4, summit).hosts == (0,) * 6 + (1,) * 6
    assert problem_for("all_reduce", 4, 1024, 4, topology("here")).hosts == ()
    flat = simulate("all_reduce", "ring", 48, 64 << 20, summit).seconds
    assert simulate("all_reduce", "hierarchical", 48, 64 << 20, summit).seconds < flat


def test_one_host_is_priced_as_its_group_s_model_prices_it_board_calls_included() -> None:
    here = dataclasses.replace(topology("here"), board=True, single_copy=True)
    for collective in ("all_reduce", "all_gather", "all_to_all"):
        for nbytes in (8, 64 << 20):
            problem = problem_for(collective, 4, nbytes, 4, here)
            for algorithm in ALGORITHMS[collective]:
                # What a group of 4 ranks on one host of `here` computes to choose (tuner/choose.py).
                group = predict(problem, algorithm, 4, here.parameters, None, here.cores, single_copy=True)
                assert simulate(collective, algorithm, 4, nbytes, here).seconds == group, (collective, algorithm)
    for collective, algorithm, nbytes in (("all_gather", "direct", 8), ("all_gather", "direct", 64 << 20),
                                          ("all_reduce", "two_shot", 64 << 20)):
        assert simulate(collective, algorithm, 4, nbytes, here).method == "board"
    # Without the single copy only posts that fit a slot go on the board; the rest run as messages.
    no_copy = dataclasses.replace(here, single_copy=False)
    assert simulate("all_gather", "direct", 4, 8, no_copy).method == "board"
    assert simulate("all_gather", "direct", 4, 64 << 20, no_copy).method == "replay"
    assert simulate("all_reduce", "two_shot", 4, 64 << 20, no_copy).method == "replay"
    # Ranks on two hosts exchange messages, and the GPU presets model their interconnects, not the board.
    assert simulate("all_gather", "direct", 4, 8, dataclasses.replace(here, ranks_per_host=2)).method == "replay"
    assert simulate("all_gather", "direct", 6, 8, PRESETS["summit"]).method == "replay"
    # Nor do ranks that talk over TCP on one host.
    tcp_only = dataclasses.replace(here, board=False, single_copy=False)
    assert simulate("all_gather", "direct", 4, 8, tcp_only).method == "replay"


def test_here_expects_the_board_only_where_a_job_would_use_shared_memory(monkeypatch) -> None:
    monkeypatch.setenv("MESHCOMM_TRANSPORT", "tcp")
    assert (topology("here").board, topology("here").single_copy) == (False, False)
    monkeypatch.setenv("MESHCOMM_TRANSPORT", "auto")
    monkeypatch.setenv("MESHCOMM_SINGLE_COPY_BYTES", "0")
    assert topology("here").single_copy is False


def test_sim_prints_a_row_per_point_and_writes_json(tmp_path, capsys) -> None:
    out = tmp_path / "points.jsonl"
    assert main(["sim", "all_reduce", "--algos", "ring,double_binary_tree", "--topology", "summit",
                 "-n", "6,12", "--sizes", "8,1M", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ring/double_binary_tree" in text and "summit" in text
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 8
    assert {(r["ranks"], r["bytes"], r["algorithm"]) for r in rows} == {
        (n, b, a) for n in (6, 12) for b in (8, 1 << 20) for a in ("ring", "double_binary_tree")}
    assert all(r["time_us"] > 0 and r["method"] == "replay" for r in rows)


@pytest.mark.parametrize(("argv", "message"), [
    (["allreduce"], "unknown collective 'allreduce'"),
    (["--algos", "ring,bogus"], "all_reduce has no algorithm bogus"),
    (["--topology", "frontier"], "unknown topology 'frontier'; choose one of: here, summit, dgx-a100"),
])
def test_bad_arguments_name_what_was_wrong(argv, message: str, capsys) -> None:
    assert main(["sim", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_bad_setting_is_named_and_not_blamed_on_an_argument(monkeypatch, capsys) -> None:
    monkeypatch.setenv("MESHCOMM_SINGLE_COPY_BYTES", "lots")
    assert main(["sim", "-n", "2"]) == 2
    err = capsys.readouterr().err
    assert "MESHCOMM_SINGLE_COPY_BYTES must be an integer, got 'lots'" in err and "argument --topology" not in err
