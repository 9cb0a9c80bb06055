"""A rank killed with SIGKILL: its peers raise PeerLostError naming it, well before any timeout.

Two plain processes (no launcher, which would stop the survivor itself) meet
through rank 0's store; rank 1 kills itself while rank 0 waits on it. The
deadline is 120 s, so a PeerLostError (not a CommTimeoutError) shows the loss
was noticed from the connection, not from the clock.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.ranks import Exit, run_program

SURVIVOR_AND_VICTIM = textwrap.dedent(
    """
    import os, signal, sys, time
    import numpy as np
    import meshcomm as dist

    mode = sys.argv[1]
    dist.init_process_group(timeout=120)
    rank = dist.get_rank()
    dist.barrier()
    if rank == 1:
        if mode == "mid_all_reduce":
            # Send part of a large all_reduce, then die holding the rest.
            dist.isend(np.ones(4 << 20, np.float32), dst=0, tag=5)
            time.sleep(0.2)
        elif mode == "sender_dies_before_its_message_is_read":
            # 4 MiB to a rank of this host go by reference: the bytes die with the sender.
            dist.isend(np.ones(1 << 20, np.float32), dst=0, tag=6)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        if mode == "recv":
            dist.recv(np.zeros(4), src=1)
        elif mode == "sender_dies_before_its_message_is_read":
            time.sleep(0.5)
            dist.recv(np.zeros(1 << 20, np.float32), src=1, tag=6)
        elif mode == "receiver_dies_before_reading":
            dist.send(np.ones(1 << 20, np.float32), dst=1, tag=7)
        else:
            dist.all_reduce(np.ones(4 << 20, np.float32))
        print("no error")
    except dist.PeerLostError as exc:
        print(f"PeerLostError peer={exc.peer} after {time.monotonic() - start:.2f} s: {exc}")
    except dist.MeshcommError as exc:
        print(f"{type(exc).__name__}: {exc}")
    """
)


def run_pair(tmp_path, source: str, args: list[str], transport: str) -> list[Exit]:
    """Run `source` as ranks 0 and 1 meeting through rank 0's store (tests.ranks.run_program); both are reaped."""
    script = tmp_path / "job.py"
    script.write_text(source)
    return run_program(script, 2, args, env={"MESHCOMM_TOKEN": "pair-test", "MESHCOMM_TRANSPORT": transport},
                       timeout=90)


@pytest.mark.parametrize("transport", ["auto", "tcp"])
@pytest.mark.parametrize("mode", ["recv", "mid_all_reduce"])
def test_survivor_names_the_killed_rank(tmp_path, transport: str, mode: str) -> None:
    survivor, victim = run_pair(tmp_path, SURVIVOR_AND_VICTIM, [mode], transport)
    assert victim.returncode == -9 and not victim.timed_out
    assert survivor.stdout.startswith("PeerLostError peer=1 "), survivor.output
    print(survivor.stdout)


@pytest.mark.parametrize("mode", ["sender_dies_before_its_message_is_read", "receiver_dies_before_reading"])
def test_a_message_sent_by_reference_fails_when_either_end_dies(tmp_path, mode: str) -> None:
    """Shared memory only: over TCP the kernel's buffers may hold the whole message, so both could succeed."""
    survivor, victim = run_pair(tmp_path, SURVIVOR_AND_VICTIM, [mode], "auto")
    assert victim.returncode == -9 and not victim.timed_out
    assert survivor.stdout.startswith("PeerLostError peer=1 "), survivor.output
    print(survivor.stdout)


SENDER_THAT_LEAVES = textwrap.dedent(
    """
    import time
    import numpy as np
    import meshcomm as dist
    from meshcomm.api.state import runtime
    from meshcomm.transport import engine

    # Messages with no receive posted stay in their ring until the sender is
    # seen to leave: only reading them out at that moment can save them.
    engine._HOLD_SECONDS = 3600
    dist.init_process_group(timeout=60)
    rank = dist.get_rank()
    dist.barrier()
    if rank == 1:
        dist.send(np.arange(1000, dtype=np.int64), dst=0, tag=3)
        dist.destroy_process_group()
        raise SystemExit(0)
    # Post the receive only once this rank has seen rank 1's connection close.
    transport = runtime().transport
    deadline = time.monotonic() + 30
    while transport._peers[1].lost is None and time.monotonic() < deadline:
        transport.progress(0.01)
    got = np.zeros(1000, dtype=np.int64)
    dist.recv(got, src=1, tag=3)
    print("received", bool((got == np.arange(1000)).all()))
    """
)


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_a_message_sent_before_the_sender_left_is_still_received(tmp_path, transport: str) -> None:
    survivor, _ = run_pair(tmp_path, SENDER_THAT_LEAVES, [], transport)
    assert survivor.stdout.strip() == "received True", survivor.output
