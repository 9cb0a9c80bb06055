"""`meshcomm store`: serve a standalone rendezvous store for jobs with MESHCOMM_STORE=external."""

from __future__ import annotations

import argparse
import sys

from meshcomm.cli import argtypes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--port", type=argtypes.port, required=True, help="port to listen on (0 lets the kernel pick)")
    parser.epilog = "The store authenticates clients with MESHCOMM_TOKEN; export the job's token first."


def run(args: argparse.Namespace) -> int:
    from meshcomm.rendezvous.auth import job_token
    from meshcomm.rendezvous.tcp_store import run_store_server

    token = job_token()
    if not token:
        print("meshcomm store: warning: MESHCOMM_TOKEN is not set; any meshcomm client may use this store",
              file=sys.stderr, flush=True)
    try:
        run_store_server(args.host, args.port, token)
    except KeyboardInterrupt:
        return 130
    return 0
