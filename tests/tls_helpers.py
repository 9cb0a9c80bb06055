"""For TLS tests: self-signed certificates made with the openssl command (skip without it), and TLS clients."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import pytest


def self_signed(directory: Path, name: str) -> tuple[str, str]:
    """A fresh P-256 certificate and its unencrypted key, as (cert path, key path)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not installed: TLS tests need it to make certificates")
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}"],
        check=True, capture_output=True, timeout=60,
    )
    return str(cert), str(key)


def tls_env(cert: str, key: str) -> dict[str, str]:
    return {"MESHCOMM_TLS_CERT": cert, "MESHCOMM_TLS_KEY": key}


def client_context(trusted_cert: str, presented: tuple[str, str]) -> ssl.SSLContext:
    """A TLS client that trusts `trusted_cert` and presents the certificate and key `presented`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(cafile=trusted_cert)
    context.load_cert_chain(*presented)
    return context


def read_over_tls(context: ssl.SSLContext, address: tuple[str, int], nbytes: int | None = None) -> bytes:
    """What a TLS client reads from `address`: `nbytes`, or everything before the server closes
    (which must happen within 15 s); b"" if the TLS handshake is refused."""
    with socket.create_connection(address, timeout=15) as raw:
        try:
            with context.wrap_socket(raw) as sock:
                return read_until_closed(sock, nbytes)
        except (ssl.SSLError, ConnectionError):
            return b""


def read_until_closed(sock: socket.socket, nbytes: int | None = None) -> bytes:
    """What the server sends before closing, or its first `nbytes`; a refusal ends the reading."""
    sock.settimeout(15)
    received = b""
    try:
        while nbytes is None or len(received) < nbytes:
            chunk = sock.recv(4096 if nbytes is None else nbytes - len(received))
            if not chunk:
                break
            received += chunk
    except (ssl.SSLError, ConnectionError):
        pass
    return received
