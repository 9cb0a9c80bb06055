"""Rendezvous: the key-value store and how a process learns its rank, size and peers."""

from meshcomm.rendezvous.environment import JobInfo, detect, expand_nodelist
from meshcomm.rendezvous.file_store import FileStore
from meshcomm.rendezvous.init_method import connect, join
from meshcomm.rendezvous.store import PrefixStore, Store
from meshcomm.rendezvous.store_server import StoreServer, run_store_server
from meshcomm.rendezvous.tcp_store import TCPStore
from meshcomm.rendezvous.torch_store import TorchStore

__all__ = [
    "FileStore",
    "JobInfo",
    "PrefixStore",
    "Store",
    "StoreServer",
    "TCPStore",
    "TorchStore",
    "connect",
    "detect",
    "expand_nodelist",
    "join",
    "run_store_server",
]
