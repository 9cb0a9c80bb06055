"""Real ranks started through launch() and Supervisor: environment, output, failures."""

from __future__ import annotations

import io
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from meshcomm.launcher import RankSpec, Supervisor, launch, python_script_command

PRINT_ENV = """
    import os
    keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_PORT",
            "MESHCOMM_RANK", "MESHCOMM_MASTER_PORT", "MESHCOMM_TOKEN", "PYTHONUNBUFFERED", "EXTRA"]
    print(" ".join(f"{k}={os.environ.get(k, '-')}" for k in keys))
"""


PATH_NOTE = "meshcomm run: the ranks run the pure-Python per-call path: "


def run_launch(cmd: list[str], nproc: int, **kwargs: object) -> tuple[int, str, str]:
    """launch()'s exit code and what it wrote; less its note on the per-call path, which a job makes without the
    compiled extension (tested on its own below), so the checks here read the same on both paths."""
    out, err = io.StringIO(), io.StringIO()
    code = launch(cmd, nproc, stdout=out, stderr=err, **kwargs)  # type: ignore[arg-type]
    written = "".join(line for line in err.getvalue().splitlines(keepends=True) if not line.startswith(PATH_NOTE))
    return code, out.getvalue(), written


def parse(line: str) -> dict[str, str]:
    return dict(field.split("=", 1) for field in line.split())


@pytest.mark.parametrize("nproc", [1, 2, 3, 4])
def test_every_rank_gets_its_own_variables(nproc: int, script: Callable[[str, str], str]) -> None:
    code, out, _ = run_launch(python_script_command(script("env.py", PRINT_ENV)), nproc, env_extra={"EXTRA": "x"})
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == nproc
    seen = {}
    for line in lines:
        match = re.fullmatch(r"\[rank(\d+)\]: (.*)", line)
        assert match, line
        env = parse(match.group(2))
        assert env["RANK"] == env["MESHCOMM_RANK"] == env["LOCAL_RANK"] == match.group(1)
        seen[int(env["RANK"])] = env
    assert sorted(seen) == list(range(nproc))
    for env in seen.values():
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == str(nproc)
        assert env["NODE_RANK"] == "0" and env["PYTHONUNBUFFERED"] == "1" and env["EXTRA"] == "x"
        assert env["MASTER_PORT"] == env["MESHCOMM_MASTER_PORT"] != "0"
    tokens = {env["MESHCOMM_TOKEN"] for env in seen.values()}
    assert len(tokens) == 1 and len(tokens.pop()) == 64
    assert len({env["MASTER_PORT"] for env in seen.values()}) == 1


def test_second_node_numbers_its_ranks_after_the_first(script: Callable[[str, str], str]) -> None:
    code, out, _ = run_launch(
        python_script_command(script("env.py", PRINT_ENV)), 2, nnodes=2, node_rank=1, master_port=29999,
        env_extra={"MESHCOMM_TOKEN": "shared"},
    )
    assert code == 0
    envs = sorted((parse(line.split(": ", 1)[1]) for line in out.splitlines()), key=lambda e: e["RANK"])
    assert [e["RANK"] for e in envs] == ["2", "3"] and [e["LOCAL_RANK"] for e in envs] == ["0", "1"]
    assert all(e["WORLD_SIZE"] == "4" and e["NODE_RANK"] == "1" and e["MESHCOMM_TOKEN"] == "shared" for e in envs)
    assert out.startswith(("[rank2]: ", "[rank3]: "))


def test_stdout_and_stderr_go_to_their_own_streams_with_prefix(script: Callable[[str, str], str]) -> None:
    path = script("both.py", """
        import os, sys
        print("out line")
        sys.stderr.write("err partial")
    """)
    code, out, err = run_launch(python_script_command(path), 2)
    assert code == 0
    assert sorted(out.splitlines()) == ["[rank0]: out line", "[rank1]: out line"]
    assert sorted(err.splitlines()) == ["[rank0]: err partial", "[rank1]: err partial"]


def test_no_prefix_passes_output_through(script: Callable[[str, str], str]) -> None:
    path = script("raw.py", "print('raw', end='')\n")
    code, out, _ = run_launch(python_script_command(path), 2, prefix=False)
    assert code == 0 and out == "rawraw"


def test_failing_rank_sets_exit_code_and_stops_the_others(script: Callable[[str, str], str]) -> None:
    path = script("fail.py", """
        import os, sys, time
        if os.environ["RANK"] == "2":
            for i in range(15):
                print(f"error detail {i}", file=sys.stderr)
            sys.exit(3)
        time.sleep(60)
    """)
    start = time.monotonic()
    code, _, err = run_launch(python_script_command(path), 4, grace=5.0)
    assert time.monotonic() - start < 30, "the sleeping ranks were not stopped"
    assert code == 3
    assert "rank 2 (local rank 2, pid" in err and "failed first: exit code 3" in err
    report = err[err.index("failed first"):]
    assert "error detail 14" in report and "error detail 5" in report and "error detail 4" not in report
    assert "stopped 3 other ranks [0, 1, 3]" in err


def test_rank_killed_by_a_signal_is_reported_as_that_signal(script: Callable[[str, str], str]) -> None:
    path = script("kill.py", """
        import os, signal, time
        if os.environ["RANK"] == "1":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
    """)
    code, _, err = run_launch(python_script_command(path), 2)
    assert code == 128 + signal.SIGKILL
    assert "rank 1 (local rank 1" in err and "failed first: signal SIGKILL" in err


def test_rank_ignoring_sigterm_is_killed_after_the_grace_period(
    script: Callable[[str, str], str], tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    path = script("stubborn.py", f"""
        import os, signal, sys, time
        if os.environ["RANK"] == "0":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            open({str(ready)!r}, "w").close()
            time.sleep(60)
        deadline = time.monotonic() + 30
        while not os.path.exists({str(ready)!r}) and time.monotonic() < deadline:
            time.sleep(0.01)
        sys.exit(1)
    """)
    specs = [RankSpec(rank, rank, python_script_command(path), {**os.environ, "RANK": str(rank)}) for rank in (0, 1)]
    start = time.monotonic()
    result = Supervisor(specs, grace=0.5, stdout=io.StringIO(), stderr=io.StringIO()).run()
    assert time.monotonic() - start < 30
    assert result.exit_code == 1 and result.failure is not None and result.failure.rank == 1
    assert result.returncodes == {0: -signal.SIGKILL, 1: 1}


def test_command_that_cannot_start_exits_127() -> None:
    code, _, err = run_launch(["/nonexistent/meshcomm-test-program"], 2)
    assert code == 127
    assert "cannot start rank 0" in err and "No such file" in err


def test_launch_rejects_a_bare_string_command() -> None:
    with pytest.raises(TypeError, match="cmd must be a non-empty list of str"):
        launch("python script.py", 1)


def test_success_of_every_rank_exits_zero_and_reports_nothing() -> None:
    code, out, err = run_launch([sys.executable, "-c", "pass"], 3)
    assert (code, out, err) == (0, "", "")


@pytest.mark.parametrize("forced", [False, True])
def test_a_job_without_the_compiled_path_says_so_once_unless_the_user_chose_it(monkeypatch, forced: bool) -> None:
    from meshcomm import native

    # as where no compiler built the extension
    monkeypatch.setattr(native, "core", None)
    monkeypatch.setattr(native, "_built", None)
    monkeypatch.setattr(native, "_WHY_NOT", "the compiled extension meshcomm.native._core is not built")
    if forced:
        monkeypatch.setenv("MESHCOMM_NATIVE", "0")
    else:
        monkeypatch.delenv("MESHCOMM_NATIVE", raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert launch([sys.executable, "-c", "pass"], 2, stdout=out, stderr=err) == 0
    assert err.getvalue().count(PATH_NOTE) == (0 if forced else 1), err.getvalue()


KILLED_HOLDING_A_SEGMENT = """
    import os, signal, time
    from meshcomm.transport import shm
    if os.environ["RANK"] == "1":
        path = os.path.join(shm.DIRECTORY, shm.segment_name(os.environ["MESHCOMM_JOB_ID"], 1)) + "-stale"
        with open(path, "wb") as f:
            f.write(b"x")
        print(path, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)
"""


def test_segments_of_killed_ranks_are_removed_by_the_launcher(script: Callable[[str, str], str]) -> None:
    # Ranks unlink their segments once mapped; one killed earlier leaves its
    # segment behind, named after the job, and the launcher removes it.
    code, out, _ = run_launch(python_script_command(script("stale.py", KILLED_HOLDING_A_SEGMENT), []), 2,
                              prefix=False, grace=5)
    paths = out.split()
    assert code == 128 + signal.SIGKILL
    assert len(paths) == 1 and paths[0].startswith("/dev/shm/meshcomm-")
    assert not os.path.exists(paths[0])


CARRY_ON = """
    import os, signal, sys, time
    rank = int(os.environ["RANK"])
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == 2 and len(sys.argv) > 1:
        sys.exit(int(sys.argv[1]))
    time.sleep(1.0)  # long enough for the launcher to see rank 1 go first
    print(f"rank {rank} finished")
"""


def test_with_carry_on_a_killed_rank_is_reported_and_the_others_finish(script) -> None:
    code, out, err = run_launch(python_script_command(script("carry.py", CARRY_ON)), 3, carry_on=True)
    assert code == 0, err
    assert sorted(re.findall(r"rank (\d) finished", out)) == ["0", "2"], out
    assert "rank 1 was lost (signal SIGKILL); the others carry on" in err, err
    assert "carried on without lost rank(s) [1]" in err, err


def test_with_carry_on_a_rank_that_exits_with_an_error_still_stops_the_job(script) -> None:
    code, out, err = run_launch(python_script_command(script("carry.py", CARRY_ON), ["3"]), 3, carry_on=True)
    assert code == 3, err
    assert "rank 2 (local rank 2" in err and "failed first: exit code 3" in err, err
    assert "rank 0 finished" not in out  # stopped, not left to finish
