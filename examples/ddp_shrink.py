"""DDP that loses a rank mid-training, shrinks to the survivors and finishes, on the "meshcomm" backend.

    meshcomm run -n 4 --on-failure continue examples/ddp_shrink.py

Rank 2 is killed (SIGKILL) at step 60. The survivors' next all-reduce fails; they agree on who is left
(meshcomm.torch_backend.shrink_default_group), re-initialize torch.distributed over themselves, wrap the model
in DDP again (which broadcasts rank 0's weights) and carry on. Each rank learns from its own stream of examples,
so the global batch shrinks with the world: the learning rate is rescaled to the new world size (linear
scaling). Rank 0 prints the loss, the failure and the new world.
"""

import argparse
import os
import signal

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from meshcomm.torch_backend.survival import shrink_default_group


def target(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x[:, :4]).sum(dim=1, keepdim=True) - 0.5 * x[:, 4:].pow(2).mean(dim=1, keepdim=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=32, help="examples per rank per step")
    parser.add_argument("--victim", type=int, default=2)
    parser.add_argument("--kill-at", type=int, default=60)
    parser.add_argument("--lr-per-rank", type=float, default=0.0125)
    args = parser.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("meshcomm")
    first_rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    model = DDP(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr_per_rank * world_size, momentum=0.9)
    data = torch.Generator().manual_seed(1000 + first_rank)

    step = 1
    while step <= args.steps:
        if step == args.kill_at and first_rank == args.victim:
            os.kill(os.getpid(), signal.SIGKILL)
        x = torch.randn(args.batch, 8, generator=data)
        loss = torch.nn.functional.mse_loss(model(x), target(x))
        optimizer.zero_grad()
        try:
            loss.backward()  # DDP all-reduces the gradients here
            mean = loss.detach().clone()
            dist.all_reduce(mean)
        except RuntimeError as exc:  # a rank was lost during this step
            old_size = world_size
            rank, world_size = shrink_default_group()
            for group in optimizer.param_groups:
                group["lr"] = args.lr_per_rank * world_size
            model = DDP(net)  # the new default group; DDP broadcasts rank 0's weights
            resume = torch.tensor([step])
            dist.all_reduce(resume, op=dist.ReduceOp.MIN)  # a rank may have finished this step before the loss
            step = int(resume.item())
            if rank == 0:
                print(f"step {step:4d}  lost a rank ({type(exc).__name__}); world {old_size} -> {world_size}, "
                      f"lr {args.lr_per_rank * world_size:.4f}", flush=True)
            continue  # the same step again, on the survivors
        optimizer.step()
        if dist.get_rank() == 0 and (step == 1 or step % 50 == 0 or step == args.steps):
            print(f"step {step:4d}  loss {mean.item() / world_size:.6f}  world {world_size}", flush=True)
        step += 1
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
