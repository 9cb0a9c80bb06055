"""Run on every rank of a several-host job: collectives across hosts, checked against numpy.

Prints one line `RESULT {json}` per rank: the shared-memory peers its
transport chose and how many checks passed. Any wrong value raises, which
fails the rank and so the job.
"""

from __future__ import annotations

import json
import os

import numpy as np

import meshcomm as dist


def main() -> None:
    dist.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    local = int(os.environ["LOCAL_WORLD_SIZE"])
    host = rank // local
    checks = 0

    def expect(got, want, what: str) -> None:
        nonlocal checks
        if not np.array_equal(got, want):
            raise AssertionError(f"rank {rank}: {what}: got {got.ravel()[:6]}, want {np.asarray(want).ravel()[:6]}")
        checks += 1

    inputs = [np.arange(4096, dtype=np.float64) * (r + 1) for r in range(size)]
    for algorithm in (None, "ring", "recursive_doubling", "rabenseifner", "double_binary_tree", "hierarchical"):
        x = inputs[rank].copy()
        dist.all_reduce(x, algorithm=algorithm)
        expect(x, sum(inputs), f"all_reduce {algorithm}")

    for algorithm in (None, "binomial", "hierarchical"):
        x = inputs[rank].copy()
        dist.broadcast(x, src=size - 1, algorithm=algorithm)  # from the last host
        expect(x, inputs[size - 1], f"broadcast {algorithm}")

    for algorithm in (None, "ring", "hierarchical"):
        out = np.empty((size, 16), dtype=np.int32)
        dist.all_gather_into_tensor(out, np.full(16, rank, dtype=np.int32), algorithm=algorithm)
        expect(out, np.repeat(np.arange(size, dtype=np.int32)[:, None], 16, axis=1), f"all_gather {algorithm}")

        out = np.empty(8, dtype=np.float32)
        dist.reduce_scatter_tensor(out, np.arange(8 * size, dtype=np.float32) + rank, algorithm=algorithm)
        expect(out, sum(np.arange(8 * size, dtype=np.float32)[8 * rank:8 * rank + 8] + r for r in range(size)),
               f"reduce_scatter {algorithm}")

    # Uneven all_to_all: rank r sends j + 1 elements to rank j, each valued 100 r + j.
    send = np.concatenate([np.full(j + 1, 100 * rank + j, dtype=np.int64) for j in range(size)])
    recv = np.empty((rank + 1) * size, dtype=np.int64)
    dist.all_to_all_single(recv, send, [rank + 1] * size, [j + 1 for j in range(size)])
    expect(recv, np.concatenate([np.full(rank + 1, 100 * s + rank) for s in range(size)]), "all_to_all uneven")

    # Point to point from each host to the next, 1 MiB.
    peer_next, peer_prev = (rank + local) % size, (rank - local) % size
    payload = np.full(1 << 17, rank, dtype=np.float64)
    got = np.empty_like(payload)
    ops = [dist.P2POp(dist.isend, payload, peer_next), dist.P2POp(dist.irecv, got, peer_prev)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    expect(got, np.full_like(got, peer_prev), "send/recv to the next host")

    # A group per host, and a group of the first rank of each host.
    hosts = [list(range(h * local, (h + 1) * local)) for h in range(size // local)]
    per_host = dist.new_subgroups_by_enumeration(hosts)[0]
    x = np.array([rank], dtype=np.int64)
    dist.all_reduce(x, group=per_host)
    expect(x, [sum(hosts[host])], "all_reduce in the host's group")
    leaders = dist.new_group([h[0] for h in hosts])
    if rank % local == 0:
        x = np.array([rank], dtype=np.int64)
        dist.all_reduce(x, group=leaders)
        expect(x, [sum(h[0] for h in hosts)], "all_reduce among host leaders")

    from meshcomm.api.state import runtime

    shm_peers = sorted(state.rank for state in runtime().transport._shm_peers)
    dist.barrier()
    print("RESULT " + json.dumps({"rank": rank, "host": host, "shm_peers": shm_peers, "checks": checks}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
