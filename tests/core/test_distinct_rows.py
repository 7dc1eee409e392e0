"""DistinctRows: a table of whole numbers as its distinct rows, their counts and each row's one."""

from __future__ import annotations

import numpy as np
import pytest

from syndiffix_core import distinct_rows
from syndiffix_core.distinct_rows import DistinctRows


# 50,000 rows are counted in the table of their 43 x 700 x 2 combinations; 300 rows are sorted.
@pytest.mark.parametrize("n", [50_000, 300])
def test_distinct_rows_are_np_unique_of_the_rows(n):
    assert (distinct_rows.DENSE_COMBINATIONS_PER_ROW * n < 43 * 700 * 2) == (n == 300)
    rng = np.random.default_rng(0)
    table = np.column_stack(
        [
            rng.integers(-3, 40, n),  # codes and counts, negative too
            6.9e9 + 86_400.0 * rng.integers(0, 700, n),  # dates as seconds: a day is one step
            rng.choice([0.0, -0.0, 1.0], n),  # booleans; -0.0 is 0.0
        ]
    ).astype(float)
    distinct = DistinctRows.of(table)
    expected, inverse, counts = np.unique(table, axis=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(distinct.values, expected)
    np.testing.assert_array_equal(distinct.counts, counts)
    np.testing.assert_array_equal(distinct.of_row, inverse.ravel())


def test_one_column_and_one_value():
    distinct = DistinctRows.of(np.full((5, 1), 7.0))
    assert distinct.values.tolist() == [[7.0]]
    assert distinct.counts.tolist() == [5]
    assert distinct.of_row.tolist() == [0] * 5


@pytest.mark.parametrize(
    "column",
    [
        np.array([0.0, 0.5, 1.0]),  # not whole numbers
        np.array([0.0, np.nan]),
        np.array([0.0, np.inf]),
        np.array([0.0, 2.0**70]),  # beyond int64
        np.array([0.0, 1.0, float(distinct_rows.MAX_COLUMN_STEPS)]),  # too many steps
        np.zeros(0),
    ],
)
def test_columns_off_a_small_grid_give_none(column):
    assert DistinctRows.of(column[:, None]) is None


def test_too_many_combinations_give_none(monkeypatch):
    table = np.column_stack([np.arange(100.0), np.arange(100.0)])
    assert DistinctRows.of(table) is not None
    monkeypatch.setattr(distinct_rows, "MAX_COMBINATIONS", 100 * 99)
    assert DistinctRows.of(table) is None
