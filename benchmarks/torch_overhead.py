"""What the torch backend adds: per call, and per DDP step. Run by itself; it starts its ranks.

    python benchmarks/torch_overhead.py calls --rounds 5     # 1-element all_reduce: "meshcomm" process group vs meshcomm's
                                                             # API on its group, in alternating blocks of one job
    python benchmarks/torch_overhead.py ddp --rounds 3       # DDP step on the 25 M-parameter MLP vs 1 rank, 2 ranks
                                                             # without DDP, and a bare all_reduce

Rounds alternate the variants (interleaved); each prints medians with ranges over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from rounds import alternating_blocks, at_least_three, job_result, spread

LAYERS = (2048, 4096, 4096, 1024, 10)  # 25 M parameters: 100 MB of float32 gradients per step
BLOCKS = 8  # of each call, alternating, in one job


def _rank_calls(iters: int) -> None:
    """Both calls in one job, in alternating blocks: the processes' speed, which drifts from one job to the next on
    a shared machine, is the same for both sides of each block's ratio."""
    import torch
    import torch.distributed as dist

    import meshcomm

    torch.set_num_threads(1)
    tensor = torch.zeros(1)
    dist.init_process_group("meshcomm")
    group = dist.group.WORLD.meshcomm_group  # the same ranks, through meshcomm's own API
    calls = {"torch-backend": lambda: dist.all_reduce(tensor),
             "meshcomm-api": lambda: meshcomm.all_reduce(tensor, group=group)}
    seconds = alternating_blocks(calls, iters, BLOCKS, lambda: meshcomm.barrier(group=group))
    if dist.get_rank() == 0:
        result = {name: statistics.median(values) * 1e6 for name, values in seconds.items()}
        result["ratio"] = statistics.median(a / b for a, b in zip(*seconds.values()))
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


def _rank_ddp(variant: str, steps: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = []
    for a, b in zip(LAYERS, LAYERS[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    x, y = torch.randn(32, LAYERS[0]), torch.randint(0, LAYERS[-1], (32,))
    if variant == "bare":  # the gradients' bytes alone, in one all_reduce
        dist.init_process_group("meshcomm")
        flat = torch.zeros(sum(p.numel() for p in model.parameters()))
        step = lambda: dist.all_reduce(flat)  # noqa: E731
    else:
        if variant == "two-alone":  # two ranks computing side by side, no gradient exchanged: the machine's share
            dist.init_process_group("meshcomm")
        elif variant != "one-rank":
            dist.init_process_group(variant)
            model = torch.nn.parallel.DistributedDataParallel(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

        def step() -> None:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()

    times = []
    for i in range(steps + 2):
        start = time.perf_counter()
        step()
        if i >= 2:  # the first steps allocate and warm up
            times.append(time.perf_counter() - start)
    if variant == "one-rank" or dist.get_rank() == 0:
        print("RESULT " + json.dumps({"ms": statistics.median(times) * 1e3}), flush=True)
    if variant != "one-rank":
        dist.destroy_process_group()


def _launch(kind: str, variant: str, amount: int, nranks: int) -> dict[str, float]:
    command = [__file__, "--rank-of", kind, variant, str(amount)]
    command = [sys.executable, "-m", "meshcomm", "run", "-n", str(nranks), *command] if nranks > 1 \
        else [sys.executable, *command]
    return job_result(command, variant, cwd=os.path.dirname(__file__))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--rank-of":
        kind, variant, amount = sys.argv[2], sys.argv[3], int(sys.argv[4])
        _rank_calls(amount) if kind == "calls" else _rank_ddp(variant, amount)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["calls", "ddp"])
    parser.add_argument("--rounds", type=at_least_three, default=3)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    if args.kind == "calls":
        results: dict[str, list[float]] = {"torch-backend": [], "meshcomm-api": [], "ratio": []}
        for _ in range(args.rounds):
            for name, value in _launch("calls", "both", 5000, 2).items():
                results[name].append(value)
    else:
        variants = {"one-rank": 1, "two-alone": 2, "bare": 2, "meshcomm": 2, "gloo": 2}
        results = {variant: [] for variant in variants}
        for _ in range(args.rounds):
            for variant, nranks in variants.items():
                results[variant].append(_launch("ddp", variant, args.steps, nranks)["ms"])
    unit = "µs per call" if args.kind == "calls" else "ms per step (rank 0's median)"
    print(f"{unit}, median (range) of {args.rounds} rounds:")
    if args.kind == "calls":
        for name in ("torch-backend", "meshcomm-api"):
            print(f"  {name:14s} {spread(results[name])}")
        print(f"  torch backend ÷ meshcomm API (each round: the median over its blocks): {spread(results['ratio'])}")
    else:
        for variant, values in results.items():
            print(f"  {variant:14s} {spread(values)}")
        for lib in ("meshcomm", "gloo"):
            ratios = [(step - one) / bare for step, one, bare in
                      zip(results[lib], results["one-rank"], results["bare"])]
            print(f"  {lib}: (DDP step - 1-rank step) ÷ bare all_reduce: {spread(ratios)}")
            alone = [(step - two) / bare for step, two, bare in
                     zip(results[lib], results["two-alone"], results["bare"])]
            print(f"  {lib}: (DDP step - two ranks' step without DDP) ÷ bare all_reduce: {spread(alone)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
