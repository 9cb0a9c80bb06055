"""Size parsing, nccl-tests' bus factors, and how a size becomes per-rank counts."""

from __future__ import annotations

import pytest

from meshcomm.bench.sizes import COLLECTIVES, bus_factor, human_bytes, layout, parse_size, parse_sizes


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("8", 8), ("1K", 1024), ("1k", 1024), ("64M", 64 << 20), ("64MB", 64 << 20), ("64MiB", 64 << 20),
     ("2G", 2 << 30), (" 3 K ", 3072)],
)
def test_parse_size_reads_binary_suffixes(text: str, nbytes: int) -> None:
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["", "K", "1.5M", "-8", "8T", "0", "M8"])
def test_parse_size_rejects_what_is_not_a_size(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(text)


def test_a_range_doubles_from_min_to_max_inclusive() -> None:
    assert parse_sizes("8:64M") == [8 << i for i in range(24)]
    assert parse_sizes("8:100") == [8, 16, 32, 64]
    assert parse_sizes("1K:1K") == [1024]


def test_a_list_is_sorted_and_deduplicated() -> None:
    assert parse_sizes("64M,8,1K,8") == [8, 1024, 64 << 20]


@pytest.mark.parametrize("text", ["64M:8", "8:16:32", "", ",", "8,x"])
def test_bad_size_specs_are_rejected_naming_the_rule(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_sizes(text)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_bus_factors_are_nccl_tests(n: int) -> None:
    assert bus_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n)
    for coll in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        assert bus_factor(coll, n) == pytest.approx((n - 1) / n)
    for coll in ("broadcast", "reduce", "pingpong"):
        assert bus_factor(coll, n) == 1.0


def test_size_is_the_per_rank_buffer_for_all_reduce_broadcast_reduce() -> None:
    for coll in ("all_reduce", "broadcast", "reduce"):
        lay = layout(coll, 1024, 4, 4)
        assert (lay.count, lay.send_count, lay.recv_count, lay.nbytes) == (256, 256, 256, 1024)


def test_size_is_the_larger_buffer_for_the_collectives_that_share_it_out() -> None:
    # 1 KiB of float32 on 4 ranks: 64 elements per rank.
    expected = {
        "all_gather": (64, 64, 256),
        "reduce_scatter": (64, 256, 64),
        "all_to_all": (64, 256, 256),
        "gather": (64, 64, 256),
        "scatter": (64, 256, 64),
    }
    for coll, (count, send, recv) in expected.items():
        lay = layout(coll, 1024, 4, 4)
        assert (lay.count, lay.send_count, lay.recv_count, lay.nbytes) == (count, send, recv, 1024), coll


def test_sizes_that_do_not_divide_round_down_like_nccl_tests() -> None:
    lay = layout("all_gather", 8, 3, 1)
    assert (lay.count, lay.nbytes) == (2, 6)
    assert layout("all_gather", 8, 4, 4).count == 0  # two floats cannot give each of 4 ranks one


def test_algbw_is_size_over_time_and_busbw_applies_the_factor() -> None:
    lay = layout("all_reduce", 1_000_000, 4, 4)
    assert lay.algbw(1e-3) == pytest.approx(1.0)
    assert lay.busbw(1e-3) == pytest.approx(1.5)
    assert layout("all_gather", 4_000_000, 4, 4).busbw(1e-3) == pytest.approx(3.0)


def test_unknown_collectives_and_rank_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown collective 'allreduce'"):
        bus_factor("allreduce", 2)
    with pytest.raises(ValueError, match="nranks must be >= 1"):
        layout("all_reduce", 8, 0, 4)
    assert "pingpong" in COLLECTIVES


def test_human_bytes_names_round_binary_sizes() -> None:
    assert [human_bytes(n) for n in (8, 1024, 3 << 20, 64 << 20, 1 << 30, 1500)] == [
        "8 B", "1 KiB", "3 MiB", "64 MiB", "1 GiB", "1500 B"]
