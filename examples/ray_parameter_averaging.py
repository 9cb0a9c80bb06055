"""Four Ray actors fit one linear model, each on its own shard of the data, averaging their parameters each step.

    pip install ".[ray]" && python examples/ray_parameter_averaging.py

The averaging is `ray.util.collective.allreduce` on the "MESHCOMM" backend:
meshcomm.ray.create_group makes the four actors one meshcomm group. With
--address, it joins a running Ray cluster instead of starting one on this
host (loopback only).
"""

from __future__ import annotations

import argparse

import numpy as np
import ray
from ray.util import collective

import meshcomm.ray

FEATURES, ROWS_PER_ACTOR, STEPS, LEARNING_RATE = 8, 256, 20, 0.1


def shard(rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Actor `rank`'s rows of a regression problem whose true weights are 1, 2, ..., FEATURES."""
    rows = np.random.default_rng(rank).normal(size=(ROWS_PER_ACTOR, FEATURES))
    return rows, rows @ np.arange(1.0, FEATURES + 1)


@ray.remote(num_cpus=0)
class Trainer:
    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size
        self.x, self.y = shard(rank)
        self.weights = np.zeros(FEATURES)

    def step(self) -> float:
        """One gradient step on this actor's shard, then the average of every actor's weights."""
        error = self.x @ self.weights - self.y
        self.weights -= LEARNING_RATE * (self.x.T @ error) / len(self.y)
        collective.allreduce(self.weights, group_name="params")
        self.weights /= self.world_size
        return float(np.mean(error ** 2))

    def weights_now(self) -> np.ndarray:
        return self.weights


def the_same_in_one_process(world_size: int) -> np.ndarray:
    """What the actors must end with: the same steps and averages, computed here with numpy alone."""
    shards = [shard(r) for r in range(world_size)]
    weights = np.zeros(FEATURES)
    for _ in range(STEPS):
        stepped = [weights - LEARNING_RATE * (x.T @ (x @ weights - y)) / len(y) for x, y in shards]
        weights = sum(stepped) / world_size
    return weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="a running Ray cluster to join (default: start one on this host)")
    parser.add_argument("--actors", type=int, default=4)
    args = parser.parse_args()
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.actors, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    meshcomm.ray.register()
    trainers = [Trainer.remote(rank, args.actors) for rank in range(args.actors)]
    meshcomm.ray.create_group(trainers, group_name="params")
    for step in range(STEPS):
        losses = ray.get([t.step.remote() for t in trainers])
        if step % 5 == 0 or step == STEPS - 1:
            print(f"step {step:2d}: mean squared error per actor {', '.join(f'{loss:8.3f}' for loss in losses)}")
    final = ray.get([t.weights_now.remote() for t in trainers])
    expected = the_same_in_one_process(args.actors)
    print("weights on actor 0:", np.round(final[0], 3))
    print("every actor holds the same weights:", all(np.array_equal(w, final[0]) for w in final))
    print("equal to the same steps in one process (within 1e-12):", bool(np.allclose(final[0], expected, atol=1e-12,
                                                                                       rtol=0)))
    meshcomm.ray.destroy_group(trainers, "params")
    ray.shutdown()


if __name__ == "__main__":
    main()
