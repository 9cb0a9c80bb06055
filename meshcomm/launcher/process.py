"""Starting one host's ranks, watching them, and stopping them all when one fails."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TextIO

from meshcomm.launcher.output import Pump, Sink

# How often the supervisor looks at the clock while waiting (grace period, signals).
POLL_SECONDS = 0.1
# How long to wait for the last output after every rank exited: a grandchild
# that inherited the pipes may hold them open forever.
DRAIN_SECONDS = 2.0
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class RankSpec:
    """What to run as one rank: its global and local rank, argv and full environment."""

    rank: int
    local_rank: int
    argv: Sequence[str]
    env: Mapping[str, str]


def exit_code_of(returncode: int) -> int:
    """A shell's view of a process status: 128 + signal number for death by signal."""
    return 128 - returncode if returncode < 0 else returncode


def describe_returncode(returncode: int) -> str:
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"signal {name}"


@dataclass(frozen=True)
class RankFailure:
    rank: int
    local_rank: int
    pid: int
    returncode: int
    stderr_tail: list[str]

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.returncode)


@dataclass(frozen=True)
class JobResult:
    """How the job ended; `exit_code` is what the launcher itself should exit with."""

    exit_code: int
    returncodes: dict[int, int | None]
    failure: RankFailure | None = None
    interrupted_by: int | None = None
    start_error: str | None = None
    stopped: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)  # killed by a signal while the others carried on


@dataclass
class _Running:
    spec: RankSpec
    popen: subprocess.Popen[bytes]
    pumps: list[Pump]


class Supervisor:
    """Runs ranks to completion: the first failure, or a signal to the launcher, stops them all.

    Each rank leads its own session, so a terminal's Ctrl-C reaches only the
    launcher, which forwards it exactly once to every rank's whole process
    group (grandchildren included). Stopping is SIGTERM, then SIGKILL after
    `grace` seconds; every rank is reaped before run() returns.
    """

    def __init__(
        self,
        ranks: Sequence[RankSpec],
        *,
        prefix: bool = True,
        grace: float = 5.0,
        stdout: TextIO,
        stderr: TextIO,
        carry_on: bool = False,
    ) -> None:
        """With `carry_on`, a rank killed by a signal does not stop the others (they may shrink and go on)."""
        if not ranks:
            raise ValueError("ranks must not be empty")
        if grace < 0:
            raise ValueError(f"grace must be >= 0 seconds, got {grace}")
        self._specs = list(ranks)
        self._carry_on = carry_on
        self._prefix = prefix
        self._grace = grace
        self._stdout = Sink(stdout)
        self._stderr = Sink(stderr)
        self._running: list[_Running] = []
        # SimpleQueue.put is reentrant, so the signal handler may use it too.
        self._events: queue.SimpleQueue[tuple[str, int, int]] = queue.SimpleQueue()

    def run(self) -> JobResult:
        previous = self._install_signal_handlers()
        try:
            start_error = self._start()
            if start_error is not None:
                self._stop_all()
                return self._result(exit_code=start_error[0], start_error=start_error[1])
            return self._supervise()
        finally:
            self._kill_and_reap()
            self._restore_signal_handlers(previous)

    def _start(self) -> tuple[int, str] | None:
        for spec in self._specs:
            try:
                popen = subprocess.Popen(
                    list(spec.argv),
                    env=dict(spec.env),
                    # Like mpiexec: only rank 0 reads the launcher's stdin.
                    stdin=None if spec.rank == 0 else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as exc:
                code = 127 if isinstance(exc, FileNotFoundError) else 126
                return code, f"cannot start rank {spec.rank} ({' '.join(spec.argv)}): {exc}"
            assert popen.stdout is not None and popen.stderr is not None
            label = f"[rank{spec.rank}]: ".encode() if self._prefix else b""
            pumps = [
                Pump(popen.stdout, self._stdout, label, name=f"meshcomm-rank{spec.rank}-stdout"),
                Pump(popen.stderr, self._stderr, label, name=f"meshcomm-rank{spec.rank}-stderr"),
            ]
            for pump in pumps:
                pump.start()
            index = len(self._running)
            self._running.append(_Running(spec, popen, pumps))
            threading.Thread(
                target=self._wait_for, args=(index, popen), daemon=True, name=f"meshcomm-wait-rank{spec.rank}"
            ).start()
        return None

    def _wait_for(self, index: int, popen: subprocess.Popen[bytes]) -> None:
        self._events.put(("exit", index, popen.wait()))

    def _supervise(self) -> JobResult:
        pending = len(self._running)
        failed: int | None = None
        interrupted_by: int | None = None
        stop_started: float | None = None
        killed = False
        stopped: list[int] = []
        lost: list[int] = []  # ranks killed by a signal that the others carried on without (carry_on)
        while pending:
            try:
                kind, a, b = self._events.get(timeout=POLL_SECONDS)
            except queue.Empty:
                pass
            else:
                if kind == "exit":
                    pending -= 1
                    if b < 0 and self._carry_on and pending and interrupted_by is None and stop_started is None:
                        lost.append(a)
                        self._stderr.write(f"meshcomm run: rank {self._running[a].spec.rank} was lost "
                                           f"({describe_returncode(b)}); the others carry on "
                                           "(--on-failure continue)\n".encode())
                    elif b != 0 and failed is None and interrupted_by is None and stop_started is None:
                        failed = a
                        stopped = self._live_ranks()
                        self._signal_all(signal.SIGTERM)
                        stop_started = time.monotonic()
                elif interrupted_by is None and failed is None:
                    interrupted_by = a
                    stopped = self._live_ranks()
                    self._signal_all(a)
                    stop_started = time.monotonic()
                else:
                    # A second signal: the user is not willing to wait for the grace period.
                    self._signal_all(signal.SIGKILL)
                    killed = True
            if stop_started is not None and not killed and time.monotonic() - stop_started >= self._grace:
                self._signal_all(signal.SIGKILL)
                killed = True
        if stop_started is not None:
            # Leaders are gone; sweep their groups for stray grandchildren.
            self._signal_all(signal.SIGKILL, include_exited=True)
        self._drain()
        if failed is not None:
            running = self._running[failed]
            returncode = running.popen.returncode
            failure = RankFailure(
                rank=running.spec.rank,
                local_rank=running.spec.local_rank,
                pid=running.popen.pid,
                returncode=returncode,
                stderr_tail=running.pumps[1].tail(),
            )
            return self._result(exit_code=failure.exit_code, failure=failure, stopped=stopped, lost=lost)
        if interrupted_by is not None:
            return self._result(exit_code=128 + interrupted_by, interrupted_by=interrupted_by, stopped=stopped,
                                lost=lost)
        return self._result(exit_code=0, lost=lost)

    def _live_ranks(self) -> list[int]:
        return [r.spec.rank for r in self._running if r.popen.returncode is None]

    def _result(
        self,
        *,
        exit_code: int,
        failure: RankFailure | None = None,
        interrupted_by: int | None = None,
        start_error: str | None = None,
        stopped: Sequence[int] = (),
        lost: Sequence[int] = (),
    ) -> JobResult:
        return JobResult(
            exit_code=exit_code,
            returncodes={r.spec.rank: r.popen.returncode for r in self._running},
            failure=failure,
            interrupted_by=interrupted_by,
            start_error=start_error,
            stopped=list(stopped),
            lost=[self._running[i].spec.rank for i in lost],
        )

    def _signal_all(self, sig: int, include_exited: bool = False) -> None:
        for running in self._running:
            if running.popen.returncode is not None and not include_exited:
                continue
            try:
                os.killpg(running.popen.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _stop_all(self) -> None:
        """Stop ranks already started when a later one could not start."""
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + self._grace
        for running in self._running:
            try:
                running.popen.wait(timeout=max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                pass
        self._kill_and_reap()
        self._drain()

    def _kill_and_reap(self) -> None:
        self._signal_all(signal.SIGKILL)
        for running in self._running:
            running.popen.wait()

    def _drain(self) -> None:
        deadline = time.monotonic() + DRAIN_SECONDS
        for running in self._running:
            for pump in running.pumps:
                pump.join(timeout=max(deadline - time.monotonic(), 0))

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._events.put(("signal", signum, 0))

    def _install_signal_handlers(self) -> dict[int, object]:
        # Python only lets the main thread set handlers; launch() from another
        # thread (a test, a benchmark) simply leaves signals alone.
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, object] = {}
        for sig in FORWARDED_SIGNALS:
            previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    def _restore_signal_handlers(self, previous: dict[int, object]) -> None:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)  # type: ignore[arg-type]
