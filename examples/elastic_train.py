"""Elastic training: checkpoint, get killed, restart, resume, and end with the loss of an uninterrupted run.

    meshcomm run -n 2 --max-restarts 1 examples/elastic_train.py               # rank 1 dies at step 25, once
    meshcomm run -n 2 examples/elastic_train.py --kill-at 0                   # the same training, uninterrupted

Every rank fits the same linear model to its own data with SGD, the gradients
averaged by all_reduce. Rank 0 saves the weights every `--every` steps. On the
first attempt rank 1 kills itself at `--kill-at`; `meshcomm run` then stops
every rank and starts them all again with MESHCOMM_RESTART_COUNT=1, and the
ranks resume from the last checkpoint. Each step's data depends only on the
step and the rank, so the resumed run repeats the lost steps exactly.
"""

from __future__ import annotations

import argparse
import os
import signal

import numpy as np

import meshcomm as dist

FEATURES, BATCH = 8, 32


def batch(step: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1000 * step + rank)
    x = rng.standard_normal((BATCH, FEATURES))
    truth = np.arange(1, FEATURES + 1, dtype=np.float64)
    return x, x @ truth + 0.1 * rng.standard_normal(BATCH)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--every", type=int, default=10, help="checkpoint every this many steps")
    parser.add_argument("--kill-at", type=int, default=25, help="rank 1 kills itself at this step on the first "
                                                                "attempt (0: never)")
    parser.add_argument("--checkpoint", default="elastic_train.npz")
    args = parser.parse_args()

    attempt = int(os.environ.get("MESHCOMM_RESTART_COUNT", "0"))
    dist.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    if attempt == 0 and rank == 0 and os.path.exists(args.checkpoint):
        os.remove(args.checkpoint)  # an earlier job's, not this one's
    dist.barrier()

    weights, start = np.zeros(FEATURES), 1
    if attempt > 0 and os.path.exists(args.checkpoint):
        with np.load(args.checkpoint) as saved:
            weights, start = saved["weights"].copy(), int(saved["step"]) + 1
        print(f"rank {rank}: attempt {attempt} resumes at step {start}", flush=True)

    loss = np.zeros(1)
    for step in range(start, args.steps + 1):
        if attempt == 0 and step == args.kill_at and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # a crash: no goodbye, no cleanup
        x, y = batch(step, rank)
        error = x @ weights - y
        gradient = x.T @ error / BATCH
        dist.all_reduce(gradient)
        weights -= 0.05 * gradient / size
        loss[0] = float(error @ error) / BATCH
        dist.all_reduce(loss)
        if step % args.every == 0:
            if rank == 0:
                partial = f"{args.checkpoint}.partial.npz"
                np.savez(partial, weights=weights, step=step)
                os.replace(partial, args.checkpoint)  # a crash never leaves half a checkpoint
            dist.barrier()
    if rank == 0:
        print(f"final loss {loss[0] / size:.15f} after {args.steps} steps (attempt {attempt})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
