"""order_with_random_ties must be exactly np.lexsort((randoms, keys)) for every kind of key column."""

from __future__ import annotations

import numpy as np
import pytest

from syndiffix_core import random_ties
from syndiffix_core.random_ties import (
    dense_ranks,
    order_by_rank_with_random_ties,
    order_with_random_ties,
    stable_order,
)


def _keys(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "distinct":
        return rng.lognormal(size=n)
    if kind == "few":
        return rng.integers(0, 5, n).astype(float)
    if kind == "many_ties":  # more tied runs than fit one composite integer key
        return rng.integers(0, 5_000, n).astype(float)
    if kind == "some_ties":
        keys = rng.normal(size=n)
        rounded = rng.random(n) < 0.2  # a fifth of the rows on one of ~60 values, the rest distinct
        keys[rounded] = np.round(keys[rounded], 1)
        return keys
    if kind == "whole_nan_zero":  # whole numbers: one composite sort, NaN last, -0.0 equal to 0.0
        keys = rng.integers(-3, 4, n).astype(float)
        keys[rng.random(n) < 0.2] = np.nan
        keys[keys == 0] = rng.choice([0.0, -0.0], int((keys == 0).sum()))
        return keys
    if kind == "wide_whole":  # whole numbers spanning more than one composite key holds
        return rng.choice([0.0, 2.0**40, 3.0, 2.0**40 + 1], n)
    if kind == "nan_inf_zero":
        return rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5], n)
    if kind == "dates":  # seconds since 1800 a day apart: ranks are steps of a day, NaN one past the last
        keys = 6.9e9 + 86_400.0 * rng.integers(0, 760, n)
        keys[rng.random(n) < 0.1] = np.nan
        return keys
    raise ValueError(kind)


@pytest.mark.parametrize(
    "kind",
    ["distinct", "few", "many_ties", "some_ties", "whole_nan_zero", "wide_whole", "nan_inf_zero", "dates"],
)
@pytest.mark.parametrize("n", [0, 1, 2, 17, 20_000])
def test_equals_lexsort(kind: str, n: int) -> None:
    rng = np.random.default_rng(n + len(kind))
    keys = _keys(kind, n, rng)
    randoms = rng.random(n)
    assert np.array_equal(order_with_random_ties(keys, randoms), np.lexsort((randoms, keys)))


@pytest.mark.parametrize(
    "kind",
    ["distinct", "few", "many_ties", "some_ties", "whole_nan_zero", "wide_whole", "nan_inf_zero", "dates"],
)
@pytest.mark.parametrize("n", [0, 1, 2, 17, 20_000])
def test_stable_order_equals_a_stable_argsort(kind: str, n: int) -> None:
    keys = _keys(kind, n, np.random.default_rng(n + 2 * len(kind)))
    assert np.array_equal(stable_order(keys), np.argsort(keys, kind="stable"))


def test_equal_random_numbers_within_a_tie_fall_back_to_row_order() -> None:
    """Two tied rows with the same random number keep their row order, as lexsort keeps them."""
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 3, 1_000).astype(float)
    randoms = rng.random(1_000)
    randoms[10::7] = randoms[3]  # many copies of one random number, across every key value
    assert np.array_equal(order_with_random_ties(keys, randoms), np.lexsort((randoms, keys)))


def test_sorts_by_key_then_random_number() -> None:
    keys = np.array([2.0, 1.0, 2.0, 1.0, np.nan, 2.0])
    randoms = np.array([0.9, 0.5, 0.1, 0.2, 0.3, 0.5])
    assert order_with_random_ties(keys, randoms).tolist() == [3, 1, 2, 5, 0, 4]


def test_random_numbers_that_differ_only_in_their_lowest_bits() -> None:
    """With thousands of tied runs the sort key keeps fewer than 53 bits of each random number: rows whose
    numbers differ only below those bits must still come in the order of their whole numbers."""
    rng = np.random.default_rng(2)
    keys = np.repeat(np.arange(2_000, dtype=float), 2)
    base = rng.integers(0, 2**50, 2_000) * 2.0 * 2.0**-53  # even multiples of 2**-53
    randoms = np.empty(4_000)
    randoms[0::2] = base + 2.0**-53  # the larger number first in each pair
    randoms[1::2] = base
    order = order_with_random_ties(keys, randoms)
    assert np.array_equal(order, np.lexsort((randoms, keys)))
    assert order[:2].tolist() == [1, 0]


def test_all_null_keys_keep_the_random_order() -> None:
    randoms = np.array([0.5, 0.1, 0.9, 0.3])
    keys = np.full(4, np.nan)
    assert order_with_random_ties(keys, randoms).tolist() == [1, 3, 0, 2]


@pytest.mark.parametrize("kind", ["distinct", "many_ties", "some_ties", "whole_nan_zero", "nan_inf_zero"])
def test_rows_drawn_from_a_side_sort_by_their_dense_ranks(kind: str) -> None:
    """Stitching orders rows drawn (with repeats) from one side by their ranks in the side's own order:
    the same permutation as sorting their keys."""
    rng = np.random.default_rng(3)
    keys = _keys(kind, 5_000, rng)
    order = order_with_random_ties(keys, rng.random(len(keys)))
    rows = rng.integers(0, len(keys), 7_000)
    randoms = rng.random(len(rows))
    ranks = dense_ranks(keys, order)[rows]
    assert np.array_equal(order_by_rank_with_random_ties(ranks, randoms), np.lexsort((randoms, keys[rows])))


def test_dense_ranks_count_distinct_keys_below() -> None:
    keys = np.array([2.5, np.nan, -1.0, 2.5, np.nan, 7.0])
    order = order_with_random_ties(keys, np.linspace(0, 0.5, 6))
    assert dense_ranks(keys, order).tolist() == [1, 3, 0, 1, 3, 2]


def test_the_order_without_positions_in_the_key_is_the_same() -> None:
    """Past 2**31 rows the position no longer fits next to the rank; the argsort that orders such rows
    gives the same permutation (checked here on a size that fits both ways)."""
    rng = np.random.default_rng(4)
    ranks = rng.integers(0, 3_000, 20_000)
    randoms = rng.random(20_000)
    randoms[::9] = randoms[5]  # equal random numbers within a rank: the row decides
    rows = np.arange(20_000)
    expected = np.lexsort((rows, randoms, ranks))
    assert np.array_equal(random_ties._order_by_rank_argsort(ranks, randoms, rows), expected)
    assert np.array_equal(random_ties._order_by_rank(ranks, randoms, rows), expected)


def test_whole_number_ranks_count_steps_of_the_keys_common_divisor() -> None:
    # Dates as seconds: 760 days take 10 bits as steps of a day, 26 as seconds; the bits saved keep
    # more of each random number in the one integer sort.
    keys = np.array([6.9e9 + 86_400.0 * 759, np.nan, 6.9e9, 6.9e9 + 86_400.0])
    assert random_ties._whole_number_ranks(keys).tolist() == [759, 760, 0, 1]
    assert random_ties._whole_number_ranks(keys[[0, 2]] * 3).tolist() == [1, 0]
    assert random_ties._whole_number_ranks(np.array([5.0, 5.0])).tolist() == [0, 0]
