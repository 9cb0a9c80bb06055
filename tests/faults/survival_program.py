"""One rank of a job that loses ranks and carries on: shrink, agree or revoke.

    python survival_program.py SCENARIO VICTIMS [LATER_VICTIMS]

Ranks are plain processes (tests.ranks.run_program); rank 0 serves the store, and may be a victim. VICTIMS kill
themselves (SIGKILL) after the first all_reduce. Scenarios:
- shrink: the survivors run all_reduce until one fails, shrink, and check their new group's results against
  numpy; LATER_VICTIMS (old ranks) then die too and the survivors shrink a second time.
- coordinator: as shrink, but the lowest survivor kills itself right after it decides, so the next lowest must
  take over and every remaining survivor still gets the same group.
- agree: the survivors agree on (old rank != 1) without shrinking.
- revoke: no victims die; rank 1 revokes the world while the others wait in an all_reduce it never joins.
- stale: before the loss, rank 1 sends rank 0 a message (tag 7) that is never received; after the shrink it sends
  another with the same tag, and rank 0 must receive the new one, never the old.
Every surviving rank prints one line `RESULT {json}`.
"""

import json
import os
import signal
import sys

import numpy as np

import meshcomm as dist
from meshcomm.rendezvous import lifeline

scenario = sys.argv[1]
victims = {int(v) for v in sys.argv[2].split(",") if v}
later = {int(v) for v in sys.argv[3].split(",") if v} if len(sys.argv) > 3 else set()

dist.init_process_group(timeout=60)
old_rank, old_size = dist.get_rank(), dist.get_world_size()
x = np.full(3, old_rank + 1.0)
dist.all_reduce(x)
assert x[0] == old_size * (old_size + 1) / 2


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def until_failure() -> str:
    """all_reduce until a lost rank fails one; the error's class name."""
    for _ in range(2000):
        try:
            y = np.ones(2)
            dist.all_reduce(y)
        except dist.MeshcommError as exc:
            return type(exc).__name__
    return "none"


def checked_round(error: str, survivors_before: list[int], gone: set[int]) -> dict:
    """Shrink, then prove the new group: ranks in old order, exact sums, and every member's old rank."""
    world = dist.shrink()
    rank, size = dist.get_rank(), dist.get_world_size()
    members = [r for r in survivors_before if r not in gone]
    gathered = [np.empty(1, dtype=np.int64) for _ in range(size)]
    dist.all_gather(gathered, np.array([old_rank], dtype=np.int64))
    values = np.arange(5, dtype=np.float64) * (old_rank + 1)
    dist.all_reduce(values)
    expected = np.arange(5, dtype=np.float64) * sum(m + 1 for m in members)
    return {"error": error, "rank": rank, "size": size, "order": [int(g[0]) for g in gathered],
            "exact": bool(np.array_equal(values, expected)), "expected_members": members,
            "world_ranks": list(world.ranks)}


if scenario == "stale" and old_rank == 1:
    dist.isend(np.full(4, -1.0), dst=0, tag=7)  # never received in the old group
    dist.barrier()
elif scenario == "stale":
    dist.barrier()
if old_rank in victims:
    die()

result: dict = {"old_rank": old_rank}
if scenario in ("shrink", "coordinator"):
    if scenario == "coordinator" and old_rank == min(set(range(old_size)) - victims):
        original = lifeline.Lifeline.record

        def record_then_die(self, key, value):
            original(self, key, value)
            if key.endswith("/decided"):
                die()  # the coordinator dies right after deciding: another must take over

        lifeline.Lifeline.record = record_then_die
    error = until_failure()
    gone = set(victims) | ({min(set(range(old_size)) - victims)} if scenario == "coordinator" else set())
    result["first"] = checked_round(error, list(range(old_size)), gone)
    if later:
        if old_rank in later:
            die()
        error = until_failure()
        result["second"] = checked_round(error, result["first"]["expected_members"], later)
elif scenario == "agree":
    error = until_failure()
    result["error"] = error
    result["flag"] = dist.agree(old_rank != 1)
    result["again"] = dist.agree(True)
    result["failed"] = dist.failed_ranks()
    dist.agree(True)  # nobody leaves (and looks gone) before every survivor has looked
elif scenario == "stale":
    result["error"] = until_failure()
    dist.shrink()
    if old_rank == 1:
        dist.send(np.full(4, float(dist.get_world_size())), dst=0, tag=7)
    elif old_rank == 0:
        got = np.zeros(4)
        dist.recv(got, src=1 if 1 not in victims else None, tag=7)
        result["received"] = got.tolist()
    dist.barrier()
elif scenario == "revoke":
    if old_rank == 1:
        dist.revoke(reason="test")
        result["revoked"] = dist.is_revoked()
    else:
        try:
            dist.all_reduce(np.ones(2))
            result["error"] = "none"
        except dist.MeshcommError as exc:
            result["error"] = type(exc).__name__
            result["message"] = str(exc)[:300]
        result["revoked"] = dist.is_revoked()
print("RESULT " + json.dumps(result), flush=True)
