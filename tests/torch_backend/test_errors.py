"""meshcomm's failures reach torch code as exceptions: from calls, from wait(), from futures and from DDP's backward.

One 2-rank job runs every scenario (programs.error_paths); the last one
kills rank 1 between two DDP steps, and rank 0's backward must raise rather
than hang or succeed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from tests.torch_backend import harness, programs  # noqa: E402


@pytest.fixture(scope="module")
def outcome() -> list:
    # A 10 s default deadline: a scenario that wrongly waited would fail the job, not hang it.
    results = harness.run(programs.error_paths, 2, "meshcomm", init_timeout=10, may_die=frozenset({1}))
    assert results[1] is None  # rank 1 exited on purpose
    return [{**results[0]["reports"][0], "ddp_backward_peer_lost": results[0]["ddp_backward_peer_lost"]},
            results[0]["reports"][1]]


def test_mismatched_sizes_raise_on_both_ranks_naming_both_calls(outcome):
    for rank in (0, 1):
        kind, message = outcome[rank]["mismatch_sync"]
        assert kind == "CollectiveMismatchError"
        assert "4 elements" in message and "5 elements" in message


def test_async_mismatch_raises_from_wait_and_from_the_future(outcome):
    for rank in (0, 1):
        assert outcome[rank]["mismatch_async_wait"][0] == "CollectiveMismatchError"
        kind, message = outcome[rank]["mismatch_async_future"]
        assert kind == "RuntimeError" and "CollectiveMismatchError" in message
        assert outcome[rank]["mismatch_async_state"] == [True, False, "CollectiveMismatchError"]


def test_peer_that_never_arrives_times_out_with_the_groups_timeout(outcome):
    kind, message = outcome[0]["timeout"]
    assert kind == "CommTimeoutError"
    assert "1.5 s" in message


def test_peer_lost_during_ddp_backward_raises_there(outcome):
    kind, message = outcome[0]["ddp_backward_peer_lost"]
    # Raised from a Work torch waits on in C++ (a RuntimeError wrapping it), or, when the forward's
    # bucket-index broadcast on the board already finds rank 1 gone, as itself.
    assert kind == "PeerLostError" or (kind == "RuntimeError" and "PeerLostError" in message)
    assert "connection to rank 1" in message
