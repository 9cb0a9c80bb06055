"""The collective is a positional argument of `meshcomm explain`, `sim` and `bench`; --coll (sim) and --colls
(bench) still work as the older spelling, and giving both is an error naming the argument."""

from __future__ import annotations

import pytest

from meshcomm.bench import runner
from meshcomm.cli.main import main


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[runner.Plan]:
    """The plans `meshcomm bench` would run; no rank is started."""
    seen: list[runner.Plan] = []

    def sweep(plan: runner.Plan) -> tuple[int, list]:
        seen.append(plan)
        return 0, []

    monkeypatch.setattr(runner, "sweep", sweep)
    return seen


@pytest.mark.parametrize(("argv", "colls"), [
    (["all_reduce,all_to_all", "-n", "2", "--sizes", "8,64K"], ["all_reduce", "all_to_all"]),
    (["-n", "2", "all_reduce", "all_to_all", "--sizes", "8,64K"], ["all_reduce", "all_to_all"]),
    (["broadcast,gather", "all_reduce", "broadcast", "--sizes", "8,64K"], ["broadcast", "gather", "all_reduce"]),
    (["--colls", "all_reduce,all_to_all", "-n", "2", "--sizes", "8,64K"], ["all_reduce", "all_to_all"]),
    (["-n", "2", "--sizes", "8,64K"], ["all_reduce"]),
])
def test_bench_takes_collectives_as_words_or_with_colls(argv: list[str], colls: list[str], plans) -> None:
    assert main(["bench", *argv]) == 0
    (plan,) = plans
    assert plan.colls == colls and plan.sizes == [8, 64 << 10]


@pytest.mark.parametrize(("argv", "message"), [
    (["all_reduce", "--colls", "broadcast"], "argument --colls: not allowed with argument COLLECTIVE"),
    (["allreduce"], "argument COLLECTIVE: must be a comma-separated list of all_reduce, broadcast"),
    (["all_reduce", "gatherr"], "argument COLLECTIVE: must be a comma-separated list of"),
    (["--colls", "allgather"], "argument --colls: must be a comma-separated list of"),
])
def test_bench_collective_errors_name_the_argument(argv: list[str], message: str, plans, capsys) -> None:
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "usage: meshcomm bench" in err
    assert plans == []


def test_sim_takes_the_collective_as_a_word_or_with_coll(capsys) -> None:
    argv = ["--algos", "binomial,chain", "--topology", "summit", "-n", "6,12", "--sizes", "8,1M"]
    assert main(["sim", "broadcast", *argv]) == 0
    positional = capsys.readouterr().out
    assert main(["sim", "--coll", "broadcast", *argv]) == 0
    option = capsys.readouterr().out
    assert positional.startswith("# broadcast on summit")
    strip = lambda text: [line for line in text.splitlines() if not line.startswith("# simulated in")]  # noqa: E731
    assert strip(positional) == strip(option)
    assert main(["sim", *argv[2:]]) == 0
    assert capsys.readouterr().out.startswith("# all_reduce on summit")  # neither: the default


@pytest.mark.parametrize(("argv", "message"), [
    (["broadcast", "--coll", "broadcast"], "argument --coll: not allowed with argument COLLECTIVE"),
    (["allreduce"], "argument COLLECTIVE: unknown collective 'allreduce'; choose one of: broadcast"),
    (["--coll", "allreduce"], "argument --coll: unknown collective 'allreduce'"),
    (["all_reduce", "broadcast"], "unrecognized arguments: broadcast"),
])
def test_sim_collective_errors_name_the_argument(argv: list[str], message: str, capsys) -> None:
    assert main(["sim", *argv, "-n", "2"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "usage: meshcomm" in captured.err
    assert captured.out == ""


def test_explain_requires_its_collective(capsys) -> None:
    assert main(["explain", "-n", "4"]) == 2
    assert "the following arguments are required: COLLECTIVE" in capsys.readouterr().err
