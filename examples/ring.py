"""Pass a message around a ring of ranks with send/recv: run with `meshcomm run -n 4 examples/ring.py`."""

import numpy as np

import meshcomm as dist

dist.init_process_group()
rank, size = dist.get_rank(), dist.get_world_size()
right, left = (rank + 1) % size, (rank - 1) % size

# A token starts at rank 0 and every rank adds its own rank before passing it on.
token = np.zeros(1, dtype=np.int64)
if rank == 0:
    dist.send(token, right)
    dist.recv(token, left)
    print(f"rank 0: the token came back holding {token[0]} (= 0 + 1 + ... + {size - 1})")
else:
    dist.recv(token, left)
    print(f"rank {rank}: got {token[0]} from rank {left}, adding {rank}, passing to rank {right}")
    token += rank
    dist.send(token, right)

# Everyone sends a greeting right and receives one from the left at the same time.
greeting = np.frombuffer(f"hello from rank {rank}".ljust(32).encode(), dtype=np.uint8).copy()
heard = np.empty_like(greeting)
for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, greeting, right), dist.P2POp(dist.irecv, heard, left)]):
    work.wait()
print(f"rank {rank}: heard {heard.tobytes().decode().strip()!r}")
dist.destroy_process_group()
