"""`meshcomm store`: serve a standalone rendezvous store for jobs with MESHCOMM_STORE=external."""

from __future__ import annotations

import argparse

from meshcomm.cli import argtypes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--port", type=argtypes.fixed_port, required=True, help="port to listen on")
    parser.epilog = (
        "The store authenticates clients with MESHCOMM_TOKEN; export the job's token first. "
        "With MESHCOMM_TLS_CERT and MESHCOMM_TLS_KEY set it speaks TLS, as the ranks must then too."
    )


def run(args: argparse.Namespace) -> int:
    from meshcomm.security.auth import job_token
    from meshcomm.rendezvous.store_server import run_store_server

    # Without a token the server itself warns when it listens beyond loopback.
    try:
        run_store_server(args.host, args.port, job_token())
    except KeyboardInterrupt:
        return 130
    return 0
