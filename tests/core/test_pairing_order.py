"""The order a stitch zips each final range's rows in (pairing_order.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from syndiffix_core.clustering import StitchOwner
from syndiffix_core.pairing_order import ColumnOrders
from syndiffix_core.stitching import Microtable, stitch


def test_each_range_sorts_first_on_the_column_its_rows_spread_over_most():
    # Range 0 spans column 1 widely and holds one value of column 0; range 1 the other way round;
    # range 2 holds one value of each, and keeps the stitch column order.
    left_values = np.array([[0.0, 0.0], [0.0, 9.0], [5.0, 4.0], [9.0, 4.0], [3.0, 3.0]])
    right_values = np.array([[0.0, 5.0], [1.0, 4.0], [3.0, 3.0]])
    left_group, right_group = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 2])
    orders = ColumnOrders.of(left_group, right_group, left_values, right_values)
    assert orders is not None
    np.testing.assert_array_equal(orders.orders[orders.of_group], [[1, 0], [0, 1], [0, 1]])


def test_ranges_that_spread_over_no_column_more_than_the_first_keep_the_stitch_column_order():
    values = np.array([[0.0, 1.0], [4.0, 1.0], [2.0, 7.0], [6.0, 7.0]])
    group = np.array([0, 0, 1, 1])
    assert ColumnOrders.of(group, group, values, values) is None
    assert ColumnOrders.of(group, group, values[:, :1], values[:, :1]) is None


def test_a_code_sorts_first_where_the_range_holds_many_rows_of_each_of_its_values():
    # A code of 4 values, each on 50 rows, and a measurement, which every range spans a wider share of
    # than the code. Ranges of 100 rows (25-38 per code value) sort on the code first; ranges of about
    # 8 rows (4 per value) on the measurement, whichever comes first among the stitch columns.
    rng = np.random.default_rng(0)
    code = np.repeat(np.arange(4.0), 50)
    measurement = rng.permutation(200).astype(float)
    values = np.column_stack([measurement, code])
    halves = (measurement >= 100).astype(np.int64)
    halves[(code >= 2) & (measurement < 100)] = 1
    orders = ColumnOrders.of(halves, halves, values, values)
    assert orders is not None
    np.testing.assert_array_equal(orders.orders[orders.of_group], [[1, 0], [1, 0]])
    # Ranges of about 8 rows of two neighbouring code values each, spread over the measurement's range.
    small = (code >= 2) * 100 + np.argsort(np.argsort(measurement)) % 12
    assert ColumnOrders.of(small, small, values, values) is None
    code_first = values[:, ::-1]
    orders = ColumnOrders.of(small, small, code_first, code_first)
    assert orders is not None
    held = np.unique(small)
    assert (orders.orders[orders.of_group[held]] == [1, 0]).all()


def test_numbers_of_distinct_rows_follow_each_order_and_tie_on_equal_rows():
    orders = ColumnOrders(np.array([[0, 1], [1, 0]]), np.array([0, 1]))
    rows = np.array([[1.0, 9.0], [2.0, 0.0], [1.0, 9.0], [0.0, 5.0]])
    np.testing.assert_array_equal(orders.ranks(rows), [[1, 2, 1, 0], [2, 0, 2, 1]])
    np.testing.assert_array_equal(
        orders.row_ranks(orders.ranks(rows), np.array([1, 1]), np.array([0, 1])), [2, 0]
    )


def _microtable(columns: dict[int, np.ndarray]) -> Microtable:
    keys = tuple(columns)
    values = np.column_stack([columns[k] for k in keys])
    return Microtable(keys, values, {k: pd.Series(columns[k]) for k in keys})


def _side(rng: np.random.Generator, rows: int) -> dict[int, np.ndarray]:
    """Stitch columns 0 (a day, one row each) and 1 (a measurement that drifts a little with the day)."""
    day = rng.permutation(rows).astype(float)
    return {0: day, 1: 0.5 * day / rows + rng.normal(0, 0.3, rows)}


def test_a_stitch_pairs_rows_on_the_column_its_split_narrowed_least():
    """Each side's few hundred rows split on the day down to a few days per range, while splits on the
    measurement fail the sides' balance (their noise differs); zipped in day order, the measurement
    paired across the sides at random within a range, and the right side's near copy of it, joined
    onto the left side's values, kept a rank correlation of 0.53-0.77 with them (0.99 on its side)."""
    kept = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        left = _microtable({**_side(rng, 370), 2: rng.normal(0, 1, 370)})
        right_columns = _side(rng, 370)
        right = _microtable({**right_columns, 3: right_columns[1] + rng.normal(0, 0.05, 370)})
        joined = stitch(left, right, [0, 1], owner=StitchOwner.LEFT, rng=np.random.default_rng(1))
        kept.append(
            pd.Series(joined.column_values(1)).corr(pd.Series(joined.column_values(3)), method="spearman")
        )
    assert min(kept) > 0.85, kept
