"""The 2-D heat equation on a Cartesian grid of ranks, with halo exchange: `meshcomm run -n 4 examples/halo_exchange.py`.

Each rank owns a block of the plate plus a one-cell frame (the halo) that
holds copies of its neighbours' edge cells. Every step it sends its four
edges and receives its four halo sides with Isend/Irecv; each side is one
Create_subarray datatype over the block, so no edge is copied out by hand.
Outside the plate the temperature is held at 0 (the grid is not periodic:
Shift gives PROC_NULL there and the halo keeps its zeros). At the end rank
0 gathers the blocks and checks them against the same steps done on the
whole plate with numpy in one process: the cells must be equal bit for bit.
It prints the time per step (the slowest rank's).

`mpiexec -n 4 python examples/halo_exchange.py --mpi4py [--yield]` runs the
same file on mpi4py (with --yield, waits test and yield instead of spinning).
"""

import os
import sys

import numpy as np

if "--mpi4py" in sys.argv[1:]:  # the same program on mpi4py, for comparison: mpiexec -n 4 python ... --mpi4py
    from mpi4py import MPI
else:
    from meshcomm import MPI

ROWS, COLS, STEPS, ALPHA = 48, 40, 200, 0.2


def initial_plate() -> np.ndarray:
    """A hot square off-centre on a gently varying background."""
    y, x = np.mgrid[0:ROWS, 0:COLS]
    plate = 0.1 * np.sin(x / 5.0) * np.cos(y / 7.0)
    plate[10:20, 8:22] += 100.0
    return plate


def step(u: np.ndarray) -> np.ndarray:
    """One explicit step on the interior of `u`, whose outer frame is the boundary (or halo)."""
    centre = u[1:-1, 1:-1]
    laplacian = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * centre
    return centre + ALPHA * laplacian


def split(n: int, parts: int, index: int) -> tuple[int, int]:
    """(start, length) of part `index` when n cells are shared out as evenly as possible."""
    base, extra = divmod(n, parts)
    return index * base + min(index, extra), base + (index < extra)


comm = MPI.COMM_WORLD
dims = MPI.Compute_dims(comm.Get_size(), 2)
cart = comm.Create_cart(dims, periods=[False, False])
(row0, rows), (col0, cols) = (split(n, d, c) for n, d, c in zip((ROWS, COLS), dims, cart.coords))

u = np.zeros((rows + 2, cols + 2))
u[1:-1, 1:-1] = initial_plate()[row0 : row0 + rows, col0 : col0 + cols]


def side(starts, subsizes) -> MPI.Datatype:
    return MPI.DOUBLE.Create_subarray([rows + 2, cols + 2], subsizes, starts).Commit()


# Per direction: (what we send, where the neighbour's cells land, the neighbour).
up, down = cart.Shift(0, 1)
left, right = cart.Shift(1, 1)
row, column = [1, cols], [rows, 1]
exchanges = [
    (side([1, 1], row), side([0, 1], row), up),
    (side([rows, 1], row), side([rows + 1, 1], row), down),
    (side([1, 1], column), side([1, 0], column), left),
    (side([1, cols], column), side([1, cols + 1], column), right),
]

cart.Barrier()
start = MPI.Wtime()
for _ in range(STEPS):
    requests = [cart.Irecv([u, 1, halo], peer, tag=0) for _, halo, peer in exchanges]
    requests += [cart.Isend([u, 1, edge], peer, tag=0) for edge, _, peer in exchanges]
    if "--yield" in sys.argv[1:]:  # MPICH's waits spin; on shared cores, measure it with yielding ones too
        while not MPI.Request.Testall(requests):
            os.sched_yield()
    else:
        MPI.Request.Waitall(requests)
    u[1:-1, 1:-1] = step(u)
per_step = cart.allreduce(MPI.Wtime() - start, op=MPI.MAX) / STEPS

for edge, halo, _ in exchanges:
    edge.Free()
    halo.Free()

blocks = cart.gather((row0, col0, u[1:-1, 1:-1].copy()), root=0)
if cart.Get_rank() == 0:
    plate = np.zeros((ROWS, COLS))
    for r, c, block in blocks:
        plate[r : r + block.shape[0], c : c + block.shape[1]] = block
    reference = np.pad(initial_plate(), 1)
    for _ in range(STEPS):
        reference[1:-1, 1:-1] = step(reference)
    assert np.array_equal(plate, reference[1:-1, 1:-1]), np.abs(plate - reference[1:-1, 1:-1]).max()
    print(f"OK: {dims[0]}x{dims[1]} ranks, {STEPS} steps on {ROWS}x{COLS} cells equal the one-process numpy "
          f"solution bit for bit (hottest cell {plate.max():.4f}); {per_step * 1e6:.0f} µs per step", flush=True)
cart.Free()
