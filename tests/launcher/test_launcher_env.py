"""The environment every rank receives, and the checks on a job's layout."""

from __future__ import annotations

import socket

import pytest

from meshcomm import config
from meshcomm.launcher import JobLayout, child_environ, free_port, make_layout, rank_variables, resolve_token


def layout(**overrides: object) -> JobLayout:
    fields: dict[str, object] = {"nproc": 4, "master_port": 29500, "token": "secret"}
    fields.update(overrides)
    return JobLayout(**fields)  # type: ignore[arg-type]


def test_rank_variables_carry_torchrun_and_meshcomm_names() -> None:
    env = rank_variables(layout(nnodes=2, node_rank=1, master_addr="10.0.0.1"), local_rank=2)
    assert env["RANK"] == env["MESHCOMM_RANK"] == "6"
    assert env["LOCAL_RANK"] == env["MESHCOMM_LOCAL_RANK"] == "2"
    assert env["WORLD_SIZE"] == env["MESHCOMM_WORLD_SIZE"] == "8"
    assert env["LOCAL_WORLD_SIZE"] == env["MESHCOMM_LOCAL_WORLD_SIZE"] == "4"
    assert env["GROUP_RANK"] == env["NODE_RANK"] == "1"
    assert env["MASTER_ADDR"] == env["MESHCOMM_MASTER_ADDR"] == "10.0.0.1"
    assert env["MASTER_PORT"] == env["MESHCOMM_MASTER_PORT"] == "29500"
    assert env["MESHCOMM_TOKEN"] == "secret"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert "MESHCOMM_TIMEOUT" not in env and "MESHCOMM_HOST_ID" not in env


def test_timeout_and_host_id_are_passed_when_given() -> None:
    env = rank_variables(layout(timeout=12.5, host_id="fake-a"), local_rank=0)
    assert env["MESHCOMM_TIMEOUT"] == "12.5"
    assert env["MESHCOMM_HOST_ID"] == "fake-a"


def test_every_meshcomm_variable_the_launcher_sets_is_documented_in_config() -> None:
    env = rank_variables(layout(timeout=1, host_id="h"), local_rank=0)
    undocumented = [name for name in env if name.startswith("MESHCOMM_") and name not in config.VARIABLES]
    assert undocumented == []
    assert "MESHCOMM_KILL_GRACE" in config.VARIABLES


def test_rank_variables_win_over_base_and_env_extra() -> None:
    env = child_environ({"RANK": "99", "KEEP": "1"}, layout(), 1, env_extra={"RANK": "98", "EXTRA": "2"})
    assert env["RANK"] == "1" and env["KEEP"] == "1" and env["EXTRA"] == "2"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"nproc": 0}, "nproc must be >= 1, got 0"),
        ({"nnodes": 0}, "nnodes must be >= 1, got 0"),
        ({"nnodes": 2, "node_rank": 2}, r"node_rank must be in \[0, 2\), got 2"),
        ({"master_port": 0}, r"master_port must be in \[1, 65535\], got 0"),
        ({"timeout": 0.0}, "timeout must be > 0 seconds, got 0.0"),
    ],
)
def test_bad_layout_names_the_argument_and_rule(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        layout(**overrides)


def test_one_host_job_without_token_gets_a_fresh_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MESHCOMM_TOKEN", raising=False)
    first, second = resolve_token(1), resolve_token(1)
    assert first != second and len(first) == 64 and int(first, 16) >= 0


def test_token_from_environment_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESHCOMM_TOKEN", "shared")
    assert resolve_token(3) == "shared"
    assert resolve_token(3, env_extra={"MESHCOMM_TOKEN": "extra"}) == "extra"


def test_several_hosts_without_token_tell_the_user_to_export_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MESHCOMM_TOKEN", raising=False)
    with pytest.raises(ValueError, match="export the same MESHCOMM_TOKEN on every node"):
        resolve_token(2)


def test_make_layout_picks_a_free_port_for_one_host_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESHCOMM_TOKEN", "t")
    assert 1 <= make_layout(2).master_port <= 65535
    with pytest.raises(ValueError, match="master_port is required when nnodes > 1"):
        make_layout(2, nnodes=2)
    assert make_layout(2, nnodes=2, master_port=4321).master_port == 4321


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_public_api_is_exactly_all() -> None:
    from meshcomm import launcher

    public = {name for name in vars(launcher) if not name.startswith("_")}
    modules = {"env", "job", "output", "ports", "process", "report"}
    assert public - modules == set(launcher.__all__)
    assert all(hasattr(launcher, name) for name in launcher.__all__)
