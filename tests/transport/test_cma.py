"""Reading and writing another process's memory (cma.py), and the probe that decides whether ranks may."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from meshcomm.transport import cma, shm
from tests.ranks import started

pytestmark = pytest.mark.skipif(not cma.available(), reason="process_vm_readv needs Linux")

HOLDER = """
import sys
import numpy as np
data = (np.arange(3 << 20) % 251).astype(np.uint8)
print(data.ctypes.data, flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def holder():
    """A child process holding 3 MiB of known bytes; yields (pid, address), reaped afterwards (tests.ranks)."""
    with started([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        address = int(proc.stdout.readline())
        yield proc.pid, address
        proc.communicate(timeout=30)  # closes its stdin (it then exits) and both pipes


def test_read_copies_the_other_process_s_bytes_exactly(holder) -> None:
    import numpy as np

    pid, address = holder
    expected = (np.arange(3 << 20) % 251).astype(np.uint8)
    target = np.zeros(3 << 20, np.uint8)
    cma.read(pid, address, memoryview(target))
    assert np.array_equal(target, expected)
    part = bytearray(1000)
    cma.read(pid, address + 5000, memoryview(part))
    assert bytes(part) == expected[5000:6000].tobytes()
    cma.read(pid, address, memoryview(bytearray(0)))  # nothing to read is no error


def test_write_lands_in_the_other_process_s_memory() -> None:
    """The holder itself prints the bytes we wrote, so this does not rest on cma.read."""
    script = HOLDER + "print(data[5000:5008].tobytes().hex(), flush=True)\n"
    with started([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        address = int(proc.stdout.readline())
        cma.write(proc.pid, address + 5000, memoryview(bytes(range(200, 208))))
        cma.write(proc.pid, address, memoryview(bytearray(0)))  # nothing to write is no error
        with pytest.raises(OSError, match=f"process_vm_writev to process {proc.pid}"):
            cma.write(proc.pid, 4096, memoryview(bytearray(16)))  # an address the holder has not mapped
        out, _ = proc.communicate(input="\n", timeout=30)
    assert out.strip() == bytes(range(200, 208)).hex()


def test_read_names_the_process_when_the_kernel_refuses(holder) -> None:
    pid, address = holder
    with pytest.raises(OSError, match=f"process {pid}"):
        cma.read(pid, 4096, memoryview(bytearray(16)))  # an address the holder has not mapped
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)  # reaped, so its pid names no process
    with pytest.raises(OSError, match=f"process {dead.pid}"):
        cma.read(dead.pid, address, memoryview(bytearray(16)))


def test_probe_is_true_only_for_the_expected_bytes(holder) -> None:
    pid, address = holder
    assert cma.probe(pid, address, bytes(range(8)))
    after = bytearray(8)
    cma.read(pid, address, memoryview(after))
    assert bytes(after) == bytes(range(8))  # the probe wrote back what was there
    assert not cma.probe(pid, address, bytes(range(1, 9)))
    assert not cma.probe(pid, 4096, bytes(8))


def test_a_segment_s_owner_can_be_probed_through_its_identity(tmp_path) -> None:
    """The identity a segment's owner publishes (pid, address, nonce) lets a reader check it may read the owner."""
    name = f"meshcomm-test-{os.getpid()}-identity"
    owner = shm.Segment(name, 2, 4096, create=True)
    try:
        reader = shm.Segment(name, 2, 4096, create=False)
        try:
            assert not reader.probe_owner()  # nothing published yet: pid 0
            owner.publish_identity()
            assert reader.owner_pid == os.getpid()
            assert reader.probe_owner()
            assert owner.reads(1) == shm.READ_UNKNOWN
            owner.record_read(1, True)
            assert reader.reads(1) == shm.READ_OK
            owner.record_read(1, False)
            assert reader.reads(1) == shm.READ_REFUSED
        finally:
            reader.close()
    finally:
        owner.unlink()
        owner.close()


def test_siblings_are_expected_to_reach_each_other_unless_yama_restricts_ptrace(tmp_path) -> None:
    scope = tmp_path / "ptrace_scope"
    scope.write_text("0\n")
    assert cma.expected_between_siblings(str(scope))
    scope.write_text("1\n")
    assert not cma.expected_between_siblings(str(scope))
    assert cma.expected_between_siblings(str(tmp_path / "no-yama"))


def test_without_the_calls_nobody_is_expected_to_reach_anybody(monkeypatch, tmp_path) -> None:
    scope = tmp_path / "ptrace_scope"
    scope.write_text("0\n")
    monkeypatch.setattr(cma, "_readv", None)
    assert not cma.expected_between_siblings(str(scope))


def test_address_of_is_where_the_first_byte_is_for_writable_and_read_only_views() -> None:
    import numpy as np

    data = np.arange(4096, dtype=np.uint8)
    frozen = data.copy()
    frozen.flags.writeable = False
    for array in (data, frozen):
        view = memoryview(array)
        assert cma.address_of(view) == array.ctypes.data
        assert cma.address_of(view[100:200]) == array.ctypes.data + 100
        assert cma.address_of(view[:0]) == 0
    words = np.zeros(8, np.float64)
    assert cma.address_of(memoryview(words).cast("B")[8:]) == words.ctypes.data + 8
