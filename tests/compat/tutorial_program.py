"""Tutorial-shaped torch.distributed code, run with either library behind `dist`: the places where the two differed.

    python tutorial_program.py torch|meshcomm OUT_DIR

Three ranks spawned with torch.multiprocessing, MASTER_ADDR/MASTER_PORT set.
Each rank: builds a device mesh *before* any init_process_group (the default
group comes from the environment, as torch does it), reaches it as
`dist.device_mesh.init_device_mesh`, then runs every collective and
point-to-point call on a group of ranks 0 and 1 (rank 2 outside it: the call
warns and does nothing), and writes what it saw to OUT_DIR/rank<r>.json.
"""

import json
import os
import sys
import warnings

import torch
import torch.multiprocessing as mp

if sys.argv[1] == "torch":
    import torch.distributed as dist
    import torch.distributed.device_mesh  # noqa: F401 (torch's submodule; meshcomm's is an attribute)
else:
    import meshcomm as dist

WORLD = 3


def calls(rank, g):
    """Each call on group g (ranks 0 and 1): (name, the call, what it left behind)."""
    def t(value):
        return torch.full((4,), float(value))

    b = t(rank)
    yield "broadcast", lambda: dist.broadcast(b, src=1, group=g), lambda: b
    a = t(rank + 1)
    yield "all_reduce", lambda: dist.all_reduce(a, group=g), lambda: a
    r = t(rank + 1)
    yield "reduce", lambda: dist.reduce(r, dst=0, group=g), lambda: r if rank == 0 else None
    outs = [t(-1) for _ in range(2)]
    yield "all_gather", lambda: dist.all_gather(outs, t(rank), group=g), lambda: outs
    gathered = [t(-1) for _ in range(2)] if rank == 0 else None
    yield "gather", lambda: dist.gather(t(rank), gathered, dst=0, group=g), lambda: gathered
    got = t(-1)
    yield "scatter", lambda: dist.scatter(got, [t(10), t(11)] if rank == 0 else None, src=0, group=g), lambda: got
    into = [t(-1) for _ in range(2)]
    yield "all_to_all", lambda: dist.all_to_all(into, [t(rank * 10), t(rank * 10 + 1)], group=g), lambda: into
    yield "barrier", lambda: dist.barrier(group=g), lambda: None
    gathered_objects = [None, None]
    yield "all_gather_object", lambda: dist.all_gather_object(gathered_objects, {"r": rank}, group=g), \
        lambda: gathered_objects
    objects = [{"from": 0}] if rank == 0 else [None]
    yield "broadcast_object_list", lambda: dist.broadcast_object_list(objects, src=0, group=g), lambda: objects


def run(rank, out_dir):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank))
    out = {"initialized_before": dist.is_initialized()}
    mesh = dist.device_mesh.init_device_mesh("cpu", (WORLD,))
    out["initialized_after_mesh"] = dist.is_initialized()
    out["mesh_rank"] = [dist.get_rank(), mesh.get_coordinate()]
    g = dist.new_group(ranks=[0, 1])
    for name, call, result in calls(rank, g):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returned = call()
        seen = result()
        if isinstance(seen, torch.Tensor):
            seen = seen.tolist()
        elif isinstance(seen, list):
            seen = [s.tolist() if isinstance(s, torch.Tensor) else s for s in seen]
        out[name] = {"returned": None if returned is None else type(returned).__name__, "result": seen,
                     "warnings": [str(w.message) for w in caught if "does not belong" in str(w.message)]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if rank == 0:
            dist.send(torch.ones(2), dst=1, group=g)
            out["recv"] = None
        else:
            out["recv"] = dist.recv(torch.zeros(2), src=0, group=g)
    out["p2p_warnings"] = [str(w.message) for w in caught if "does not belong" in str(w.message)]
    dist.barrier()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f, sort_keys=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    mp.spawn(run, args=(sys.argv[2],), nprocs=WORLD, join=True)
