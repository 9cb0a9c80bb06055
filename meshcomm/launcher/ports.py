"""Picking a free TCP port for the rendezvous store."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel just reported free on `host`.

    The socket is closed before rank 0 binds the port, so another process could
    take it in between; torchrun and mpiexec accept the same small race rather
    than hand a listening socket across exec.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
