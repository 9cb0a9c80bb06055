"""Turn an init_method ("env://", "tcp://host:port", "file:///path") into a connected Store, and join the ranks on it."""

from __future__ import annotations

import os
import secrets
import socket
import urllib.parse

from meshcomm import config
from meshcomm.errors import CommTimeoutError, PeerLostError, RendezvousError
from meshcomm.rendezvous import pmi
from meshcomm.rendezvous.environment import detect
from meshcomm.rendezvous.file_store import FileStore
from meshcomm.rendezvous.store import PrefixStore, Store
from meshcomm.rendezvous.tcp_store import TCPStore

# Missing ranks listed in a timeout message; beyond this the list is cut short.
MAX_LISTED = 32


def _default_timeout(timeout: float | None) -> float:
    value = config.get_float("MESHCOMM_TIMEOUT") if timeout is None else float(timeout)
    if not value > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {value}")
    return value


def _query_int(query: dict[str, list[str]], name: str, given: int) -> int:
    """torch also accepts rank/world_size in the URL: tcp://h:p?rank=0&world_size=2."""
    if given >= 0 or name not in query:
        return given
    try:
        return int(query[name][-1])
    except ValueError:
        raise ValueError(f"init_method query {name} must be an integer, got {query[name][-1]!r}") from None


def _store_mode() -> str:
    mode = config.get("MESHCOMM_STORE").strip().lower()
    if mode not in ("", "external"):
        raise ValueError(f"MESHCOMM_STORE must be '' or 'external', got {mode!r}")
    return mode


def _tcp_store(host: str, port: int, rank: int, world_size: int, timeout: float) -> TCPStore:
    is_master = rank == 0 and _store_mode() != "external"
    try:
        return TCPStore(host, port, is_master=is_master, timeout=timeout, world_size=world_size)
    except OSError as exc:
        # Binding failed (port taken, address not ours); say which rank tried what.
        raise RendezvousError(f"rank 0 could not host the store on {host}:{port}: {exc}") from None


def _advertised_host(world_size: int) -> str:
    """The address rank 0 publishes through PMI for the store it hosts."""
    override = config.get("MESHCOMM_IFNAME_ADDR").strip()
    if override:
        return override
    local = os.environ.get("MPI_LOCALNRANKS", "")
    if local.isdigit() and int(local) == world_size:
        return "127.0.0.1"  # the whole job is on this host: nothing needs to reach us from outside
    try:
        # Connecting a UDP socket sends nothing; it only asks the kernel which
        # interface routes outward, unlike gethostname() which may map to 127.0.1.1.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))
            return probe.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())


def _pmi_store(rank: int, world_size: int, timeout: float) -> TCPStore:
    """Under Hydra without MASTER_ADDR: rank 0 hosts on a free port and publishes it through PMI."""
    if rank == 0:
        host = _advertised_host(world_size)
        store = TCPStore(host, 0, is_master=True, timeout=timeout, world_size=world_size)
        address = f"[{host}]:{store.port}" if ":" in host else f"{host}:{store.port}"
        try:
            pmi.exchange_store_address(rank, address, timeout)
        except BaseException:
            store.close()
            raise
        return store
    address = pmi.exchange_store_address(rank, None, timeout)
    host, _, port = address.rpartition(":")
    return TCPStore(host.strip("[]"), int(port), is_master=False, timeout=timeout, world_size=world_size)


def _env_store(master_addr: str | None, master_port: int | None, rank: int, world_size: int, timeout: float) -> Store:
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        from meshcomm.rendezvous.torch_store import TorchStore

        if master_addr is None or master_port is None:
            raise ValueError("torchrun set TORCHELASTIC_USE_AGENT_STORE but not MASTER_ADDR and MASTER_PORT")
        # The agent's store also holds torch's own keys and earlier restarts' keys; keep ours apart.
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        return PrefixStore(f"meshcomm/attempt_{attempt}", TorchStore.connect(master_addr, master_port, timeout))
    if master_addr and master_port is not None:
        return _tcp_store(master_addr, master_port, rank, world_size, timeout)
    if master_addr is None and master_port is None and pmi.available() and _store_mode() != "external":
        return _pmi_store(rank, world_size, timeout)
    missing = [name for name, value in (("MASTER_ADDR", master_addr), ("MASTER_PORT", master_port)) if not value]
    raise ValueError(
        f"env:// needs the store's address but {' and '.join(missing)} "
        "(or MESHCOMM_MASTER_ADDR/MESHCOMM_MASTER_PORT) is not set; looked in MESHCOMM_MASTER_*, "
        "MASTER_*, SLURM_JOB_NODELIST/SLURM_JOB_ID and MPICH's PMI_FD"
    )


def connect(
    init_method: str | None = None,
    rank: int = -1,
    world_size: int = -1,
    timeout: float | None = None,
    store: Store | None = None,
) -> tuple[Store, int, int]:
    """A store all ranks share, and this process's (rank, world_size).

    For env:// and tcp:// rank 0 hosts the store unless MESHCOMM_STORE is
    'external'; under torchrun the agent's torch store is used instead.
    Rank and world size not given here come from the launcher's environment.
    """
    wait = _default_timeout(timeout)
    if store is not None:
        if init_method is not None:
            raise ValueError(f"pass either init_method or store, not both (init_method={init_method!r})")
        info = detect(rank, world_size)
        return store, info.rank, info.world_size
    url = "env://" if init_method is None else init_method
    if not isinstance(url, str):
        raise TypeError(f"init_method must be str or None, got {type(url).__name__}")
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    rank = _query_int(query, "rank", rank)
    world_size = _query_int(query, "world_size", world_size)
    if parts.scheme == "env":
        info = detect(rank, world_size)
        made = _env_store(info.master_addr, info.master_port, info.rank, info.world_size, wait)
    elif parts.scheme == "tcp":
        try:
            host, port = parts.hostname, parts.port
        except ValueError as exc:
            raise ValueError(f"init_method {url!r} has a bad port: {exc}") from None
        if not host or port is None:
            raise ValueError(f"init_method must look like tcp://host:port, got {url!r}")
        info = detect(rank, world_size)
        made = _tcp_store(host, port, info.rank, info.world_size, wait)
    elif parts.scheme == "file":
        path = urllib.parse.unquote(parts.path)
        if not path:
            raise ValueError(f"init_method must look like file:///absolute/path, got {url!r}")
        info = detect(rank, world_size)
        made = FileStore(path, wait)
    else:
        raise ValueError(f"init_method must start with env://, tcp:// or file://, got {url!r}")
    return made, info.rank, info.world_size


_process_nonce: tuple[int, str] | None = None


def _nonce() -> str:
    """Identifies this process in its rank claim; made per pid so forked children differ."""
    global _process_nonce
    if _process_nonce is None or _process_nonce[0] != os.getpid():
        _process_nonce = (os.getpid(), f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(8)}")
    return _process_nonce[1]


# A rank that gives up on the rendezvous writes why under _VERDICT, then fills the missing ranks' keys with it
# (after _FAILED), which wakes every rank still waiting and tells a late one that the job already failed.
_VERDICT = "rdzv/verdict"
_FAILED = b"meshcomm: the rendezvous already failed: "
_LINGER_SECONDS = 2.0  # how long a store's host keeps serving after a failed rendezvous, for the others to read why


def _announce(store: Store, keys: list[str], missing: list[int], verdict: str) -> None:
    """Tell every rank of the rendezvous why it failed, then let them read it."""
    store.compare_set(_VERDICT, b"", verdict.encode())
    for r in missing:
        store.compare_set(keys[r], b"", _FAILED + verdict.encode())
    _linger(store)


def _linger(store: Store) -> None:
    linger = getattr(store, "linger", None)  # a TCPStore that serves the store; others have nothing to keep
    if linger is not None:
        linger(_LINGER_SECONDS)


def join(store: Store, rank: int, world_size: int, timeout: float | None = None) -> None:
    """Announce this rank and wait until all world_size ranks have; RendezvousError names the missing ones."""
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank!r}")
    wait = store.timeout if timeout is None else _default_timeout(timeout)
    me = _nonce().encode()
    claimed = store.compare_set(f"rdzv/rank/{rank}", b"", me)
    if claimed.startswith(_FAILED):  # arrived after a rank gave up and said why
        raise RendezvousError(claimed[len(_FAILED):].decode(errors="replace"))
    if claimed != me:
        raise RendezvousError(
            f"rank {rank} is already claimed by another process ({claimed.decode(errors='replace')}); "
            "every process needs its own rank (or a store left over from an earlier job is being reused)"
        )
    agreed = store.compare_set("rdzv/world_size", b"", str(world_size).encode())
    if agreed != str(world_size).encode():
        raise RendezvousError(
            f"world_size mismatch: rank {rank} says {world_size}, but another rank joined with {agreed.decode(errors='replace')}"
        )
    store.add("rdzv/count", 1)
    keys = [f"rdzv/rank/{r}" for r in range(world_size)]
    try:
        store.wait(keys, wait)
    except CommTimeoutError:
        missing = [r for r, key in enumerate(keys) if not store.check([key])]
        if missing:
            listed = ", ".join(map(str, missing[:MAX_LISTED])) + (", ..." if len(missing) > MAX_LISTED else "")
            verdict = (f"rendezvous timed out after {wait:g} s: {world_size - len(missing)}/{world_size} ranks joined, "
                       f"missing [{listed}]")
            _announce(store, keys, missing, verdict)
            raise RendezvousError(verdict) from None
        # Every key is set: the last rank arrived just as we gave up, or a rank that gave up first filled them.
    except PeerLostError as exc:
        # Nobody is left to say who was missing: the store's host gave up without a verdict (it was killed).
        raise RendezvousError(
            f"rank {rank} lost the store while it waited for all {world_size} ranks to join ({exc}): the rendezvous "
            f"failed where the store runs (rank 0's, unless MESHCOMM_STORE=external)"
        ) from None
    if store.check([_VERDICT]):  # woken by a rank that gave up: every waiting rank names the missing ones
        verdict = store.get(_VERDICT).decode(errors="replace")
        _linger(store)
        raise RendezvousError(verdict)
