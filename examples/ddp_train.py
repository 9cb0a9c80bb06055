"""Train a small model with DistributedDataParallel on torch.distributed's "meshcomm" backend.

    meshcomm run -n 4 examples/ddp_train.py
    torchrun --nproc-per-node 4 examples/ddp_train.py
    torchrun --nproc-per-node 4 examples/ddp_train.py --backend gloo     # the same run on torch's gloo

Nothing from meshcomm is imported: installing meshcomm registers the backend
with torch (an entry point torch loads as it is imported). Each rank learns
from its own stream of examples; DDP averages the gradients, so every rank
holds the same model after every step.
"""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def target(x: torch.Tensor) -> torch.Tensor:
    """What the model learns: a smooth function of 8 inputs."""
    return torch.sin(x[:, :4]).sum(dim=1, keepdim=True) - 0.5 * x[:, 4:].pow(2).mean(dim=1, keepdim=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32, help="examples per rank per step")
    parser.add_argument("--backend", default="meshcomm")
    args = parser.parse_args()

    torch.set_num_threads(1)  # ranks outnumber cores on small machines
    dist.init_process_group(args.backend)  # rank, world size and store address come from the launcher
    rank, world_size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(
        torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(1000 + rank)

    for step in range(1, args.steps + 1):
        x = torch.randn(args.batch, 8, generator=data)
        loss = torch.nn.functional.mse_loss(model(x), target(x))
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here, bucket by bucket
        optimizer.step()
        if step == 1 or step % 50 == 0 or step == args.steps:
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            if rank == 0:
                print(f"step {step:4d}  loss {mean.item() / world_size:.6f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
