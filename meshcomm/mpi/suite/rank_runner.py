"""Runs one mpi4py test file on this rank and writes its per-test outcomes as JSON.

Started once per rank by `python -m meshcomm.mpi.suite`; argv: test file, result
prefix (the rank and .json are appended), --exclude method names, --only method
names (when given, only those run). A failed test's outcome carries the text of
each of its failures, in order.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import unittest


class _Outcomes(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, list] = {}

    def addSuccess(self, test) -> None:
        self.outcomes[test.id()] = ["pass", ""]

    def _fail(self, test, text: str) -> None:
        # A test whose body and tearDown both fail is reported twice: the first is usually the cause, so both stay.
        outcome = self.outcomes.get(test.id())
        if outcome is not None and outcome[0] == "fail":
            outcome[1].append(text)
        else:
            self.outcomes[test.id()] = ["fail", [text]]

    def addFailure(self, test, err) -> None:
        self._fail(test, self._exc_info_to_string(err, test)[-2000:])

    addError = addFailure

    def addSkip(self, test, reason) -> None:
        self.outcomes[test.id()] = ["skip", reason]

    def addExpectedFailure(self, test, err) -> None:
        self.outcomes[test.id()] = ["pass", "expected failure"]

    def addUnexpectedSuccess(self, test) -> None:
        self._fail(test, "unexpected success")

    def addSubTest(self, test, subtest, err) -> None:
        if err is not None:
            # unittest reports no success for a test whose subtest failed, so this stays.
            self.addFailure(test, err)


def _selected(suite, only: set[str], exclude: set[str]):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _selected(item, only, exclude)
        else:
            method = item.id().rsplit(".", 1)[-1]
            if method not in exclude and (not only or method in only):
                yield item


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("prefix")
    parser.add_argument("--exclude", nargs="*", default=[])
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
    path = args.path
    spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    loaded = unittest.defaultTestLoader.loadTestsFromModule(module)
    tests = unittest.TestSuite(_selected(loaded, set(args.only), set(args.exclude)))
    result = _Outcomes()
    tests.run(result)
    from mpi4py import MPI

    with open(f"{args.prefix}.{MPI.COMM_WORLD.Get_rank()}.json", "w") as out:
        json.dump(result.outcomes, out)


if __name__ == "__main__":
    main()
