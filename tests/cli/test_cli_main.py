"""The `meshcomm` entry point: registry, help, version, the store subcommand."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import types
from importlib import metadata

import pytest

from meshcomm.cli.main import SUBCOMMANDS, main
from tests.ranks import fresh_job_env, run_meshcomm, started


def test_every_registered_subcommand_module_has_add_arguments_and_run() -> None:
    assert {"run", "store"} <= set(SUBCOMMANDS)
    for name, (help_text, module_name) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        assert help_text and callable(module.add_arguments) and callable(module.run), name


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out
    assert "usage: meshcomm" in out


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"meshcomm {metadata.version('meshcomm')}"


def test_no_subcommand_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_unknown_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_carrying_on_and_restarting_are_alternatives(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "-n", "2", "--on-failure", "continue", "--max-restarts", "1", "prog.py"]) == 2
    assert "--on-failure continue and --max-restarts are alternatives" in capsys.readouterr().err


def test_console_script_points_at_main() -> None:
    scripts = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts")}
    assert scripts.get("meshcomm") == "meshcomm.cli.main:main"


def test_python_dash_m_meshcomm_runs_the_cli() -> None:
    done = run_meshcomm("--help", timeout=60)
    assert done.returncode == 0 and "run" in done.stdout and "store" in done.stdout


def test_importing_the_cli_does_not_import_the_launcher() -> None:
    code = "import sys, meshcomm.cli.main; print('meshcomm.launcher' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False"


def fake_store_server(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    calls: list[tuple[object, ...]] = []
    module = types.ModuleType("meshcomm.rendezvous.store_server")
    module.run_store_server = lambda host, port, token: calls.append((host, port, token))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "meshcomm.rendezvous.store_server", module)
    return calls


def test_store_serves_with_the_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_store_server(monkeypatch)
    monkeypatch.setenv("MESHCOMM_TOKEN", "job-secret")
    assert main(["store", "--port", "29400"]) == 0
    assert calls == [("0.0.0.0", 29400, b"job-secret")]
    assert main(["store", "--host", "127.0.0.1", "--port", "29401"]) == 0
    assert calls[-1] == ("127.0.0.1", 29401, b"job-secret")


def test_store_without_token_passes_an_empty_one(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_store_server(monkeypatch)
    monkeypatch.delenv("MESHCOMM_TOKEN", raising=False)
    assert main(["store", "--port", "29400"]) == 0
    assert calls == [("0.0.0.0", 29400, b"")]


def test_store_subcommand_serves_real_clients_until_interrupted() -> None:
    from meshcomm.launcher import free_port
    from meshcomm.rendezvous import TCPStore

    port = free_port()
    # A shell that starts a job in the background without job control has it ignore
    # SIGINT, and children inherit that; the store must see Ctrl-C as a terminal sends it.
    with started([sys.executable, "-m", "meshcomm", "store", "--host", "127.0.0.1", "--port", str(port)],
                 env=fresh_job_env({"MESHCOMM_TOKEN": "cli-secret"}), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as proc:
        with TCPStore("127.0.0.1", port, timeout=20, token=b"cli-secret") as client:
            client.set("k", b"v")
            assert client.get("k", timeout=5) == b"v"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["store"], "the following arguments are required: --port"),
        (["store", "--port", "70000"], "argument --port: must be <= 65535, got 70000"),
        (["store", "--port", "x"], "argument --port: must be an integer, got 'x'"),
        (["store", "--port", "0"], "argument --port: must be >= 1, got 0"),
    ],
)
def test_store_argument_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_reader_that_leaves_ends_the_command_as_sigpipe_would_without_a_traceback() -> None:
    """`meshcomm sim ... | head -1`: the table's reader is gone before the first row."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = run_meshcomm("sim", "broadcast", "-n", "2,4", "--sizes", "8,1K", stdout=write_end, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE
    assert done.stderr == ""
