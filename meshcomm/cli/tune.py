"""`meshcomm tune`: measure the cost model's α, β, γ on this machine and save them for MESHCOMM_TUNING.

With --choices it also times every algorithm of each benchmarked collective
on the group sizes named and records, per size, the one whose runs have the
smallest median (tuner/table.py), which the automatic choice then prefers to
the model's prediction.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from meshcomm.cli import argtypes

# link class -> (what stands for it on this machine, environment of its measuring job). Lanes are off and
# sends go by reference from the collectives' size: a schedule's messages take the engine's path so, where a
# face's repeated send would take its lane and a few-MiB send would stream (docs/transports.md).
LINK_JOBS = {
    "same_host": ("shared memory", {"MESHCOMM_LANES": "0", "MESHCOMM_STREAM_BYTES": "0"}),
    "other_host": ("TCP over loopback, standing in for another host", {"MESHCOMM_TRANSPORT": "tcp",
                                                                       "MESHCOMM_LANES": "0"}),
}
# The sizes `benchmarks/model_vs_measured.py` checks the choice at, a decade or two apart.
CHOICE_SIZES = "8,1K,64K,1M,16M"
ITEMSIZE = 4  # the bench's float32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from meshcomm.tuner.model import default_path

    parser.add_argument("-n", "--nproc-per-node", dest="nproc", type=argtypes.positive_int, default=2, metavar="N",
                        help="ranks of each measuring job (default 2; the ping-pong runs between ranks 0 and 1, "
                             "the per-call cost is an all_reduce on all N)")
    parser.add_argument("-o", "--output", default=default_path(), metavar="FILE",
                        help=f"where to save the parameters (default {default_path()})")
    parser.add_argument("--budget", type=argtypes.positive_seconds, default=0.3,
                        help="seconds of timed calls per measured point (default 0.3)")
    parser.add_argument("--choices", type=_group_sizes, default=[], metavar="RANKS",
                        help="also time every algorithm on groups of these sizes (e.g. 2,4,8) and record the "
                             "fastest per collective and size, which the automatic choice then uses instead of "
                             "the model (a few minutes; default: none, the model decides)")
    parser.add_argument("--choice-sizes", type=_sizes, default=CHOICE_SIZES, metavar="SIZES",
                        help=f"the sizes --choices times, as `meshcomm bench --sizes` (default {CHOICE_SIZES})")
    parser.add_argument("--choice-runs", type=argtypes.positive_int, default=2, metavar="N",
                        help="interleaved runs of --choices; each algorithm keeps the median of its runs (default 2)")


def _group_sizes(text: str) -> list[int]:
    sizes = [argtypes.integer(part, minimum=2) for part in text.split(",") if part.strip()]
    if not sizes:
        raise argparse.ArgumentTypeError(f"must list group sizes of at least 2 ranks (e.g. 2,4,8), got {text!r}")
    return sorted(set(sizes))


def _sizes(text: str) -> list[int]:
    from meshcomm.bench.sizes import parse_sizes

    try:
        return parse_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _choice_lines(choices: tuple) -> list[str]:
    """One line per collective and group size: the measured fastest algorithm at each payload."""
    from meshcomm.bench.sizes import human_bytes

    lines: dict[tuple[str, int], list[str]] = {}
    for row in choices:
        lines.setdefault((row.collective, row.nranks), []).append(f"{human_bytes(row.nbytes)} {row.algorithm}")
    return [f"{'measured':<11} {collective} on {nranks} ranks: {', '.join(cells)}"
            for (collective, nranks), cells in sorted(lines.items(), key=lambda item: (item[0][1], item[0][0]))]


@contextmanager
def _environment(changes: dict[str, str]) -> Iterator[None]:
    """The measuring jobs inherit this process's environment: set `changes`, and no MESHCOMM_TUNING or _ALGO."""
    saved = {name: os.environ.get(name) for name in (*changes, "MESHCOMM_TUNING", "MESHCOMM_ALGO")}
    for name in ("MESHCOMM_TUNING", "MESHCOMM_ALGO"):
        os.environ.pop(name, None)
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _bench(spec, nproc: int) -> list[dict]:
    from meshcomm.bench import runner

    code, records = runner.run_job(spec, nproc, io.StringIO(), sys.stderr)
    if code != 0:
        raise RuntimeError(f"the measuring job ({', '.join(spec.colls)}) failed with exit code {code}")
    return records


def _measure_choices(group_sizes: list[int], sizes: list[int], runs: int, budget: float) -> tuple:
    """Every algorithm of each benchmarked collective timed on each group size: the fastest per point.

    The runs are interleaved, so a busy minute of the machine falls on several
    algorithms instead of all runs of one. Each algorithm keeps the median of
    its runs, pooled with its twins' (tuner/twins.py): the benchmark that
    judges the choice takes medians too, and an algorithm whose time varies
    from run to run would win on its one lucky run if the fastest counted.
    """
    from meshcomm.algorithms import ALGORITHMS
    from meshcomm.bench.sizes import COLLECTIVES, problem
    from meshcomm.bench.worker import Spec
    from meshcomm.tuner.table import fastest
    from meshcomm.tuner.twins import pooled, twins

    samples: dict = {}
    problems = {}
    for run in range(runs):
        for nranks in group_sizes:
            for collective in (c for c in COLLECTIVES if c in ALGORITHMS):
                for algorithm in ALGORITHMS[collective]:
                    print(f"meshcomm tune: choices, run {run + 1}/{runs}, {nranks} ranks: {collective} {algorithm} ...",
                          file=sys.stderr)
                    spec = Spec(colls=[collective], sizes=sizes, algos={collective: algorithm}, budget=budget)
                    with _environment({}):
                        records = _bench(spec, nranks)
                    for record in records:
                        measured = problem(collective, record["bytes"], nranks, ITEMSIZE)
                        point = (collective, nranks, measured.payload_elements() * ITEMSIZE)
                        problems[point] = measured
                        samples.setdefault(point, {}).setdefault(algorithm, []).append(record["time_us"] / 1e6)
    return fastest({point: pooled(times, twins(problems[point]), statistics.median)
                    for point, times in samples.items()})


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from meshcomm.algorithms.problem import Problem
    from meshcomm.bench.worker import Spec
    from meshcomm.tuner import measure, model
    from meshcomm.tuner.predict import predict

    if args.nproc < 2:
        print("meshcomm tune: -n must be at least 2 (a ping-pong needs two ranks)", file=sys.stderr)
        return 2
    links = {}
    for link_class, (meaning, env) in LINK_JOBS.items():
        print(f"meshcomm tune: {link_class} ({meaning}): ping-pong on {args.nproc} ranks ...", file=sys.stderr)
        with _environment(env):
            pingpong = Spec(colls=["pingpong"], sizes=list(measure.PINGPONG_BYTES), budget=args.budget)
            links[link_class] = measure.fit_link(measure.one_way_times(_bench(pingpong, args.nproc)))
    print("meshcomm tune: numpy reduction and copy rates ...", file=sys.stderr)
    cores = len(os.sched_getaffinity(0))
    parameters = model.Parameters(**links, gamma=measure.gamma(), copy=measure.copy_rate(), call=0.0,
                                  crowded_alpha=0.0, source=args.output)

    def small_all_reduce(nproc: int, algorithm: str = "recursive_doubling") -> tuple[Problem, float]:
        print(f"meshcomm tune: 8 B all_reduce ({algorithm}) on {nproc} ranks ...", file=sys.stderr)
        spec = Spec(colls=["all_reduce"], sizes=[8], algos={"all_reduce": algorithm}, budget=args.budget)
        with _environment({}):
            return Problem("all_reduce", nproc, (2,)), _bench(spec, nproc)[0]["time_us"] / 1e6

    def predicted(problem: Problem, parameters: model.Parameters, algorithm: str = "recursive_doubling") -> float:
        return predict(problem, algorithm, 4, parameters, cores=cores)

    def solved(name: str, problem: Problem, measured: float, parameters: model.Parameters,
               algorithm: str = "recursive_doubling") -> model.Parameters:
        """`parameters` with field `name` set so that the model's time of `problem` equals `measured`."""
        def at(value: float) -> float:
            return predicted(problem, replace(parameters, **{name: value}), algorithm)
        return replace(parameters, **{name: measure.solve_linear(measured, at(0.0), at(1.0))})

    problem, measured = small_all_reduce(args.nproc)
    steps = predicted(problem, parameters)
    parameters = replace(parameters, call=measure.call_overhead(measured, steps))
    crowd = measure.crowded_ranks(cores)
    if crowd is None:
        crowded = "not measured (more than 8 cores); 4 x alpha"
        parameters = replace(parameters, crowded_alpha=4 * parameters.same_host.alpha)
    else:
        problem, crowd_measured = small_all_reduce(crowd)
        parameters = solved("crowded_alpha", problem, crowd_measured, parameters)
        crowded = f"from an 8 B all_reduce on {crowd} ranks: {crowd_measured * 1e6:.1f} µs"
    problem, board_measured = small_all_reduce(args.nproc, "direct")
    parameters = solved("board", problem, board_measured, parameters, "direct")
    if args.choices:
        parameters = replace(parameters, choices=_measure_choices(args.choices, args.choice_sizes, args.choice_runs,
                                                                      args.budget))
    model.save(parameters, args.output)

    for link_class, (meaning, _) in LINK_JOBS.items():
        link = parameters.link(link_class)
        print(f"{link_class:<11} alpha {link.alpha * 1e6:8.1f} µs   beta {link.beta * 1e9:6.3f} ns/B "
              f"({1e-9 / link.beta if link.beta else float('inf'):.2f} GB/s)   [{meaning}]")
    print(f"{'gamma':<11} {parameters.gamma * 1e9:6.3f} ns per reduced byte ({1e-9 / parameters.gamma:.2f} GB/s)")
    print(f"{'copy':<11} {parameters.copy * 1e9:6.3f} ns per copied byte ({1e-9 / parameters.copy:.2f} GB/s)")
    print(f"{'call':<11} {parameters.call * 1e6:6.1f} µs per call (8 B all_reduce on {args.nproc} ranks: "
          f"{measured * 1e6:.1f} µs, {steps * 1e6:.1f} µs of it predicted for its steps)")
    print(f"{'board':<11} {parameters.board * 1e6:6.1f} µs per small call on the group's shared-memory board "
          f"(8 B all_reduce, direct, on {args.nproc} ranks: {board_measured * 1e6:.1f} µs)")
    print(f"{'crowded':<11} alpha {parameters.crowded_alpha * 1e6:8.1f} µs when ranks outnumber the {cores} cores "
          f"({crowded})")
    for line in _choice_lines(parameters.choices):
        print(line)
    print(f"saved {args.output}; use it with: export MESHCOMM_TUNING={args.output}")
    return 0
