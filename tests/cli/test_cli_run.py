"""`meshcomm run`: the three program forms, options, and argument errors."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from meshcomm.cli.main import main
from tests.ranks import run_meshcomm

PRINT_RANK = """import os, sys
print(f"rank={os.environ['RANK']} size={os.environ['WORLD_SIZE']} local={os.environ['LOCAL_RANK']} "
      f"port={os.environ['MASTER_PORT']} timeout={os.environ.get('MESHCOMM_TIMEOUT', '-')} "
      f"host={os.environ.get('MESHCOMM_HOST_ID', '-')} args={sys.argv[1:]}")
"""


@pytest.fixture
def rank_script(tmp_path: Path) -> str:
    path = tmp_path / "print_rank.py"
    path.write_text(PRINT_RANK)
    return str(path)


def rank_lines(out: str) -> dict[int, str]:
    found = {}
    for line in out.splitlines():
        match = re.fullmatch(r"\[rank(\d+)\]: (rank=(\d+) .*)", line)
        assert match and match.group(1) == match.group(3), line
        found[int(match.group(1))] = match.group(2)
    return found


@pytest.mark.parametrize("nproc", [1, 2, 3, 4])
def test_script_form_runs_n_ranks_with_arguments(
    nproc: int, rank_script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "-n", str(nproc), rank_script, "--lr", "3", "--", "-n", "9"]) == 0
    lines = rank_lines(capsys.readouterr().out)
    assert sorted(lines) == list(range(nproc))
    ports = {re.search(r"port=(\d+)", line).group(1) for line in lines.values()}  # type: ignore[union-attr]
    assert len(ports) == 1 and ports != {"0"}
    for rank, line in lines.items():
        assert f"size={nproc} local={rank} " in line
        assert line.endswith("args=['--lr', '3', '--', '-n', '9']")


def test_torchrun_spelling_and_options_reach_the_ranks(rank_script: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--nproc_per_node", "2", "--master-port", "29123", "--timeout", "7", "--host-id", "fake-b",
            rank_script]
    assert main(argv) == 0
    for line in rank_lines(capsys.readouterr().out).values():
        assert "port=29123 timeout=7 host=fake-b" in line


def test_no_prefix_leaves_output_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "write.py"
    # One write() per rank: without prefixes, output is forwarded as it comes, so
    # two writes of different ranks could interleave (as with mpiexec).
    path.write_text("import os, sys\nsys.stdout.write(f\"rank={os.environ['RANK']}\\n\")\n")
    assert main(["run", "-n", "2", "--no-prefix", str(path)]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == ["rank=0", "rank=1"]


def test_dash_dash_runs_any_command(capsys: pytest.CaptureFixture[str]) -> None:
    code = "import os; print('cmd', os.environ['RANK'])"
    assert main(["run", "-n", "2", "--", sys.executable, "-c", code]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == ["[rank0]: cmd 0", "[rank1]: cmd 1"]


def test_a_command_on_path_runs_without_dash_dash_as_with_mpiexec(
    rank_script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `meshcomm run -n 2 python prog.py`: "python" is no file here, but a command on PATH.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "-n", "2", "python", rank_script, "--lr", "3"]) == 0
    lines = rank_lines(capsys.readouterr().out)
    assert sorted(lines) == [0, 1] and all(line.endswith("args=['--lr', '3']") for line in lines.values())


def test_a_compiled_program_given_by_its_path_runs_as_a_command(
    rank_script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `meshcomm run -n 2 /usr/bin/python3 prog.py`: a file, but an ELF binary, not a script for Python to read.
    interpreter = os.path.realpath(sys.executable)
    assert main(["run", "-n", "2", interpreter, rank_script, "--lr", "3"]) == 0
    lines = rank_lines(capsys.readouterr().out)
    assert sorted(lines) == [0, 1] and all(line.endswith("args=['--lr', '3']") for line in lines.values())


def test_module_form_runs_python_dash_m(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "meshcomm_test_mod.py").write_text(PRINT_RANK)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert main(["run", "-n", "2", "-m", "meshcomm_test_mod", "--flag"]) == 0
    lines = rank_lines(capsys.readouterr().out)
    assert sorted(lines) == [0, 1] and all(line.endswith("args=['--flag']") for line in lines.values())


def test_python_dash_m_meshcomm_run(rank_script: str) -> None:
    done = run_meshcomm("run", "-n", "3", rank_script, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(rank_lines(done.stdout)) == [0, 1, 2]


def test_failing_rank_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "fail.py"
    path.write_text("import os, sys, time\n"
                    "if os.environ['RANK'] == '1':\n"
                    "    print('bad input', file=sys.stderr)\n"
                    "    sys.exit(3)\n"
                    "time.sleep(60)\n")
    done = run_meshcomm("run", "-n", "3", str(path), timeout=60)
    assert done.returncode == 3
    assert "meshcomm run: rank 1 (local rank 1" in done.stderr and "failed first: exit code 3" in done.stderr
    assert "    [rank1]: bad input" not in done.stderr and "\n    bad input" in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "-n", "0", "x.py"], "argument -n/--nproc-per-node/--nproc_per_node: must be >= 1, got 0"),
        (["run", "-n", "two", "x.py"], "must be an integer, got 'two'"),
        (["run", "--master-port", "70000", "x.py"], "argument --master-port/--master_port: must be <= 65535"),
        (["run", "--timeout", "0", "x.py"], "argument --timeout: must be > 0 seconds, got 0"),
        (["run", "--nnodes", "2", "x.py"], "--master-port is required when --nnodes > 1"),
        (["run", "--nnodes", "2", "--node-rank", "2", "--master-port", "5", "x.py"],
         r"--node-rank must be in [0, 2) for --nnodes 2, got 2"),
        (["run", "-n", "2"], "nothing to run: give script.py, -m module, or -- command"),
        (["run", "--"], "'--' must be followed by the command to run"),
        (["run", "-m", "--", "mod"], "-m/--module names a Python module; it cannot be combined with '-- command'"),
        (["run", "-n", "2", "no_such_script.py", "-c", "1"], "script 'no_such_script.py' is not a file; to run a program that is not a Python script, put it after '--' (meshcomm run -n 2 -- no_such_script.py -c 1)"),
        (["run", "-n", "2", "./no_such_program"], "script './no_such_program' is not a file"),
        (["run", "--master", "1", "x.py"], "unrecognized arguments: --master"),
    ],
)
def test_bad_arguments_name_the_argument_and_rule(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "usage: meshcomm" in err


def test_several_nodes_without_token_say_to_export_one(
    rank_script: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MESHCOMM_TOKEN", raising=False)
    assert main(["run", "--nnodes", "2", "--master-port", "29500", rank_script]) == 2
    err = capsys.readouterr().err
    assert "meshcomm run: error:" in err and "export the same MESHCOMM_TOKEN on every node" in err
