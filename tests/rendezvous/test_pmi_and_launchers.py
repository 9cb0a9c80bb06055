"""The PMI-1 client against a fake PMI server, and whole jobs under the real mpiexec and torchrun."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from meshcomm.errors import CommTimeoutError, RendezvousError
from meshcomm.rendezvous import pmi
from tests.ranks import fresh_job_env, run_command


class FakePMI:
    """Hydra's side of PMI-1 for `size` ranks, one socketpair each, served by threads."""

    def __init__(self, size: int, answer_barrier: bool = True) -> None:
        self.kvs: dict[str, str] = {}
        self.barrier = threading.Barrier(size, timeout=20)
        self.answer_barrier = answer_barrier
        self.pairs = [socket.socketpair() for _ in range(size)]
        self.threads = [threading.Thread(target=self._serve, args=(ours,)) for ours, _ in self.pairs]
        for t in self.threads:
            t.start()

    def fd(self, rank: int) -> int:
        return self.pairs[rank][1].fileno()

    def _serve(self, sock: socket.socket) -> None:
        with sock, sock.makefile("rwb", buffering=0) as stream:
            for raw in stream:
                msg = pmi.parse_line(raw.decode())
                cmd = msg.get("cmd")
                if cmd == "init":
                    reply = "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"
                elif cmd == "get_my_kvsname":
                    reply = "cmd=my_kvsname kvsname=kvs_fake_0"
                elif cmd == "put":
                    self.kvs[msg["key"]] = msg["value"]
                    reply = "cmd=put_result rc=0"
                elif cmd == "barrier_in":
                    if not self.answer_barrier:
                        continue
                    self.barrier.wait()
                    reply = "cmd=barrier_out"
                elif cmd == "get":
                    value = self.kvs.get(msg["key"])
                    reply = f"cmd=get_result rc=0 value={value}" if value else "cmd=get_result rc=-1 msg=key_not_found"
                elif cmd == "finalize":
                    reply = "cmd=finalize_ack"
                else:
                    reply = "cmd=unknown"
                stream.write((reply + "\n").encode())

    def close(self) -> None:
        for ours, theirs in self.pairs:
            theirs.close()
            try:
                # A client may still hold a duplicate of its end: wake the serving thread ourselves.
                ours.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # the thread already saw EOF and closed it
        for t in self.threads:
            t.join(10)


def test_pmi_exchange_publishes_rank_0s_address_to_all() -> None:
    fake = FakePMI(3)
    results: dict[int, str] = {}

    def run(rank: int) -> None:
        address = "10.1.2.3:4567" if rank == 0 else None
        results[rank] = pmi.exchange_store_address(rank, address, 10, fd=fake.fd(rank))

    threads = [threading.Thread(target=run, args=(r,)) for r in range(3)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results == {0: "10.1.2.3:4567", 1: "10.1.2.3:4567", 2: "10.1.2.3:4567"}
        assert fake.kvs == {pmi.STORE_KEY: "10.1.2.3:4567"}
    finally:
        fake.close()


def test_pmi_client_leaves_the_launchers_descriptor_open_and_blocking() -> None:
    fake = FakePMI(1)
    try:
        client = pmi.PMIClient(5, fd=fake.fd(0))
        assert client.kvsname == "kvs_fake_0"
        client.close()
        # MPI_Init may still use the launcher's descriptor after us.
        assert os.get_blocking(fake.fd(0))
        again = pmi.PMIClient(5, fd=fake.fd(0))
        assert again.kvsname == "kvs_fake_0"
        again.close()
    finally:
        fake.close()


def test_pmi_get_of_a_missing_key_is_a_rendezvous_error() -> None:
    fake = FakePMI(1)
    try:
        with pytest.raises(RendezvousError, match="PMI get nothing failed: key_not_found"):
            pmi.PMIClient(5, fd=fake.fd(0)).get("nothing")
    finally:
        fake.close()


def test_a_silent_pmi_server_times_out_naming_the_command() -> None:
    fake = FakePMI(1, answer_barrier=False)
    try:
        client = pmi.PMIClient(0.3, fd=fake.fd(0))
        start = time.monotonic()
        with pytest.raises(CommTimeoutError, match="did not answer barrier_in within 0.3 s"):
            client.barrier()
        assert time.monotonic() - start < 5
        client.close(finalize=False)
    finally:
        fake.close()




def _run(cmd: list[str], tmp_path: Path, env: dict[str, str]) -> str:
    """Run JOB (with this interpreter) under a launcher; ranks' output lines may interleave, so callers search it."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    done = run_command([*cmd, sys.executable, "-W", "error", str(script)], env=fresh_job_env(env), cwd=tmp_path,
                       timeout=90)
    assert done.returncode == 0, done.output
    return done.stdout


# Rank 0 hosts the store, so it leaves last: it waits for every other rank's "done".
JOB = """
from meshcomm.rendezvous import connect, join
store, rank, size = connect(None, timeout=30)
join(store, rank, size, timeout=30)
store.set(f"hello/{rank}", str(rank))
store.wait([f"hello/{r}" for r in range(size)], timeout=30)
total = sum(int(store.get(f"hello/{r}")) for r in range(size))
print(f"rank {rank}/{size} sum {total} {type(store).__name__}", flush=True)
store.set(f"done/{rank}", b"")
if rank == 0:
    store.wait([f"done/{r}" for r in range(size)], timeout=30)
store.close()
"""


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec (MPICH Hydra) is not installed")
@pytest.mark.parametrize("token", ["", "mpi-secret"], ids=["no-token", "token"])
def test_real_mpiexec_job_finds_the_store_through_pmi(tmp_path: Path, token: str) -> None:
    version = run_command(["mpiexec", "--version"], timeout=30).stdout
    if "HYDRA" not in version:
        pytest.skip("mpiexec is not MPICH's Hydra (no PMI_FD to talk to)")
    out = _run(["mpiexec", "-n", "3"], tmp_path, {"MESHCOMM_TOKEN": token} if token else {})
    assert sorted(re.findall(r"rank \d+/\d+ sum \d+ (?:TCPStore|PrefixStore)", out)) == [f"rank {r}/3 sum 3 TCPStore" for r in range(3)]


def test_real_torchrun_job_uses_the_agents_torch_store(tmp_path: Path) -> None:
    # torchrun as this interpreter's module, not whichever `torchrun` is on PATH: the ranks run this
    # interpreter, and they need torch (the agent's store is torch's).
    pytest.importorskip("torch", reason=f"torch is not installed for {sys.executable}")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "--no-python"]
    out = _run(torchrun, tmp_path, {"OMP_NUM_THREADS": "1"})
    assert sorted(re.findall(r"rank \d+/\d+ sum \d+ (?:TCPStore|PrefixStore)", out)) == [f"rank {r}/2 sum 1 PrefixStore" for r in range(2)]
