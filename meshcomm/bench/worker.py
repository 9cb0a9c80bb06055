"""One rank of `meshcomm bench`: the timing loop, the same for every library.

    python -m meshcomm.bench.worker '{"lib": "meshcomm", "colls": ["all_reduce"], "sizes": [8, 1024], ...}'

`meshcomm bench` starts it (with `meshcomm run`'s launcher, or mpiexec for
MPICH); the keys are those of Spec. For each collective and size a rank
fills fresh buffers with known values, makes warm-up calls, then times N calls
one by one with perf_counter. Only after the last timed call do the ranks
all-gather their per-call times (with the library under test, outside the
timed region); a call's time is the slowest rank's, and the row reports the
median over calls, so one descheduled rank shows up as one slow call, not as a
slower average. With `check`, one more call on fresh buffers is compared with
the expected values and the wrong elements of all ranks are added up
(nccl-tests' #wrong). Rank 0 prints nccl-tests' table rows as they complete
and appends one JSON line per row to `json`.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import TextIO

import numpy as np

from meshcomm.bench import data, report
from meshcomm.bench.libs import LIBS, Library, open_library
from meshcomm.bench.sizes import COLLECTIVES, ROOTED, Layout, layout

MIN_ITERS = 5
MAX_ITERS = 1000
# Without --iters, a point gets about this many seconds of timed calls (at least MIN_ITERS).
BUDGET_SECONDS = 1.0


@dataclass
class Spec:
    """What one worker job measures; every rank gets the same."""

    lib: str = "meshcomm"
    colls: list[str] = field(default_factory=lambda: ["all_reduce"])
    sizes: list[int] = field(default_factory=lambda: [8])
    dtype: str = "float32"
    op: str = "sum"
    root: int = 0
    algos: dict[str, str] = field(default_factory=dict)  # collective -> meshcomm algorithm name
    iters: int | None = None
    warmup: int | None = None
    check: bool = False
    json: str | None = None
    budget: float = BUDGET_SECONDS
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.lib not in LIBS:
            raise ValueError(f"lib must be one of {', '.join(LIBS)}, got {self.lib!r}")
        for coll in self.colls:
            if coll not in COLLECTIVES:
                raise ValueError(f"unknown collective {coll!r}; choose from: {', '.join(COLLECTIVES)}")
        data.check_op(self.op, data.check_dtype(self.dtype))
        if any(size < 1 for size in self.sizes):
            raise ValueError(f"sizes must be >= 1 byte, got {self.sizes}")
        if self.root < 0:
            raise ValueError(f"root must be >= 0, got {self.root}")
        for name, value in (("iters", self.iters), ("warmup", self.warmup)):
            if value is not None and value < (1 if name == "iters" else 0):
                raise ValueError(f"{name} must be >= {1 if name == 'iters' else 0}, got {value}")
        if not self.budget > 0:
            raise ValueError(f"budget must be > 0 seconds, got {self.budget}")

    @classmethod
    def from_json(cls, text: str) -> Spec:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError(f"the worker's argument must be a JSON object, got {text!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"unknown worker setting(s) {unknown}; known: {sorted(known)}")
        return cls(**raw)

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def nominal_iterations(nbytes: int) -> int:
    """About 1 GiB of traffic per point: 1000 calls of small messages, 16 of 64 MiB."""
    return max(MIN_ITERS, min(MAX_ITERS, (1 << 30) // max(nbytes, 1)))


def default_warmup(nbytes: int) -> int:
    return max(2, min(20, nominal_iterations(nbytes) // 10))


def budget_iterations(nominal: int, seconds_per_call: float, budget: float) -> int:
    """Fewer calls when they are slow (an oversubscribed rival), never fewer than MIN_ITERS."""
    if seconds_per_call <= 0:
        return nominal
    return max(MIN_ITERS, min(nominal, int(budget / seconds_per_call)))


def skip_reason(lay: Layout, nranks: int, dtype: str) -> str | None:
    if lay.collective == "pingpong" and nranks < 2:
        return "pingpong needs 2 ranks"
    if lay.count == 0:
        return f"less than one {dtype} per rank for {lay.collective} on {nranks} ranks"
    return None


def planned_rows(spec: Spec, nranks: int) -> int:
    """How many rows a job prints: the progress bar's total."""
    itemsize = data.check_dtype(spec.dtype).itemsize
    return sum(
        1
        for coll in spec.colls
        for nbytes in spec.sizes
        if skip_reason(layout(coll, nbytes, nranks, itemsize), nranks, spec.dtype) is None
    )


def _timed(call: Callable[[], None], count: int) -> np.ndarray:
    # The garbage collector stays on: a collection a library's own allocations
    # trigger is part of what that library costs a program.
    times = np.empty(count, dtype=np.float64)
    clock = time.perf_counter
    for i in range(count):
        start = clock()
        call()
        times[i] = clock() - start
    return times


def measure(lib: Library, spec: Spec, lay: Layout) -> report.Record:
    """Time one (collective, size) point on every rank; the returned record is the same on all."""
    dtype = data.check_dtype(spec.dtype)
    coll = lay.collective
    root = spec.root if coll in ROOTED else -1
    op = data.op_for(coll, spec.op)
    algorithm = spec.algos.get(coll) if lib.name == "meshcomm" else None
    call = lib.bind(lay, data.allocate(lay, lib.rank, root, dtype, op), root, op, algorithm)

    nominal = nominal_iterations(lay.nbytes)
    warm = _timed(call, default_warmup(lay.nbytes) if spec.warmup is None else spec.warmup)
    if spec.iters is not None:
        iters = spec.iters
    else:
        # Every rank must choose the same count: agree on the slowest rank's estimate.
        mine = float(np.median(warm[1:] if warm.size > 1 else warm)) if warm.size else 0.0
        iters = budget_iterations(nominal, float(lib.all_gather(np.array([mine])).max()), spec.budget)
    times = _timed(call, iters)

    wrong_here = 0.0
    if spec.check:
        fresh = data.allocate(lay, lib.rank, root, dtype, op)
        lib.bind(lay, fresh, root, op, algorithm)()
        want = data.expected(lay, lib.rank, root, dtype, op)
        wrong_here = float(data.count_wrong(fresh.recv, want)) if want is not None else 0.0

    table = lib.all_gather(np.append(times, wrong_here))
    slowest = table[:, :iters].max(axis=0)
    seconds = statistics.median(slowest.tolist())
    if coll == "pingpong":
        seconds /= 2  # one way is half a round trip
    return {
        "lib": lib.name,
        "coll": coll,
        "ranks": lib.size,
        "bytes": lay.nbytes,
        "count": lay.count,
        "dtype": spec.dtype,
        "op": op or "none",
        "root": root,
        "algo": algorithm,
        "iters": iters,
        "time_us": seconds * 1e6,
        "algbw_GBps": lay.algbw(seconds),
        "busbw_GBps": lay.busbw(seconds),
        "wrong": int(table[:, iters].sum()) if spec.check else None,
    }


def run(lib: Library, spec: Spec, out: TextIO | None = None) -> list[report.Record]:
    """The sweep: every collective, every size; rank 0 prints and appends JSON as rows complete."""
    out = out if out is not None else sys.stdout
    if spec.root >= lib.size:
        raise ValueError(f"root must be in [0, {lib.size}), got {spec.root}")
    leader = lib.rank == 0
    itemsize = data.check_dtype(spec.dtype).itemsize
    records: list[report.Record] = []
    printing = leader  # rank 0 prints, until its reader leaves

    def say(line: str) -> None:
        nonlocal printing
        if not printing:
            return
        try:
            out.write(line + "\n")
            out.flush()
        except BrokenPipeError:
            # `meshcomm bench ... | head`: the reader left. The other ranks time on with this one, so it goes on,
            # silent (JSON lines still go to --json); its stdout points at /dev/null for the interpreter's exit.
            printing = False
            if out is sys.stdout:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    version = lib.describe()
    say(f"# meshcomm bench: {lib.name} ({version}), {lib.size} ranks, {spec.dtype}, op {spec.op}")
    for coll in spec.colls:
        algorithm = spec.algos.get(coll) if lib.name == "meshcomm" else None
        say("#")
        rooted = f", root {spec.root}" if coll in ROOTED else ""
        say(f"# {coll}" + (f", algorithm {algorithm}" if algorithm else "") + rooted)
        for line in report.header_lines():
            say(line)
        rows = []
        for nbytes in spec.sizes:
            lay = layout(coll, nbytes, lib.size, itemsize)
            reason = skip_reason(lay, lib.size, spec.dtype)
            if reason is not None:
                say(f"# {nbytes} B skipped: {reason}")
                continue
            rec = measure(lib, spec, lay)
            rec["version"] = version
            rows.append(rec)
            say(report.row(rec))
            if leader and spec.json:
                with open(spec.json, "a", encoding="utf-8") as f:
                    report.write_json_lines([rec], f)
        say(report.footer(rows))
        records += rows
    return records


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m meshcomm.bench.worker '<JSON settings>' (started by `meshcomm bench`)", file=sys.stderr)
        return 2
    spec = Spec.from_json(args[0])
    # Timed in-place sums grow each call until floats reach inf (the checked call
    # uses fresh buffers); inf costs no more than any other value.
    warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
    lib = open_library(spec.lib, spec.timeout)
    try:
        run(lib, spec)
    finally:
        lib.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
