"""Carrying on after lost ranks: shrink, agree and revoke in real jobs (tests/faults/survival_program.py).

Ranks are plain processes bounded by tests.ranks.run_program (killed and reaped at its deadline). A hang shows
as a rank that timed out; nothing here asserts a time (benchmarks/survival_soak.py measures them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.ranks import run_command, run_program

PROGRAM = Path(__file__).with_name("survival_program.py")
SOAK = Path(__file__).resolve().parents[2] / "benchmarks" / "shrink_soak.py"


def results(nranks: int, *args: str, dead: set[int]) -> dict[int, dict]:
    exits = run_program(PROGRAM, nranks, args, timeout=90)
    found = {}
    for rank, done in enumerate(exits):
        assert not done.timed_out, f"rank {rank} hung:\n{done.output[-3000:]}"
        if rank in dead:
            assert done.returncode == -9, f"rank {rank} was to die, exited {done.returncode}:\n{done.output[-2000:]}"
            continue
        assert done.returncode == 0, f"rank {rank} exited {done.returncode}:\n{done.output[-3000:]}"
        line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
        found[rank] = json.loads(line[len("RESULT "):])
    return found


def test_a_coordinator_gone_in_the_handshake_is_a_lost_peer_that_shrink_agrees_again_without(monkeypatch) -> None:
    """The coordinator exiting while a survivor connects resets the store's handshake, which the store client reports
    as a refusal; among survivors of one token it is the coordinator gone (as lifeline.connect reads it)."""
    from types import SimpleNamespace

    from meshcomm.errors import AuthenticationError, PeerLostError
    from meshcomm.group import survival
    from meshcomm.rendezvous import agreement

    def refused(*args, **kwargs):
        raise AuthenticationError("the store at 127.0.0.1:9 refused the connection: connection failed during "
                                  "handshake: [Errno 104] Connection reset by peer")

    monkeypatch.setattr(survival, "TCPStore", refused)
    runtime = SimpleNamespace(rank=3, token=b"t", joins_jobs=False, lifelines=[f"127.0.0.1:{9 + r}" for r in range(4)])
    group = SimpleNamespace(runtime=runtime, ranks=(0, 1, 2, 3), rank=3)
    decision = agreement.Decision(alive=(1, 2, 3), gone=(0,), coordinator=1, flag=1)
    with pytest.raises(PeerLostError, match="coordinator, rank 1, went during the handshake") as lost:
        survival._build(group, decision, "shrink/0", deadline=0.0)
    assert lost.value.peer == 1


def check_round(found: dict[int, dict], name: str, members: list[int], lost: bool = True) -> None:
    """Every survivor saw the loss (or, with `lost` False, shrank a whole group) and got the same new group."""
    for old, result in found.items():
        r = result[name]
        assert r["error"] in (("PeerLostError", "AbortedError") if lost else ("none",)), r
        assert r["size"] == len(members) and r["rank"] == members.index(old), r
        assert r["order"] == members, r  # the new ranks keep the old order
        assert r["exact"], r


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nranks, victims", [(3, "0"), (3, "2"), (4, "1,2"), (5, "0,3")])
def test_survivors_shrink_to_the_same_group_and_compute_exactly(nranks, victims) -> None:
    dead = {int(v) for v in victims.split(",")}
    found = results(nranks, "shrink", victims, dead=dead)
    check_round(found, "first", [r for r in range(nranks) if r not in dead])


@pytest.mark.timeout(150)
def test_a_group_shrinks_again_after_a_second_loss() -> None:
    found = results(5, "shrink", "1", "0,4", dead={0, 1, 4})
    assert set(found) == {2, 3}
    for old, result in found.items():
        assert result["first"]["size"] == 4 and result["first"]["order"] == [0, 2, 3, 4] and result["first"]["exact"]
    check_round(found, "second", [2, 3])


@pytest.mark.timeout(150)
@pytest.mark.parametrize("nranks, victims", [(4, "0"), (3, "")])
def test_a_coordinator_that_dies_after_deciding_is_replaced_and_every_survivor_agrees(nranks, victims) -> None:
    dead = {int(v) for v in victims.split(",") if v}
    coordinator = min(set(range(nranks)) - dead)
    found = results(nranks, "coordinator", victims, dead=dead | {coordinator})
    check_round(found, "first", [r for r in range(nranks) if r not in dead | {coordinator}], lost=bool(dead))


@pytest.mark.timeout(120)
def test_agree_ands_the_survivors_flags_and_names_the_dead() -> None:
    found = results(4, "agree", "3", dead={3})
    assert {r["flag"] for r in found.values()} == {False}  # rank 1 said False
    assert all(r["again"] is True and r["failed"] == [3] for r in found.values()), found


@pytest.mark.timeout(120)
def test_no_message_of_the_old_group_is_received_in_the_new_one() -> None:
    found = results(4, "stale", "3", dead={3})
    assert found[0]["received"] == [3.0] * 4, found[0]  # the new message, sent after the shrink to 3 ranks


@pytest.mark.timeout(120)
def test_revoke_fails_the_others_pending_call_at_once() -> None:
    found = results(3, "revoke", "", dead=set())
    assert found[1]["revoked"] is True
    for rank in (0, 2):
        assert found[rank]["error"] == "RevokedError" and "revoked by rank 1" in found[rank]["message"], found[rank]
        assert found[rank]["revoked"] is True


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_soak_eight_ranks_lose_one_at_a_time_down_to_two_with_every_result_exact() -> None:
    """benchmarks/shrink_soak.py, bounded: it fails on a wrong result, a hang or a survivor that did not finish."""
    done = run_command([sys.executable, str(SOAK), "-n", "8", "--min", "2", "--seconds", "20", "--kill-every", "2"],
                       timeout=150)
    assert done.returncode == 0 and not done.timed_out, done.output[-4000:]
    assert "6 kills" in done.stdout and "0 wrong, 0 hangs, 0 failed survivors" in done.stdout, done.stdout
