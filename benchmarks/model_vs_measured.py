"""The cost model against the clock: every algorithm's predicted and measured time, and how good the choice is.

    meshcomm tune -o tuning.json && export MESHCOMM_TUNING=tuning.json
    python benchmarks/model_vs_measured.py [--ranks 2,4] [--sizes 8,1K,64K,1M,16M,64M] [--runs 2] [--json out.jsonl]
    python benchmarks/model_vs_measured.py --measured out.jsonl      # the same measurements, other parameters

For each rank count, collective and algorithm it runs one `meshcomm bench`
job over the sizes (the algorithm named with --algo), `--runs` times,
interleaved run by run, and takes each point's median over runs. The model
predicts the same problems with the parameters of MESHCOMM_TUNING (built-in
defaults when unset). Twin algorithms, whose schedules coincide at a point
(tuner/twins.py), run the same program, so a point's measured time of each
is the median of all their runs together. It prints, as markdown:

- per point: the model's choice, its predicted and measured time and the
  error; the fastest measured algorithm; auto / best (1.00 = the choice was
  the fastest measured); and the stop-gap rule the model replaced (fewest
  steps below 64 KiB for all_reduce, else the default) / best;
- per collective: median and largest |error| over every algorithm and size;
- with two runs or more, the noise floor: how often one algorithm's runs
  differ by more than 10%, and how often one run's fastest algorithm is more
  than 10% behind in another run (a choice cannot be judged finer than that).

The auto choice is what the chooser makes with MESHCOMM_TUNING's parameters:
"measured at <size>" when the file has `meshcomm tune --choices` entries for
the point, else "predicted".
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys

from meshcomm import config
from meshcomm.algorithms import ALGORITHMS, DEFAULT
from meshcomm.algorithms.problem import Problem
from meshcomm.bench import runner
from meshcomm.bench.sizes import human_bytes, parse_sizes
from meshcomm.bench.sizes import problem as sizes_problem
from meshcomm.bench.worker import Spec
from meshcomm.transport.local import expected_on_this_host
from meshcomm.tuner import model
from meshcomm.tuner.choose import Chooser
from meshcomm.tuner.predict import predict
from meshcomm.tuner.twins import pooled, twins

COLLS = ["all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"]
ITEMSIZE = 4  # float32, the bench's default


def bench_problem(coll: str, nbytes: int, nranks: int) -> Problem | None:
    """The Problem `meshcomm bench` runs for this row (None: the bench skips it)."""
    return sizes_problem(coll, nbytes, nranks, ITEMSIZE)


def stop_gap_rule(coll: str, nbytes: int) -> str:
    """The choice before the cost model: fewest steps for small all_reduce, else the default."""
    return "recursive_doubling" if coll == "all_reduce" and nbytes <= 64 << 10 else DEFAULT[coll]


def measure(ranks: list[int], colls: list[str], sizes: list[int], runs: int, budget: float) -> dict:
    """{(ranks, coll, algo, bytes): [seconds per run]}."""
    times: dict = {}
    for run in range(runs):
        for n in ranks:
            for coll in colls:
                for algo in ALGORITHMS[coll]:
                    print(f"# run {run + 1}/{runs}: {n} ranks, {coll} {algo}", file=sys.stderr, flush=True)
                    spec = Spec(colls=[coll], sizes=sizes, algos={coll: algo}, budget=budget)
                    code, records = runner.run_job(spec, n, io.StringIO(), sys.stderr)
                    if code != 0:
                        raise SystemExit(f"the {coll}/{algo} job on {n} ranks failed (exit {code})")
                    for r in records:
                        times.setdefault((n, coll, algo, r["bytes"]), []).append(r["time_us"] / 1e6)
    return times


def noise_floor(rows: list[dict]) -> str:
    """How far the same algorithm's runs disagree: what a "best measured" of a point can be trusted to."""
    repeated = [r for r in rows if len(r["runs_us"]) > 1]
    apart = sum(max(r["runs_us"]) / min(r["runs_us"]) > 1.10 for r in repeated)
    points: dict = {}
    for r in repeated:
        points.setdefault((r["ranks"], r["coll"], r["bytes"]), []).append(r)
    # The best of each run alone, and how much slower it is in the other run than that run's best.
    flips = 0
    for algos in points.values():
        runs = min(len(r["runs_us"]) for r in algos)
        best_by_run = [min(algos, key=lambda r: r["runs_us"][k]) for k in range(runs)]
        for k, best in enumerate(best_by_run):
            other = (k + 1) % runs
            if best["runs_us"][other] > 1.10 * best_by_run[other]["runs_us"][other]:
                flips += 1
                break
    ratios = sorted(max(r["runs_us"]) / min(r["runs_us"]) for r in repeated)
    return (f"noise floor: the same algorithm's runs differ by more than 10% at {apart} of {len(repeated)} "
            f"(point, algorithm) pairs (median {statistics.median(ratios):.2f}x, max {ratios[-1]:.2f}x); "
            f"at {flips} of {len(points)} points one run's fastest algorithm is more than 10% slower "
            f"than the fastest in another run")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--colls", default=",".join(COLLS))
    parser.add_argument("--sizes", default="8,1K,64K,1M,16M,64M")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--budget", type=float, default=0.2, help="seconds of timed calls per point and run")
    parser.add_argument("--json", default=None, help="write every (point, algorithm) row as JSON lines")
    parser.add_argument("--measured", default=None, metavar="JSONL",
                        help="take the measurements from an earlier --json file instead of running jobs")
    args = parser.parse_args()
    ranks = [int(x) for x in args.ranks.split(",")]
    colls = args.colls.split(",")
    sizes = parse_sizes(args.sizes)
    path = config.get("MESHCOMM_TUNING")
    parameters = model.load(path) if path else model.DEFAULTS
    cores = len(os.sched_getaffinity(0))
    # The bench's ranks share this host: its `direct` and `two_shot` calls run on the board, by reference
    # when the ranks can reach each other's memory; the model prices them the same way.
    single_copy = expected_on_this_host()[1]

    if args.measured:
        times = {}
        with open(args.measured, encoding="utf-8") as f:
            for row in map(json.loads, f):
                if row["ranks"] in ranks and row["coll"] in colls and row["bytes"] in sizes:
                    times[(row["ranks"], row["coll"], row["algo"], row["bytes"])] = [t / 1e6 for t in row["runs_us"]]
        args.runs = max(len(runs) for runs in times.values())
    else:
        times = measure(ranks, colls, sizes, args.runs, args.budget)
    by_point: dict = {}
    for (n, coll, algo, nbytes), runs in times.items():
        by_point.setdefault((n, coll, nbytes), {})[algo] = runs
    rows = []
    for (n, coll, nbytes), samples in sorted(by_point.items()):
        problem = bench_problem(coll, nbytes, n)
        measured_by_algo = pooled(samples, twins(problem), statistics.median)
        for algo, runs in samples.items():
            measured = measured_by_algo[algo]
            predicted = predict(problem, algo, ITEMSIZE, parameters, cores=cores, single_copy=single_copy)
            rows.append({"ranks": n, "coll": coll, "algo": algo, "bytes": nbytes, "measured_us": measured * 1e6,
                         "own_us": statistics.median(runs) * 1e6, "predicted_us": predicted * 1e6,
                         "error_pct": 100 * (predicted - measured) / measured, "runs_us": [t * 1e6 for t in runs]})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")

    print(f"Parameters: {parameters.source}; {cores} cores; median of {args.runs} runs per point.\n")
    print("| ranks | collective | size | auto choice | chosen by | predicted µs | measured µs | error % "
          "| best measured | best µs | auto/best | stop-gap rule/best |")
    print("|---:|---|---:|---|---|---:|---:|---:|---|---:|---:|---:|")
    ratios, old_ratios, own_ratios = [], [], []
    within_by_ranks: dict[int, list[bool]] = {}
    for n in ranks:
        chooser = Chooser(parameters, n, cores=cores, single_copy=single_copy)
        for coll in colls:
            for nbytes in sizes:
                point = {r["algo"]: r for r in rows if (r["ranks"], r["coll"], r["bytes"]) == (n, coll, nbytes)}
                problem = bench_problem(coll, nbytes, n)
                if not point or problem is None:
                    continue
                choice = chooser.choose(problem, ITEMSIZE)
                auto = choice.name
                best = min(point, key=lambda a: point[a]["measured_us"])
                old = stop_gap_rule(coll, nbytes)
                ratio = point[auto]["measured_us"] / point[best]["measured_us"]
                old_ratio = point[old]["measured_us"] / point[best]["measured_us"]
                ratios.append(ratio)
                within_by_ranks.setdefault(n, []).append(ratio <= 1.10)
                own_ratios.append(point[auto]["own_us"] / min(r["own_us"] for r in point.values()))
                old_ratios.append(old_ratio)
                a = point[auto]
                print(f"| {n} | {coll} | {human_bytes(nbytes)} | {auto} | {choice.how} | {a['predicted_us']:.0f} | "
                      f"{a['measured_us']:.0f} | {a['error_pct']:+.0f} | {best} | {point[best]['measured_us']:.0f} "
                      f"| {ratio:.2f} | {old_ratio:.2f} |")
    print()
    print("| collective | points | median abs error % (all algorithms) | max abs error % | "
          "median abs error % (auto choice) |")
    print("|---|---:|---:|---:|---:|")
    for coll in colls:
        errors = [abs(r["error_pct"]) for r in rows if r["coll"] == coll]
        chosen = [abs(r["error_pct"]) for r in rows if r["coll"] == coll
                  and r["algo"] == Chooser(parameters, r["ranks"], cores=cores, single_copy=single_copy).choose(
                      bench_problem(coll, r["bytes"], r["ranks"]), ITEMSIZE).name]
        if errors:
            print(f"| {coll} | {len(errors)} | {statistics.median(errors):.0f} | {max(errors):.0f} | "
                  f"{statistics.median(chosen):.0f} |")
    print()
    print(f"auto/best over {len(ratios)} points: median {statistics.median(ratios):.2f}, "
          f"max {max(ratios):.2f}, within 10%: {sum(r <= 1.10 for r in ratios)}; "
          f"stop-gap rule/best: median {statistics.median(old_ratios):.2f}, max {max(old_ratios):.2f}, "
          f"within 10%: {sum(r <= 1.10 for r in old_ratios)}")
    print("auto within 10% of best by ranks: " + ", ".join(f"{n}: {sum(w)}/{len(w)}"
                                                            for n, w in within_by_ranks.items()))
    print(f"the same without pooling twins (each algorithm's own runs only): median "
          f"{statistics.median(own_ratios):.2f}, max {max(own_ratios):.2f}, "
          f"within 10%: {sum(r <= 1.10 for r in own_ratios)}")
    if args.runs > 1:
        print(noise_floor(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
