"""Every MESHCOMM_* environment variable, read in this one place."""

from __future__ import annotations

import os
from dataclasses import dataclass

# name -> (default, meaning). This table is the variables' documentation (README's "Settings" points here).
# Other modules read these settings through get(), not os.environ: mpi/world.py only asks whether any
# launcher's rank variable (MESHCOMM_RANK among them) is set, and cli/tune.py sets some for its jobs.
VARIABLES: dict[str, tuple[str, str]] = {
    "MESHCOMM_RANK": ("", "this process's global rank (set by `meshcomm run`)"),
    "MESHCOMM_WORLD_SIZE": ("", "number of processes in the job"),
    "MESHCOMM_LOCAL_RANK": ("", "rank among the processes of this host"),
    "MESHCOMM_LOCAL_WORLD_SIZE": ("", "number of processes on this host"),
    "MESHCOMM_MASTER_ADDR": ("", "host of the rendezvous store"),
    "MESHCOMM_MASTER_PORT": ("", "port of the rendezvous store"),
    "MESHCOMM_RESTART_COUNT": ("0", "which attempt this is, set by `meshcomm run --max-restarts K` (0 = the first): above 0, a program resumes from its checkpoint"),
    "MESHCOMM_STORE": ("", "'' = rank 0 hosts the store at MASTER_ADDR:MASTER_PORT; 'external' = one already listens there (e.g. `meshcomm store`)"),
    "MESHCOMM_TOKEN": ("", "job secret authenticating store and data connections (hex or text)"),
    "MESHCOMM_TLS_CERT": ("", "PEM certificate this rank presents on store and data connections; with MESHCOMM_TLS_KEY turns TLS on"),
    "MESHCOMM_TLS_KEY": ("", "PEM private key (unencrypted) of MESHCOMM_TLS_CERT"),
    "MESHCOMM_TLS_CA": ("", "PEM certificates that peers' certificates must be signed by (default: MESHCOMM_TLS_CERT itself)"),
    "MESHCOMM_TIMEOUT": ("300", "default deadline in seconds for every blocking operation"),
    "MESHCOMM_KILL_GRACE": ("5", "seconds `meshcomm run` waits after SIGTERM before SIGKILL when stopping ranks"),
    "MESHCOMM_HOST_ID": ("", "overrides the host identity (hostname + boot id); tests fake hosts with it"),
    "MESHCOMM_TRANSPORT": ("auto", "'auto' = shared memory between ranks of one host, TCP between hosts; 'tcp' = TCP only"),
    "MESHCOMM_SHM_RING_BYTES": ("", "bytes of each shared-memory ring (default: 4 MiB, less when a host has over 16 ranks)"),
    "MESHCOMM_SINGLE_COPY_BYTES": ("1048576", "messages at least this large to a rank of the same host are read straight from the sender's memory (one copy, Linux process_vm_readv) when the kernel allows it; 0 = always copy through the shared ring"),
    "MESHCOMM_STREAM_BYTES": ("8388608", "point-to-point messages below this size to a rank of the same host stream through the shared ring, the sender copying in while the receiver copies out, when the host has a core per rank; larger ones follow MESHCOMM_SINGLE_COPY_BYTES (0 = always follow it)"),
    "MESHCOMM_YIELD_US": ("20000", "microseconds a rank waiting on its group's shared-memory board yields its core to the others between looks, before it sleeps, on a host with more ranks than cores (0 = sleep at once)"),
    "MESHCOMM_NATIVE": ("1", "0 runs the pure-Python per-call path even when the compiled extension is built (meshcomm doctor says which runs)"),
    "MESHCOMM_LANES": ("1", "0 turns lanes off: a repeated blocking call takes the whole per-call path every time (`meshcomm tune` times the schedules' own messages so)"),
    "MESHCOMM_SPIN_US": ("", "microseconds a waiting rank polls before sleeping on its futex (default 50; 10 when ranks outnumber cores); a receive on its message lane polls as long with the GIL held, then waits as the Python path does"),
    "MESHCOMM_JOB_ID": ("", "names the job's shared-memory segments (set by `meshcomm run`, which removes leftovers)"),
    "MESHCOMM_IFNAME_ADDR": ("", "address this rank advertises to peers for data connections"),
    "MESHCOMM_ALGO": ("", "algorithm override: 'ring' or 'all_reduce:ring;broadcast:binomial'"),
    "MESHCOMM_CHUNK_BYTES": ("1048576", "largest piece a message is cut into for pipelining (all_gather and all_to_all send whole messages)"),
    "MESHCOMM_TUNING": ("", "cost-model parameters saved by `meshcomm tune` (JSON file); empty = built-in defaults"),
    "MESHCOMM_DEBUG": ("", "INFO prints, on stderr, each group's cost table and every call's algorithm and predicted time"),
    "MESHCOMM_TRACE": ("", "directory where each rank writes its Chrome trace events (rank<N>.jsonl); `meshcomm trace merge DIR` joins them"),
    "MESHCOMM_DUMP_DIR": ("", "where each rank writes its flight recorder (rank<N>.json) on a timeout, a lost peer or SIGUSR1 (default: a meshcomm-dumps-<job> folder in the temp dir)"),
    "MESHCOMM_FLIGHT_RECORDER_SIZE": ("256", "collectives each rank's flight recorder keeps"),
    "MESHCOMM_PROGRESS_AFTER": ("1", "seconds a rank stays in one collective (or idle after it) before it tells the store how far it got, so a peer's timeout can name who had not arrived"),
}


def get(name: str) -> str:
    """The variable's value, or its default."""
    default, _ = VARIABLES[name]
    return os.environ.get(name, default)


def get_int(name: str) -> int | None:
    raw = get(name)
    if raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def get_float(name: str) -> float:
    raw = get(name)
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None


@dataclass(frozen=True)
class Settings:
    timeout: float
    chunk_bytes: int
    debug: str
    lanes: bool


def settings() -> Settings:
    """A snapshot of the tunables that the runtime reads once at init."""
    chunk = get_int("MESHCOMM_CHUNK_BYTES") or 1 << 20
    if chunk < 1024:
        raise ValueError(f"MESHCOMM_CHUNK_BYTES must be >= 1024, got {chunk}")
    return Settings(
        timeout=get_float("MESHCOMM_TIMEOUT"),
        chunk_bytes=chunk,
        debug=get("MESHCOMM_DEBUG").upper(),
        lanes=get("MESHCOMM_LANES") != "0",
    )
