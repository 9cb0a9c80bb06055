"""Starting processes from a running job: Spawn, Spawn_multiple and Get_parent.

The spawning root starts the children itself, as one new job: it serves their
store, and each child gets the variables `meshcomm run` gives a rank, plus the
name of a port the root opened. Importing meshcomm.MPI in a child connects its
job to that port (MPI's children do so in MPI_Init), and the root's Accept
there makes Spawn's intercommunicator (dynamic.py). The root reaps its
children; its process waits for them at exit, up to its timeout, and a child
whose spawning process dies exits too. docs/mpi.md tells the whole story.
"""

from __future__ import annotations

import atexit
import numbers
import os
import subprocess
import sys
import threading
import time

from meshcomm import config
from meshcomm.mpi import dynamic
from meshcomm.mpi import exceptions as err
from meshcomm.mpi import lane
from meshcomm.mpi import world
from meshcomm.mpi.comm import Comm, Intracomm
from meshcomm.mpi.intercomm import Intercomm
from meshcomm.rendezvous.environment import LAUNCHERS
from meshcomm.rendezvous.tcp_store import TCPStore
from meshcomm.security import auth

PARENT_PORT = "MESHCOMM_MPI_PARENT_PORT"  # set in a spawned child: the port its job connects to
PARENT_PID = "MESHCOMM_MPI_PARENT_PID"
APPNUM = "MESHCOMM_MPI_APPNUM"  # which command of Spawn_multiple a child runs
_WATCH_SECONDS = 0.5  # a child looks whether its spawning process still lives this often
# A child's job is its own: the variables of the parent's launch would make it a rank of the parent's job.
_PARENT_JOB_VARIABLES = {name for launcher in LAUNCHERS
                         for name in (launcher.rank, launcher.size, launcher.local_rank, launcher.local_size) if name}
_PARENT_JOB_VARIABLES |= {"MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "NODE_RANK", "MESHCOMM_MASTER_ADDR",
                          "MESHCOMM_MASTER_PORT", "MESHCOMM_TOKEN", "MESHCOMM_JOB_ID", "MESHCOMM_STORE",
                          "MESHCOMM_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"}

_lock = threading.Lock()
_children: list["_Children"] = []
_spawned = 0
_parent: Intercomm | None = None
_appnum = 0


class _Children:
    """One Spawn's processes and the store their job uses, served here until the last of them exits."""

    def __init__(self, processes: list[subprocess.Popen], store: TCPStore) -> None:
        self.processes, self.store = processes, store
        with _lock:
            _children.append(self)  # waited for at exit until reaped
        threading.Thread(target=self._reap, name="meshcomm-spawn-reaper", daemon=True).start()

    def _reap(self) -> None:
        for process in self.processes:
            process.wait()
        self.store.close()
        with _lock:
            _children.remove(self)

    def exited_early(self) -> str | None:
        """Before connecting: which child has already exited, if any."""
        for number, process in enumerate(self.processes):
            code = process.poll()
            if code is not None:
                return (f"child {number} ({process.args[0]}, pid {process.pid}) exited with code {code} before "
                        "its job connected")
        return None

    def kill(self) -> None:
        _kill(self.processes)
        self.store.close()

    def wait_then_kill(self, deadline: float) -> None:
        for process in self.processes:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                print(f"meshcomm: spawned process {process.pid} ({process.args[0]}) was still running when its "
                      "parent exited; killing it", file=sys.stderr, flush=True)
                _kill([process])
        self.store.close()


def _kill(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.kill()
        process.wait()


def _wait_for_children() -> None:
    """At exit: a spawning process waits for its children, as mpiexec waits for its ranks (up to the timeout)."""
    deadline = time.monotonic() + config.get_float("MESHCOMM_TIMEOUT")
    with _lock:
        children = list(_children)
    for batch in children:
        batch.wait_then_kill(deadline)


atexit.register(_wait_for_children)


# ----- the spawning side


def _commands(command, args, maxprocs, info, multiple: bool) -> list[tuple[str, list[str], int]]:
    """(command, arguments, count) for each command, checked; significant at the root only."""
    if not multiple:
        return [(_command(command), _arguments(args), _count(maxprocs))]
    if not isinstance(command, (list, tuple)):
        raise ValueError(f"Spawn_multiple: command must be a sequence of commands, got {type(command).__name__}")
    n = len(command)
    argv = [None] * n if args is None else args
    counts = [maxprocs] * n if isinstance(maxprocs, int) else maxprocs
    infos = [info] * n if info is None or not isinstance(info, (list, tuple)) else info
    for name, value in (("args", argv), ("maxprocs", counts), ("info", infos)):
        if not isinstance(value, (list, tuple)) or len(value) != n:
            raise ValueError(f"Spawn_multiple: {name} must have one entry per command ({n}), got {value!r}")
    return [(_command(c), _arguments(a), _count(m)) for c, a, m in zip(command, argv, counts)]


def _command(command) -> str:
    if not isinstance(command, (str, os.PathLike)):
        raise TypeError(f"command must be a str or path, got {type(command).__name__}")
    return os.fspath(command)


def _arguments(args) -> list[str]:
    if args is None:
        return []
    if isinstance(args, str):  # one argument, as mpi4py reads it
        return [args]
    if isinstance(args, bytes) or not all(isinstance(a, (str, os.PathLike)) for a in args):
        raise ValueError(f"args must be a sequence of str, got {args!r}")
    return [os.fspath(a) for a in args]


def _count(maxprocs) -> int:
    if isinstance(maxprocs, bool) or not isinstance(maxprocs, numbers.Integral) or maxprocs < 1:
        raise ValueError(f"maxprocs must be an int >= 1, got {maxprocs!r}")
    return int(maxprocs)


def _child_environment(rank: int, size: int, appnum: int, job: str, store: TCPStore, token: str,
                       port: str) -> dict:
    """The child's rank of its own job (MESHCOMM_RANK ...: the launcher variables it reads first), with its
    traces and dumps in a subfolder of the parent's, named by its job."""
    environment = {k: v for k, v in os.environ.items() if k not in _PARENT_JOB_VARIABLES}
    for folder in ("MESHCOMM_TRACE", "MESHCOMM_DUMP_DIR"):
        if environment.get(folder):
            environment[folder] = os.path.join(environment[folder], job)
    environment.update({
        "MESHCOMM_RANK": str(rank), "MESHCOMM_WORLD_SIZE": str(size),
        "MESHCOMM_LOCAL_RANK": str(rank), "MESHCOMM_LOCAL_WORLD_SIZE": str(size),
        "MESHCOMM_MASTER_ADDR": store.host, "MESHCOMM_MASTER_PORT": str(store.port), "MESHCOMM_STORE": "external",
        "MESHCOMM_TOKEN": token, "MESHCOMM_JOB_ID": job,
        PARENT_PORT: port, PARENT_PID: str(os.getpid()), APPNUM: str(appnum), "PYTHONUNBUFFERED": "1",
    })
    return environment


def _start(commands: list[tuple[str, list[str], int]], port: str, timeout: float) -> _Children:
    """Start every child of one Spawn as one job, whose store this process serves."""
    global _spawned
    with _lock:
        _spawned += 1
        job = f"{config.get('MESHCOMM_JOB_ID') or 'job'}.{os.getpid()}.spawn{_spawned}"
    token = auth.generate_token()
    store = TCPStore(world.runtime().address, 0, is_master=True, timeout=timeout, token=token.encode())
    size = sum(count for _, _, count in commands)
    processes: list[subprocess.Popen] = []
    try:
        for appnum, (command, args, count) in enumerate(commands):
            for _ in range(count):
                environment = _child_environment(len(processes), size, appnum, job, store, token, port)
                processes.append(subprocess.Popen([command, *args], env=environment, stdin=subprocess.DEVNULL))
    except OSError as exc:
        _kill(processes)
        store.close()
        raise err.Exception(err.ERR_SPAWN, f"Spawn could not start {command!r}: {exc}") from None
    return _Children(processes, store)


def _spawn_from(comm: Intracomm, command, args, maxprocs, info, root: int, errcodes, multiple: bool) -> Intercomm:
    g = comm._g
    if errcodes is not None and not isinstance(errcodes, list):
        raise TypeError(f"errcodes must be a list (it receives the codes), got {type(errcodes).__name__}")
    root = dynamic.root_of(g, root, "Spawn_multiple" if multiple else "Spawn")

    def at_root() -> dict:
        commands = _commands(command, args, maxprocs, info, multiple)
        port = dynamic.open_port()
        try:
            children = _start(commands, port, g.timeout)

            def watch() -> None:
                early = children.exited_early()
                if early is not None:
                    raise err.Exception(err.ERR_SPAWN, f"Spawn: {early}")

            try:
                plan = dynamic.accept_at_root(port, g.size, g.timeout, watch)
            except BaseException:
                children.kill()  # none of them can join now: the ones still starting would wait out their timeout
                raise
        finally:
            dynamic.close_port(port)
        plan["counts"] = [count for _, _, count in commands]
        return plan

    intercomm, plan = lane.lane(g).run(lambda: dynamic.join_sides(g, root, at_root, accepting=True))
    if errcodes is not None:
        codes = [[err.SUCCESS] * count for count in plan["counts"]]
        errcodes[:] = codes if multiple else codes[0]
    return intercomm


def _spawn(self: Intracomm, command, args=None, maxprocs: int = 1, info=None, root: int = 0,
           errcodes: list | None = None) -> Intercomm:
    """Collective: start `maxprocs` processes running `command args` (significant at root) as a new job, and
    return the intercommunicator to them. `errcodes`, a list, receives one code per process."""
    return _spawn_from(self, command, args, maxprocs, info, root, errcodes, multiple=False)


def _spawn_multiple(self: Intracomm, command, args=None, maxprocs=1, info=None, root: int = 0,
                    errcodes: list | None = None) -> Intercomm:
    """Spawn for several commands, started as one job in their order; `errcodes` receives a list per command."""
    return _spawn_from(self, command, args, maxprocs, info, root, errcodes, multiple=True)


Intracomm.Spawn = _spawn
Intracomm.Spawn_multiple = _spawn_multiple


# ----- the spawned side


def _watch_parent(pid: int) -> None:
    """Exit once the spawning process is gone: this process was reparented (its parent died), or, when a
    wrapper (a shell script, `timeout`) stands between them, the spawner itself has exited."""
    parent = os.getppid()
    while os.getppid() == parent and _alive(pid):
        time.sleep(_WATCH_SECONDS)
    print(f"meshcomm: the process that spawned this one (pid {pid}) is gone; exiting", file=sys.stderr, flush=True)
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited, and waits to be reaped
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # it exists, under another user
            return True
        return True


def connect_to_parent() -> None:
    """In a spawned child, at import: join the parent's Spawn (every child of it does, collectively)."""
    global _parent, _appnum
    port = os.environ.pop(PARENT_PORT, None)
    if port is None:
        return
    _appnum = int(os.environ.pop(APPNUM, "0"))
    pid = int(os.environ.pop(PARENT_PID, "0"))
    if pid:
        threading.Thread(target=_watch_parent, args=(pid,), name="meshcomm-parent-watch", daemon=True).start()
    _parent = Intracomm._of(world.runtime().world).Connect(port, root=0)


def appnum() -> int:
    """Which command of its parent's Spawn_multiple this process runs (0 when not spawned)."""
    return _appnum


def _get_parent(cls) -> Intercomm:
    """The intercommunicator to the processes that spawned this one; COMM_NULL if none did, or after Disconnect."""
    return _parent if _parent is not None else Intercomm()


Comm.Get_parent = classmethod(_get_parent)
