"""Every torch.distributed call on backend "meshcomm" gives what it gives on torch's gloo backend.

One program (programs.every_call) runs unchanged on 3 ranks under each
backend; integer results must be equal, float results equal up to the order
in which 3 ranks' contributions were summed.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from tests.torch_backend import harness, programs  # noqa: E402

SIZE = 3
# Float sums over 3 ranks, whose order differs between gloo's and meshcomm's algorithms.
FLOAT_SUMS = {"all_reduce_async", "all_reduce_async_future", "all_reduce_complex", "tail_all_reduce",
              "coalesced_all_reduce"}


@pytest.fixture(scope="module")
def results() -> dict:
    return {backend: harness.run(programs.every_call, SIZE, backend) for backend in ("gloo", "meshcomm")}


def test_every_call_gives_the_same_results_as_gloo(results):
    for rank in range(SIZE):
        gloo, ours = results["gloo"][rank], results["meshcomm"][rank]
        assert set(ours) - {"meshcomm_only"} == set(gloo), rank
        for key, expected in gloo.items():
            if key in FLOAT_SUMS:
                torch.testing.assert_close(ours[key], expected, rtol=1e-6, atol=1e-6)
            else:
                assert ours[key] == expected, (rank, key)


def test_program_covers_every_kind_of_call(results):
    # The comparison above is only as good as what the program calls.
    keys = set(results["gloo"][0]) | set(results["gloo"][1]) | set(results["gloo"][2])
    for expected in ("all_reduce_BXOR", "all_reduce_torch.bfloat16", "reduce", "gather", "scatter",
                     "all_to_all_single_uneven", "all_to_all", "recv_any", "batch_isend_irecv",
                     "gather_object", "scatter_object_list", "send_recv_object_list", "coalesced_all_reduce",
                     "coalesced_all_gather_single", "evens_all_reduce", "tail_send_recv", "local_sync_all_reduce",
                     "enumerated_all_reduce"):
        assert expected in keys


def test_recv_from_any_rank_reports_each_sender(results):
    assert results["meshcomm"][0]["recv_any"] == [[1, 11], [2, 22]]


def test_ops_gloo_lacks_follow_their_definitions(results):
    inputs = [programs.floats(r, 4) for r in range(SIZE)]
    total = sum(inputs)
    for rank in range(SIZE):
        ours = results["meshcomm"][rank]["meshcomm_only"]
        torch.testing.assert_close(torch.tensor(ours["avg"]), total / SIZE)
        torch.testing.assert_close(torch.tensor(ours["premul_sum"]), total * 0.5)
        wide = sum(programs.floats(r, 2 * SIZE) for r in range(SIZE))
        narrow = sum(programs.floats(r, SIZE, 1.0) for r in range(SIZE))
        expected = [wide[2 * rank: 2 * rank + 2].tolist(), narrow[rank: rank + 1].tolist()]
        torch.testing.assert_close(ours["coalesced_reduce_scatter_single"], expected)
        mixed = ours["all_reduce_coalesced_mixed"]
        assert mixed[0] == sum(programs.ints(r, 3) for r in range(SIZE)).tolist()
        torch.testing.assert_close(torch.tensor(mixed[1]), sum(programs.floats(r, 2) for r in range(SIZE)))


def test_groups_are_meshcomm_process_groups_named_like_torchs(results):
    for rank in range(SIZE):
        ours = results["meshcomm"][rank]["meshcomm_only"]
        assert ours["backend"] == ["meshcomm", "meshcomm", "MeshcommProcessGroup"]
        assert ours["sub_group_rank"] == {0: 0, SIZE - 1: 1}.get(rank)


def test_a_blocking_call_on_the_group_returns_no_work_and_its_result_is_in_place(results):
    total = sum(programs.floats(r, 3) for r in range(SIZE))
    for rank in range(SIZE):
        returned_none, got = results["meshcomm"][rank]["meshcomm_only"]["blocking_on_the_group"]
        assert returned_none is True
        torch.testing.assert_close(torch.tensor(got), total)


def test_a_repeated_blocking_sum_goes_from_the_group_to_its_lane_and_every_other_all_reduce_through_the_api():
    from meshcomm import native

    results = harness.run(programs.repeated_blocking_all_reduce, 2, "meshcomm")
    compiled = native.core is not None  # the ranks run on the path this interpreter has
    skipped = 0 if compiled else 1
    expected_counts = {"repeat": skipped, "another_shape_first": 1, "another_shape_again": skipped,
                       "through_the_group": skipped, "async": 1, "max": 1, "own_timeout": 1, "needs_grad": 1,
                       "strided": 1, "bfloat16": 1, "in_a_tuple": 1, "options_of_another_kind": 1,
                       "options_by_keyword": 1, "at_an_offset": skipped, "float64_first": 1,
                       "float64_again": skipped, "float32_again": skipped, "negative_bit": 1}
    two = [programs.floats(r, 5) for r in range(2)]
    summed = (two[0] + two[1]).tolist()
    seven = (programs.floats(0, 7) + programs.floats(1, 7)).tolist()
    expected_values = {"repeat": summed, "another_shape_first": seven, "another_shape_again": seven,
                       "through_the_group": summed, "async": summed, "max": torch.maximum(*two).tolist(),
                       "own_timeout": summed, "needs_grad": summed, "in_a_tuple": summed,
                       "options_of_another_kind": summed, "options_by_keyword": summed,
                       "strided": (programs.floats(0, 10)[::2] + programs.floats(1, 10)[::2]).tolist(),
                       "bfloat16": (two[0].to(torch.bfloat16) + two[1].to(torch.bfloat16)).float().tolist(),
                       "at_an_offset": (programs.floats(0, 6)[1:] + programs.floats(1, 6)[1:]).tolist(),
                       "float64_first": (two[0].double() + two[1].double()).tolist(),
                       "float64_again": (two[0].double() + two[1].double()).tolist(), "float32_again": summed,
                       "negative_bit": "refused: negative"}
    for out in results:
        assert out.pop("compiled") is compiled
        assert {name: count for name, (count, _) in out.items()} == expected_counts
        assert {name: value for name, (_, value) in out.items()} == expected_values


def test_float8_tensors_are_reduced_and_gathered(results):
    for rank in range(SIZE):
        assert results["meshcomm"][rank]["meshcomm_only"]["float8"] == [[0.5 * SIZE] * 4, [float(r) for r in range(SIZE)]]


def test_meshcomm_functions_run_on_the_backends_groups(results):
    for rank in range(SIZE):
        assert results["meshcomm"][rank]["meshcomm_only"]["meshcomm_on_torch_group"] == [3.0, 3.0, 3.0]


def test_bad_arguments_raise_naming_the_argument(results):
    ours = results["meshcomm"][0]["meshcomm_only"]
    assert ours["two_tensors"][0] == "ValueError" and "tensors must be a list of exactly one tensor" in ours["two_tensors"][1]
    assert ours["meta_tensor"][0] == "ValueError" and "tensor is on device meta" in ours["meta_tensor"][1]


def test_point_to_point_completes_through_its_future_or_by_polling(results):
    assert results["meshcomm"][1]["meshcomm_only"]["irecv_polled"] == [True, programs.floats(0, 2).tolist()]


def test_a_meshcomm_group_works_under_a_gloo_default_group():
    results = harness.run(programs.meshcomm_group_in_a_gloo_world, 2, "gloo")
    expected = (programs.ints(0, 4) + programs.ints(1, 4)).tolist()
    for out in results:
        assert out == {"backends": ["gloo", "meshcomm"], "same_sum": True, "sum": expected}
