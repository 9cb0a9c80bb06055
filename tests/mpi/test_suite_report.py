"""How `python -m meshcomm.mpi.suite` reports a failure: every failing rank's account, and a test's first failure
kept beside its tearDown's, summed up in lines that end its output."""

from __future__ import annotations

import unittest

from meshcomm.mpi.suite.__main__ import _combine, failure_summary
from meshcomm.mpi.suite.rank_runner import _Outcomes


class _FailsThenTearsDownBadly(unittest.TestCase):
    __test__ = False  # run by the test below, not collected

    def runTest(self) -> None:
        self.assertEqual(3, 2)

    def tearDown(self) -> None:
        raise TimeoutError("the window's barrier did not finish")


def test_a_test_whose_body_and_teardown_fail_keeps_both_failures_in_order() -> None:
    outcomes = _Outcomes()
    _FailsThenTearsDownBadly().run(outcomes)
    [(outcome, (first, then))] = outcomes.outcomes.values()
    assert outcome == "fail"
    assert "AssertionError: 3 != 2" in first and "TimeoutError: the window's barrier" in then


def test_every_failing_rank_is_reported_and_summed_up_by_its_failures_last_lines() -> None:
    per_rank = [
        {"f.T.a": ["fail", ["Traceback\nTimeoutError: rank 1 gave up"]], "f.T.b": ["pass", ""]},
        {"f.T.a": ["fail", ["Traceback\nAssertionError: 3 != 2", "Traceback\nTimeoutError: barrier"]],
         "f.T.b": ["pass", ""]},
        {"f.T.b": ["pass", ""]},
    ]
    counts = _combine(per_rank, "")
    assert (counts["pass"], counts["fail"], counts["skip"]) == (1, 1, 0)
    passed = _combine([{"f.T.b": ["pass", ""]}], "")
    summary = failure_summary({"f": {2: passed, 3: counts}})
    assert summary.splitlines() == [
        "failed: f at N=3",
        "    f.T.a, rank 0: TimeoutError: rank 1 gave up",
        "    f.T.a, rank 1: AssertionError: 3 != 2; then TimeoutError: barrier",
        "    f.T.a, rank 2: not run on this rank",
    ]
    assert failure_summary({"f": {1: passed}}) == ""
